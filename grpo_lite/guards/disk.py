"""A full disk while a run saves: what is still whole, how much space a save needs, and what to do.

The Trainer writes a checkpoint's files with its ``trainer_state.json`` last, and deletes older checkpoints
(``save_total_limit``) only once that is written. So a save that fails leaves the previous checkpoint whole
and a partial folder that resuming skips (``resume.saved_whole``); :func:`disk_full` deletes that partial
folder to give its space back and says how much a checkpoint of this run takes against what is free.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from ..errors import RunFault
from ..run.resume import latest_checkpoint, saved_whole

FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT)  # no space left; disk quota exceeded


class DiskFull(RunFault, OSError):
    """The disk filled while the run wrote; the message gives the space a checkpoint needs, what is free,
    and which checkpoint the run resumes from."""


def is_disk_full(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in FULL_DISK_ERRNOS


def size_of(path: Path) -> int:
    """Bytes of the files under ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def gigabytes(size: int) -> str:
    return f"{size / 1024**3:.2f} GB"


def disk_full(error: OSError, output_dir: Path, step: int, save_total_limit: int | None) -> DiskFull:
    """The :class:`DiskFull` for ``error``, raised while the run in ``output_dir`` was at ``step``; the
    checkpoint that step's save left partial is deleted first."""
    partial = output_dir / f"checkpoint-{step}"
    cut_off = ""
    if partial.is_dir() and not saved_whole(partial):
        cut_off = f"The partial {partial.name} ({gigabytes(size_of(partial))} written when the disk filled) was deleted. "
        shutil.rmtree(partial, ignore_errors=True)
    free = shutil.disk_usage(output_dir).free
    checkpoint = latest_checkpoint(output_dir)
    if checkpoint is None:
        need = "No checkpoint of this run was saved whole, so its size is not known: free a few GB and start again."
    else:
        size = size_of(checkpoint)
        rotation = (f"the Trainer writes the next one before deleting the oldest of the {save_total_limit} it keeps"
                    if save_total_limit else "save_total_limit is not set, so the Trainer keeps every one (set it to 2)")
        need = (f"A checkpoint of this run takes {gigabytes(size)} ({checkpoint.name}) and {rotation}: make "
                f"{gigabytes(size)} free (delete old runs or other files on this disk), then resume from "
                f"{checkpoint.name}, which is whole: train(..., resume=True) or grpo-lite train --resume.")
    return DiskFull(error.errno, f"the disk holding {output_dir} is full ({gigabytes(free)} free) at step {step}: "
                                 f"{error.strerror or error}. {cut_off}{need}")
