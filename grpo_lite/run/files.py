"""The files of a run folder, named in one place, and the JSON-lines reader and writer they share.

    outputs/run/
      run.yaml             the run record: model, backend, LoRA rank, rewards and the full GRPOConfig
      metrics.jsonl        one line per logged step                       (monitor.metrics.MetricsLog)
      samples.jsonl        each completion of each logged step, scored    (monitor.samples.SampleLog)
      dashboard.png        the dashboard's charts                         (monitor.dashboard.LiveDashboard)
      eval.json            held-out scores before and after training      (evaluation.heldout.HeldoutEvaluation)
      train_summary.json   the Trainer's closing numbers (runtime, mean loss)
      checkpoint-N/        the Trainer's checkpoints, whole when missing_parts names nothing (resume.latest_checkpoint),
                           each with run_record.yaml: the run.yaml it was saved under (record.RecordInCheckpoints)
      partial-checkpoint-N/  an incomplete checkpoint a resumed run passed over, kept (resume.resume_checkpoint)
      adapter_model.safetensors, adapter_config.json, tokenizer files: the trained weights

Files are replaced whole (written aside, then renamed), so a reader never sees half of one; JSON-lines
files are appended to and flushed line by line, so a killed process loses at most the line it was writing.

A folder is only ever written by a run that owns it. :func:`folder_kind` tells what a folder holds: nothing yet, a
run (its ``run.yaml`` ends in the stamp the run wrote, :func:`stamped`; an edit after that shows, and so does a run.yaml
cut short or gone from a folder whose checkpoints hold the run's record: :func:`record_change` says what changed), a
``train_stages`` plan (stage folders that are runs), or anything else (an export, the user's own files, a ``run.yaml``
no run wrote).
A run writes into a new folder, or into a run's folder that it resumes or is told to overwrite (:func:`clear_run`, which
removes that run's files and keeps every other one); anything else is refused (``run.settings.output_problems``). A run
given no folder gets a fresh one, ``outputs/<model>-<n>`` (:func:`fresh_run_dir`), and a notebook's run one named for it,
``outputs/<name>-<n>`` (:func:`run_dir`), so that "Run all" again trains into a new folder and keeps the last.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..data.prepare import DatasetError
from ..log import logger

RUN_FILE = "run.yaml"
METRICS_FILE = "metrics.jsonl"
SAMPLES_FILE = "samples.jsonl"
SAMPLE_IMAGES = "sample_images"  # the thumbnails samples.jsonl refers to, one file per distinct image
DASHBOARD_FILE = "dashboard.png"
EVAL_FILE = "eval.json"  # held-out scores before and after training (the demo's too), with pass@k
SUMMARY_FILE = "train_summary.json"
RUNS_FOLDER = Path("outputs")  # where a run given no output_dir gets its fresh folder
# What a run leaves in its folder, as glob patterns: its record and logs, the Trainer's checkpoints (and those resuming
# passed over), TRL's completion tables, the trained weights.
RUN_OUTPUTS = (RUN_FILE, METRICS_FILE, SAMPLES_FILE, SAMPLE_IMAGES, DASHBOARD_FILE, EVAL_FILE, SUMMARY_FILE, "checkpoint-*",
               "partial-checkpoint-*", "completions", "adapter_model.*", "adapter_config.json", "model.safetensors",
               "model-*-of-*.safetensors", "model.safetensors.index.json", "pytorch_model*.bin")
# What the Trainer writes into a checkpoint (transformers' Trainer._save_checkpoint): the weights (the adapter, or
# the whole model, maybe in shards), then the optimizer and scheduler (DeepSpeed keeps both in global_step*/), then
# trainer_state.json, last.
WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin", "model.safetensors", "model.safetensors.index.json",
                "pytorch_model.bin", "pytorch_model.bin.index.json")
# What a run writes into its folder before its run.yaml: the command line's model "tiny", built there to load it
BEFORE_RECORD = ("tiny-model",)
# The last line of a run.yaml a run wrote: the hash of the lines above it tells the run's record from an edited one
RECORD_STAMP = "# written by grpo-lite; sha256 of the lines above: "
# In each checkpoint-N: the run.yaml it was saved under, which says what an edit of run.yaml changed
CHECKPOINT_RECORD = "run_record.yaml"
CHANGES_SHOWN = 4  # changed keys a message names, then how many more


def in_run(path: str | Path, file_name: str) -> Path:
    """``path`` itself when it is a file, or ``file_name`` inside it when it is a run folder."""
    path = Path(path)
    return path / file_name if path.is_dir() else path


def replace_file(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename: readers see the old or the new file."""
    partial = path.with_name(f".{path.name}.partial")
    if isinstance(data, bytes):
        partial.write_bytes(data)
    else:
        partial.write_text(data)
    os.replace(partial, path)


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The objects of a JSON-lines file; a missing file has none.

    A last line without its newline was cut short by a killed process and is skipped; any other line that
    is not JSON is an error naming the file and line.
    """
    path = Path(path)
    if not path.exists():
        return []
    text = path.read_text()
    lines = text.split("\n")
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as error:
            if number == len(lines):  # no newline after it: the write was cut off
                break
            raise DatasetError(f"{path}, line {number}: not JSON ({error.msg})") from None
    return records


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Replace ``path`` with ``records``, one JSON object per line."""
    replace_file(path, "".join(json.dumps(record) + "\n" for record in records))


def append_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Append ``records`` to ``path`` and flush them to the operating system."""
    with path.open("a") as handle:
        handle.write("".join(json.dumps(record) + "\n" for record in records))
        handle.flush()


def write_json(path: Path, document: Any) -> None:
    """Replace ``path`` with ``document`` as indented JSON."""
    replace_file(path, json.dumps(document, indent=2) + "\n")


def missing_parts(checkpoint: Path) -> list[str]:
    """What ``checkpoint`` lacks to continue training exactly where it stopped; empty for a whole one. A save cut
    off by a kill or a full disk lacks trainer_state.json (written last); a file deleted by hand lacks itself."""
    missing = [] if any((checkpoint / name).exists() for name in WEIGHT_FILES) else ["the weights"]
    if not any(checkpoint.glob("global_step*")):
        missing += [name for name in ("optimizer.pt", "scheduler.pt") if not (checkpoint / name).exists()]
    try:
        json.loads((checkpoint / "trainer_state.json").read_text())
    except (OSError, ValueError):
        missing.append("a readable trainer_state.json")
    return missing


def checkpoints(output_dir: Path) -> list[Path]:
    """The Trainer's ``checkpoint-N`` folders, newest first."""
    found = [(int(p.name.split("-")[1]), p) for p in output_dir.glob("checkpoint-*") if p.name.split("-")[1].isdigit()]
    return [checkpoint for _, checkpoint in sorted(found, reverse=True)]


def whole_checkpoint(output_dir: Path) -> Path | None:
    """The newest ``checkpoint-N`` in ``output_dir`` that was saved whole, or None; says nothing of the others."""
    return next((checkpoint for checkpoint in checkpoints(output_dir) if not missing_parts(checkpoint)), None)


def stamped(record: str) -> str:
    """The text of a ``run.yaml`` a run writes: ``record`` and its stamp, the hash of ``record``, as its last line."""
    return f"{record}{RECORD_STAMP}{hashlib.sha256(record.encode()).hexdigest()}\n"


def record_origin(path: str | Path) -> str:
    """Who wrote the ``run.yaml`` at ``path``: ``"run"``, a run, as it wrote it; ``"edited run"``, a run, changed since;
    ``"other"``, no run (no stamp: a recipe of the user's, another tool's file)."""
    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    record, stamp, _ = text.rpartition(RECORD_STAMP)
    if not stamp or not record.endswith("\n"):
        return "other"
    return "run" if text == stamped(record) else "edited run"


def saved_record(folder: str | Path) -> Path | None:
    """The run's record as a checkpoint of ``folder`` keeps it (:data:`CHECKPOINT_RECORD`): the one whose stamp the
    folder's run.yaml still carries (the record it was before an edit), else the newest; None where no checkpoint keeps
    one."""
    kept = [checkpoint / CHECKPOINT_RECORD for checkpoint in checkpoints(Path(folder))
            if (checkpoint / CHECKPOINT_RECORD).is_file() and record_origin(checkpoint / CHECKPOINT_RECORD) == "run"]
    record = Path(folder) / RUN_FILE
    stamp = record.read_bytes().decode("utf-8", errors="replace").rpartition(RECORD_STAMP)[2] if record.is_file() else ""
    return next((copy for copy in kept if stamp and copy.read_text().endswith(RECORD_STAMP + stamp)), kept[0] if kept else None)


def record_change(folder: str | Path) -> str:
    """What became of the run.yaml of the run in ``folder`` since the run wrote it, against the record its checkpoint
    keeps (:func:`saved_record`), for a message: gone, cut short, no longer YAML, or each key that changed as
    ``key: old -> new`` (a nested one as ``section.key``); empty where no checkpoint keeps the record."""
    import yaml

    folder = Path(folder)
    saved = saved_record(folder)
    if saved is None:
        return ""
    where = f"{saved.relative_to(folder)} holds the run's"
    record = folder / RUN_FILE
    if not record.is_file():
        return f"it is gone ({where})"
    text, original = record.read_bytes().decode("utf-8", errors="replace"), saved.read_text()
    if original.startswith(text):
        return f"it was cut short after line {text.count(chr(10))} of {original.count(chr(10))} ({where})"
    try:
        edited = yaml.safe_load(text)
    except yaml.YAMLError:
        return f"it no longer reads as YAML ({where})"
    before, after = _flat(yaml.safe_load(original)), _flat(edited if isinstance(edited, dict) else {"": edited})
    changed = [f"{key}: {before.get(key, '(none)')!r} -> {after.get(key, '(none)')!r}"
               for key in dict.fromkeys([*before, *after]) if before.get(key, KeyError) != after.get(key, KeyError)]
    more = f"; {len(changed) - CHANGES_SHOWN} more" if len(changed) > CHANGES_SHOWN else ""
    return f"{'; '.join(changed[:CHANGES_SHOWN]) or 'its text, not its settings (a comment, the layout)'}{more} ({where})"


def _flat(document: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A YAML mapping as one level of ``section.key -> value``."""
    flat: dict[str, Any] = {}
    for key, value in document.items():
        if isinstance(value, dict) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def folder_kind(folder: str | Path) -> str:
    """What ``folder`` holds, for whether a run may write there:

    - ``"new"``: missing, empty, or only what a run writes before its record and hidden entries (``.ipynb_checkpoints``),
      which a run never writes over;
    - ``"run"``: a run's, its run.yaml as the run wrote it; ``"edited run"``: a run's whose run.yaml was changed since,
      cut short or removed (its checkpoints keep the run's record: :func:`saved_record`);
    - ``"plan"``: a ``train_stages`` plan, no run.yaml and stage folders that are runs;
    - ``"other"``: anything else, an export, the user's files, a run.yaml no run wrote.
    """
    folder = Path(folder)
    if not folder.is_dir() or all(path.name in BEFORE_RECORD or path.name.startswith(".") for path in folder.iterdir()):
        return "new"
    if (folder / RUN_FILE).is_file():
        origin = record_origin(folder / RUN_FILE)
        return "edited run" if origin == "other" and saved_record(folder) is not None else origin
    if saved_record(folder) is not None:
        return "edited run"
    if any((path / RUN_FILE).is_file() and record_origin(path / RUN_FILE) != "other" for path in folder.iterdir()):
        return "plan"
    return "other"


def held(folder: str | Path, limit: int = 4) -> str:
    """The names ``folder`` holds, the first ``limit`` of them sorted, for a message: ``a, b, c, d, ... (9 in all)``."""
    names = sorted(path.name for path in Path(folder).iterdir()) if Path(folder).is_dir() else []
    return ", ".join(names[:limit]) + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def earlier_run(folder: str | Path) -> list[str]:
    """The names of what a run wrote that ``folder`` holds (:data:`RUN_OUTPUTS`), sorted; empty for a fresh folder."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted({path.name for pattern in RUN_OUTPUTS for path in folder.glob(pattern)})


def clear_run(folder: str | Path) -> list[str]:
    """Remove what an earlier run wrote in ``folder`` (:data:`RUN_OUTPUTS`), leaving every other file; returns the names."""
    folder = Path(folder)
    removed = earlier_run(folder)
    for name in removed:
        path = folder / name
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    return removed


def run_name(model: str) -> str:
    """A model's short name for a run folder: the last part of its hub id or path, in letters, digits, ``.``, ``_``, ``-``.

    >>> run_name("unsloth/Qwen2.5-1.5B-Instruct"), run_name("/tmp/my model/"), run_name("")
    ('Qwen2.5-1.5B-Instruct', 'my-model', 'grpo-lite')
    """
    return re.sub(r"[^\w.-]+", "-", Path(str(model)).name).strip("-.") or "grpo-lite"


def _numbers(name: str, parent: Path) -> list[int]:
    """The numbers of the folders ``<name>-<n>`` in ``parent``."""
    return [int(match.group(1)) for path in parent.glob(f"{glob.escape(name)}-*")
            if (match := re.fullmatch(rf"{re.escape(name)}-(\d+)", path.name))]


def fresh_run_dir(name: str, parent: Path = RUNS_FOLDER) -> Path:
    """``outputs/<name>-<n>``, numbered one past the highest such folder already there (``outputs/tiny-3`` after
    ``outputs/tiny-2``): each run given no output_dir gets a folder of its own."""
    return parent / f"{name}-{max(_numbers(name, parent), default=0) + 1}"


def run_dir(name: str, *, drive: bool = False, drive_root: str | Path = "/content/drive", resume: bool = False) -> Path:
    """A folder of its own for a notebook's run: ``<place>/<name>-<n>``, numbered one past the highest there (as a run
    given no output_dir gets ``outputs/<model>-<n>``), so that each "Run all" trains again, in a new folder, and keeps
    the runs before; where it is, is said. Nothing is made until the run writes there.

    Args:
        name: the run's name, the folder's before its number: ``"quickstart"`` gives ``outputs/quickstart-1``, then
            ``outputs/quickstart-2``.
        drive: on Google Drive (``<drive_root>/MyDrive/grpo-lite``, mounted here when it is not yet), so that a recycled
            Colab VM loses nothing. Otherwise ``/kaggle/working`` on Kaggle (kept with the notebook's output), else
            ``outputs``.
        drive_root: where Drive is mounted; a directory that is already there (mounted earlier, or a stand-in) is used
            as it is.
        resume: the highest-numbered folder there instead, the last run, to continue with ``train(..., resume=True)``
            after a disconnect or a recycled VM; a fresh one where there is none.
    """
    from ..machine.notebook import drive_folder, platform

    parent = drive_folder(drive_root) if drive else Path("/kaggle/working") if platform() == "kaggle" else RUNS_FOLDER
    taken = _numbers(name, parent)
    if resume and taken:
        folder = parent / f"{name}-{max(taken)}"
        logger.info(f"run folder: {folder} (resume=True: the last run named {name!r}, to continue)")
        return folder
    folder = parent / f"{name}-{max(taken, default=0) + 1}"
    kept = f"; {parent / f'{name}-{max(taken)}'} and those before it are kept" if taken else ""
    logger.info(f"run folder: {folder} (each run of {name!r} gets a folder of its own{kept})")
    return folder


def say_fresh_run_dir(folder: Path) -> None:
    """Say where a run given no output_dir writes, once it is sure to start."""
    logger.info(f"run files go to {folder} (no output_dir was given: each such run gets a fresh folder)")
