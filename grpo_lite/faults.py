"""The faults that end a run from inside the Trainer, turned into errors that say what to change.

``train`` runs the Trainer inside :func:`faults_reported`. Whatever ends training, grpo-lite's callbacks
give back what they hold while it runs (the Ctrl-C handler, a live terminal view); and on a full disk the
checkpoint the failed save left partial is deleted, and :class:`~grpo_lite.disk.DiskFull` says the space
a checkpoint needs and what is free.

metrics.jsonl needs nothing: each step's line is flushed as it is logged.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from .disk import DiskFull, disk_full, is_disk_full


def _release(trainer) -> None:
    """What ``on_train_end`` would have given back: grpo-lite's callbacks with a ``close``."""
    for callback in trainer.callback_handler.callbacks:
        if type(callback).__module__.startswith("grpo_lite.") and hasattr(callback, "close"):
            callback.close()


@contextmanager
def faults_reported(trainer):
    """Run ``trainer``'s training in the ``with`` block; see the module docstring."""
    try:
        yield
    except BaseException as error:
        _release(trainer)
        if is_disk_full(error) and not isinstance(error, DiskFull):
            args = trainer.args
            raise disk_full(error, Path(args.output_dir), trainer.state.global_step, args.save_total_limit) from error
        raise
