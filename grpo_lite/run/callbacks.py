"""The callback protocol of a run, shared by grpo-lite's callbacks and the user's.

A :class:`RunCallback` is a ``transformers.TrainerCallback`` with two more hooks that ``train`` calls:

- ``attach(trainer)``, once the GRPOTrainer exists: callbacks are built before it, and some need it (its
  recent samples, its model, its other callbacks);
- ``close()``, when training ends however it ends (an error included): give back what is held while
  training runs (a signal handler, a live terminal view, the Stop button). It may be called after
  ``on_train_end`` has already given them back, so it must be safe to call twice.

Example::

    from grpo_lite.run.callbacks import RunCallback

    class Notify(RunCallback):
        def attach(self, trainer):
            self.trainer = trainer

        def close(self):
            send_message(f"training ended at step {self.trainer.state.global_step}")

    grpo_lite.train(model, tokenizer, dataset, rewards, callbacks=[Notify()])
"""

from __future__ import annotations

from transformers import TrainerCallback


class RunCallback(TrainerCallback):
    """A ``TrainerCallback`` that ``train`` also attaches to its trainer and closes when training ends."""

    def attach(self, trainer) -> None:
        """Called once with the GRPOTrainer, before training starts."""

    def close(self) -> None:
        """Called when training ends, however it ends; give back what training held."""


def attach_all(trainer) -> None:
    """Attach every :class:`RunCallback` of ``trainer`` to it, in the trainer's callback order."""
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, RunCallback):
            callback.attach(trainer)


def close_all(trainer) -> None:
    """Close every :class:`RunCallback` of ``trainer``."""
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, RunCallback):
            callback.close()
