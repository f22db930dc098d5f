"""A notebook Stop button that is heard while the kernel is busy training.

A kernel runs widget callbacks on its main shell, which the training cell keeps busy, so a plain button would
only react once training is over. How a click can get through depends on what the kernel does with it, read
in each ipykernel release's source (kernelbase.py, comm/comm.py):

- ipykernel 7.4 on: the shell channel thread sends a comm's messages to the subshell named by the comm's
  ``_reply_subshell_id`` (``Kernel.shell_channel_thread_main`` asks ``comm._reply_subshell_for``). The button's
  comm gets a subshell of its own (a second shell thread with its own loop): the click lands at once.
- ipykernel 7.0 to 7.3: subshells exist, but the shell channel thread routes by the message header alone
  (the frontend names no subshell), and there is no ``do_one_iteration`` to drain the main shell by hand
  (7.0's skips the shell stream). The button's clicks are taken off the shell channel thread itself, before
  routing; every other message goes on as before.
- ipykernel 5 and 6 (Colab, Kaggle): no subshells; jupyter-ui-poll hands pending shell messages to the
  kernel between training steps, keeping execute requests of queued cells for after the cell. A cell queued
  behind another that polled ("Run all") is run by jupyter-ui-poll's replay while the kernel's own dispatch
  loop waits on its message queue: tornado's ``Queue.put_nowait`` hands the next message (the click) straight
  to that waiting ``get``, which runs only once the cell ends. The waiting ``get`` is given a message that does
  nothing first, so the click stays in the queue for the poll.

Where none of these can deliver the click (no ipywidgets, no jupyter-ui-poll, an unknown kernel), no button
is drawn and the view says how to stop: interrupt the kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack

SUBSHELL = "subshell"
SHELL_CHANNEL = "shell channel"
UI_POLL = "jupyter-ui-poll"
HOW_TO_STOP = "to stop after the current step with a checkpoint, interrupt the kernel (the \u25a0 button or Kernel > Interrupt)"


def _has_module(name: str) -> bool:
    from importlib import import_module

    try:
        import_module(name)
    except ImportError:
        return False
    return True


def click_delivery(kernel) -> str | None:
    """How a click reaches ``kernel`` while a cell runs (see the module docstring), or None where it cannot."""
    if kernel is None or not _has_module("ipywidgets"):
        return None
    if getattr(kernel, "_supports_kernel_subshells", False):
        from ipykernel.comm import Comm

        if hasattr(Comm, "_reply_subshell_for"):
            return SUBSHELL
        if hasattr(kernel, "shell_channel_thread_main") and getattr(kernel, "shell_stream", None) is not None:
            return SHELL_CHANNEL
        return None
    if hasattr(kernel, "do_one_iteration") and _has_module("jupyter_ui_poll"):
        return UI_POLL
    return None


def why_no_button(kernel) -> str:
    """What keeps a Stop button from working on ``kernel``, and how to stop instead."""
    if kernel is None:
        return f"no Jupyter kernel; {HOW_TO_STOP}"
    if not _has_module("ipywidgets"):
        return f"no Stop button: ipywidgets is not installed; {HOW_TO_STOP}"
    if not getattr(kernel, "_supports_kernel_subshells", False) and not _has_module("jupyter_ui_poll"):
        return f"no Stop button: a busy kernel hears it only through jupyter-ui-poll (pip install jupyter-ui-poll); {HOW_TO_STOP}"
    return f"no Stop button: this kernel cannot deliver a click while it trains; {HOW_TO_STOP}"


async def _nothing() -> None:
    pass


def _satisfy_waiting_dispatch(kernel) -> None:
    """Give the kernel's waiting dispatch loop a message that does nothing (see the module docstring)."""
    queue = getattr(kernel, "msg_queue", None)
    if getattr(queue, "_getters", None):  # tornado.queues.Queue with a dispatch loop waiting in get()
        queue.put_nowait((next(kernel._message_counter), _nothing, ()))


class StopButton:
    """Shows an ``ipywidgets.Button``; a click calls ``on_stop`` once. Call :meth:`poll` between steps.

    Build it only where :func:`click_delivery` names a way (``delivery``)."""

    def __init__(self, on_stop: Callable[[], None], kernel, delivery: str):
        import ipywidgets
        from IPython.display import display

        self.on_stop = on_stop
        self.button = ipywidgets.Button(description="Stop", button_style="danger", icon="stop",
                                        tooltip="end training after this step and save a checkpoint")
        self.button.on_click(self._clicked)
        self._kernel = kernel
        self._events = ExitStack()
        self._poll = None
        self._subshell = None
        self._stopped = False
        if delivery == SUBSHELL:
            self._subshell = self._open_subshell()
        elif delivery == SHELL_CHANNEL:
            self._route_clicks_on_channel_thread()
        else:
            from jupyter_ui_poll import ui_events

            self._poll = self._events.enter_context(ui_events())
            _satisfy_waiting_dispatch(kernel)
        display(self.button)

    # ipykernel 7.4 on: a subshell for the button's comm --------------------------------------------------

    def _subshell_requests(self):
        """The socket ipykernel's control thread uses to create and delete subshells."""
        return self._kernel.shell_channel_thread.manager.control_to_shell_channel.from_socket

    def _open_subshell(self) -> str:
        requests = self._subshell_requests()
        requests.send_json({"type": "create"})
        reply = requests.recv_json()
        if reply.get("status") != "ok":
            raise RuntimeError(f"the kernel did not create a subshell for the Stop button: {reply}")
        self.button.comm._reply_subshell_id = reply["subshell_id"]  # the kernel routes this comm's messages there
        return reply["subshell_id"]

    # ipykernel 7.0 to 7.3: the button's messages taken off the shell channel thread ----------------------

    def _route_clicks_on_channel_thread(self) -> None:
        kernel = self._kernel
        self._events.callback(self._on_channel_thread, kernel.shell_stream.on_recv, kernel.shell_channel_thread_main,
                              copy=False)
        self._on_channel_thread(kernel.shell_stream.on_recv, self._shell_channel_message, copy=False)

    def _on_channel_thread(self, function, *args, **kwargs) -> None:
        """Run ``function`` on the shell channel thread, which owns the shell stream (zmq streams are not thread-safe)."""
        self._kernel.shell_channel_thread.io_loop.add_callback(function, *args, **kwargs)

    def _shell_channel_message(self, frames):
        """On the shell channel thread: handle this button's comm messages here, pass the rest on unchanged."""
        kernel = self._kernel
        session = kernel.session
        idents, signed = session.feed_identities(frames, copy=False)
        header = session.deserialize(signed, content=False, copy=False)  # a peek: the signature is not recorded
        if header["header"]["msg_type"] == "comm_msg" and \
                session.unpack(header["content"]).get("comm_id") == self.button.comm.comm_id:
            kernel.comm_manager.comm_msg(kernel.shell_stream, idents, session.deserialize(signed, copy=False))
            return None
        return kernel.shell_channel_thread_main(frames)

    # ------------------------------------------------------------------------------------------------------

    def _clicked(self, _button) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.on_stop()  # first: the stop must not hang on the button's redraw
        self.button.description, self.button.disabled = "Stopping after this step", True

    def poll(self) -> None:
        """Deliver pending clicks (needed only where the kernel has no subshells)."""
        if self._poll is not None:
            self._poll(10)

    def close(self) -> None:
        """Disable the button, then give back the subshell, the shell channel or the event hook."""
        self.button.description, self.button.disabled = "Training ended", True  # routes the comm back to the main shell
        self._events.close()
        if self._subshell is not None:
            requests = self._subshell_requests()
            requests.send_json({"type": "delete", "subshell_id": self._subshell})
            requests.recv_json()
            self._subshell = None
