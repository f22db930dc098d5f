"""Ending a run early, one way: whoever asks, training stops after the current step with a checkpoint.

The notebook's Stop button, Ctrl-C and a reward function that keeps failing all call
:meth:`StopSwitch.request`; the switch is the trainer's last callback, so a request made during a step
(or by an earlier callback at its end) stops the run at that step's end, after the Trainer saves.
"""

from __future__ import annotations

import signal
import threading

from transformers import TrainerCallback

from .log import logger


class StopSwitch(TrainerCallback):
    """Stops training at the end of the step in which :meth:`request` was called, saving a checkpoint."""

    def __init__(self):
        self.reason: str | None = None

    @property
    def requested(self) -> bool:
        return self.reason is not None

    def request(self, reason: str) -> None:
        """Ask for the stop; the first reason is kept and said once."""
        if self.reason is None:
            self.reason = reason
            logger.info(f"stopping after this step and saving a checkpoint ({reason})")

    def on_step_end(self, args, state, control, **kwargs):
        if self.reason is not None:
            control.should_save = True
            control.should_training_stop = True
        return control


def stop_switch(trainer) -> StopSwitch:
    """The trainer's :class:`StopSwitch`, added as its last callback when it has none."""
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, StopSwitch):
            return callback
    switch = StopSwitch()
    trainer.add_callback(switch)
    return switch


class InterruptStops(TrainerCallback):
    """While training runs, Ctrl-C (or a notebook's interrupt button) asks ``switch`` to stop after the
    current step; a second Ctrl-C aborts at once."""

    def __init__(self, switch: StopSwitch):
        self.switch = switch
        self.interrupted = False
        self._previous = None

    def _handle(self, signum, frame):
        if self.interrupted:
            signal.signal(signal.SIGINT, self._previous or signal.default_int_handler)
            raise KeyboardInterrupt
        self.interrupted = True
        self.switch.request("interrupted; Ctrl-C again to abort")

    def on_train_begin(self, args, state, control, **kwargs):
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            self._previous = signal.signal(signal.SIGINT, self._handle)

    def on_train_end(self, args, state, control, **kwargs):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
