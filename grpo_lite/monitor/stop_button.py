"""A notebook Stop button that is heard while the kernel is busy training.

A kernel runs widget callbacks on its shell thread, which the training cell keeps busy, so a plain button
would only react once training is over. ipykernel 7 can route one comm's messages to a subshell (a second
shell thread with its own loop): the click lands at once. Older kernels (Colab, Kaggle) have no subshells;
there jupyter-ui-poll hands pending widget events to the button between training steps.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack


class StopButton:
    """Shows an ``ipywidgets.Button``; a click calls ``on_stop`` once. Call :meth:`poll` between steps."""

    def __init__(self, on_stop: Callable[[], None]):
        import ipywidgets
        from IPython import get_ipython
        from IPython.display import display

        self.on_stop = on_stop
        self.button = ipywidgets.Button(description="Stop", button_style="danger", icon="stop",
                                        tooltip="end training after this step and save a checkpoint")
        self.button.on_click(self._clicked)
        display(self.button)
        self._kernel = getattr(get_ipython(), "kernel", None)
        self._events = ExitStack()
        self._poll = None
        self._subshell = self._open_subshell()
        if self._subshell is None:
            from jupyter_ui_poll import ui_events

            self._poll = self._events.enter_context(ui_events())

    def _subshell_requests(self):
        """The socket ipykernel's control thread uses to create and delete subshells (None before ipykernel 7)."""
        if not getattr(self._kernel, "_supports_kernel_subshells", False):
            return None
        return self._kernel.shell_channel_thread.manager.control_to_shell_channel.from_socket

    def _open_subshell(self) -> str | None:
        requests = self._subshell_requests()
        if requests is None:
            return None
        requests.send_json({"type": "create"})
        reply = requests.recv_json()
        if reply.get("status") != "ok":
            return None
        self.button.comm._reply_subshell_id = reply["subshell_id"]  # the kernel routes this comm's messages there
        return reply["subshell_id"]

    def _clicked(self, _button) -> None:
        self.button.description, self.button.disabled = "Stopping after this step", True
        self.on_stop()

    def poll(self) -> None:
        """Deliver pending clicks (needed only where the kernel has no subshells)."""
        if self._poll is not None:
            self._poll(10)

    def close(self) -> None:
        """Disable the button, then give back the subshell or the event hook."""
        self.button.description, self.button.disabled = "Training ended", True  # routes the comm back to the main shell
        self._events.close()
        if self._subshell is not None:
            requests = self._subshell_requests()
            requests.send_json({"type": "delete", "subshell_id": self._subshell})
            requests.recv_json()
            self._subshell = None
