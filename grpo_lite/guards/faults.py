"""The faults that end a run from inside the Trainer, turned into errors that say what to change.

``train`` runs the Trainer inside :func:`faults_reported`. Whatever ends training, the run's callbacks
(:class:`~grpo_lite.run.callbacks.RunCallback`, grpo-lite's and the user's) are closed, giving back what they
hold while it runs (the Ctrl-C handler, a live terminal view, the Stop button); and

  - out of GPU memory: the steps done since the last checkpoint are saved, unless it ran out inside the
    optimizer step (the weights may be half-updated), and
    :class:`~grpo_lite.guards.out_of_memory.OutOfMemory` says where, what the planner estimated, what to change;
  - a full disk: the checkpoint the failed save left partial is deleted, and
    :class:`~grpo_lite.guards.disk.DiskFull` says the space a checkpoint needs and what is free;
  - user code that leaves no batch to train on (a rollout function that failed,
    :class:`~grpo_lite.guards.user_code.CallFailed`): the steps done are saved, as after running out of memory in
    generation, and :class:`~grpo_lite.guards.user_code.UserCodeFailure` says what failed and how to resume.

metrics.jsonl needs nothing: each step's line is flushed as it is logged.
"""

from __future__ import annotations

import gc
import shutil
import traceback
from contextlib import contextmanager
from pathlib import Path

import torch

from ..log import logger
from ..run.callbacks import close_all
from ..run.resume import latest_checkpoint, saved_whole
from .disk import DiskFull, disk_full, is_disk_full
from .out_of_memory import GENERATION, OPTIMIZER, OutOfMemory, Phase, out_of_memory, where_it_ran_out
from .user_code import CallFailed, UserCodeFailure


def save_steps_done(trainer, phase: Phase) -> None:
    """After running out of memory, save a checkpoint of the steps done since the last one, when the weights
    are whole and a single process trains (other ranks would wait for this one forever)."""
    step, args = trainer.state.global_step, trainer.args
    checkpoint = Path(args.output_dir) / f"checkpoint-{step}"
    if step == 0 or args.save_strategy == "no" or trainer.accelerator.num_processes > 1 or saved_whole(checkpoint):
        return
    if phase is OPTIMIZER:
        logger.warning(f"not saving step {step}: it ran out of memory inside the optimizer step, which may have updated "
                       "only some weights")
        return
    try:
        trainer._save_checkpoint(trainer.model, trial=None)
    except Exception as failed:  # out of memory again, a full disk: the last whole checkpoint stays
        logger.warning(f"could not save the {step} steps done after running out of memory ({failed!r})")
        if checkpoint.is_dir() and not saved_whole(checkpoint):
            shutil.rmtree(checkpoint, ignore_errors=True)
        return
    logger.info(f"saved {checkpoint.name}: the {step} steps done before running out of memory")


def _out_of_memory(trainer, error: BaseException) -> OutOfMemory:
    phase = where_it_ran_out(error.__traceback__)
    traceback.clear_frames(error.__traceback__)  # the tensors its frames hold go back to the allocator
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    save_steps_done(trainer, phase)
    return out_of_memory(trainer, error, phase, latest_checkpoint(Path(trainer.args.output_dir)))


@contextmanager
def faults_reported(trainer):
    """Run ``trainer``'s training in the ``with`` block; see the module docstring."""
    try:
        yield
    except BaseException as error:
        close_all(trainer)  # what on_train_end would have given back
        if isinstance(error, torch.cuda.OutOfMemoryError) and not isinstance(error, OutOfMemory):
            raise _out_of_memory(trainer, error) from error
        if is_disk_full(error) and not isinstance(error, DiskFull):
            args = trainer.args
            raise disk_full(error, Path(args.output_dir), trainer.state.global_step, args.save_total_limit) from error
        if isinstance(error, CallFailed):
            raise _stopped_by(trainer, error) from None
        raise


def _stopped_by(trainer, failed: CallFailed) -> UserCodeFailure:
    """A failure of user code inside a step, before its update (generation): the steps done saved, said with it."""
    save_steps_done(trainer, GENERATION)
    output_dir = Path(trainer.args.output_dir)
    checkpoint = latest_checkpoint(output_dir)
    kept = (f"{checkpoint.name} in {output_dir} holds the steps done: fix it, then resume from there (train(..., "
            "resume=True), grpo-lite train CONFIG --resume)") if checkpoint is not None else "no step was done"
    return UserCodeFailure(f"training stopped at step {trainer.state.global_step + 1}: {failed.said}\n{kept}")
