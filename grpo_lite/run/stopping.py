"""Ending a run early, one way: whoever asks, training stops after the current step with a checkpoint.

The notebook's Stop button, Ctrl-C, a reward function that keeps failing and a NaN all call
:meth:`StopSwitch.request`; the switch is the trainer's last callback, so a request made during a step
(or by an earlier callback at its end) stops the run at that step's end, after the Trainer saves. A request
with ``save=False`` (the weights in memory are not to be trusted) stops without saving them: the last
checkpoint stays the run's result. A request with an ``error`` makes ``train`` raise it once training ended.
"""

from __future__ import annotations

import signal
import threading

from transformers import TrainerCallback

from ..log import logger
from .callbacks import RunCallback


class StopSwitch(TrainerCallback):
    """Stops training at the end of the step in which :meth:`request` was called, saving a checkpoint."""

    def __init__(self):
        self.reason: str | None = None
        self.save = True
        self.error: Exception | None = None

    @property
    def requested(self) -> bool:
        return self.reason is not None

    def request(self, reason: str, *, save: bool = True, error: Exception | None = None) -> None:
        """Ask for the stop; the first reason is kept and said once, except that a request not to save
        (which changes what the run leaves behind) takes over from one that saves."""
        if self.reason is not None and (save or not self.save):
            return
        self.reason, self.save, self.error = reason, save, error
        ending = "saving a checkpoint" if save else "keeping the last checkpoint: nothing from this step on is saved"
        logger.info(f"stopping after this step and {ending} ({reason})")

    def _act(self, control):
        if self.reason is not None:
            control.should_save = self.save
            control.should_training_stop = True
        return control

    def on_step_end(self, args, state, control, **kwargs):
        return self._act(control)

    def on_log(self, args, state, control, **kwargs):
        return self._act(control)  # a request made from the step's logs, before the Trainer decides to save


def stop_switch(trainer) -> StopSwitch:
    """The trainer's :class:`StopSwitch`, added as its last callback when it has none."""
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, StopSwitch):
            return callback
    switch = StopSwitch()
    trainer.add_callback(switch)
    return switch


class InterruptStops(RunCallback):
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
        self.close()

    def close(self) -> None:
        """Give Ctrl-C back to its handler from before training (``train`` calls this however training ends)."""
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
