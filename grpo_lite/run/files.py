"""The files of a run folder, named in one place, and the JSON-lines reader and writer they share.

    outputs/run/
      run.yaml             the run record: model, backend, LoRA rank, rewards and the full GRPOConfig
      metrics.jsonl        one line per logged step                       (monitor.metrics.MetricsLog)
      samples.jsonl        each completion of each logged step, scored    (monitor.samples.SampleLog)
      dashboard.png        the dashboard's charts                         (monitor.dashboard.LiveDashboard)
      eval.json            held-out scores before and after training      (evaluation.heldout.HeldoutEvaluation)
      train_summary.json   the Trainer's closing numbers (runtime, mean loss)
      checkpoint-N/        the Trainer's checkpoints                      (resume.latest_checkpoint)
      partial-checkpoint-N/  an incomplete checkpoint a resumed run passed over, kept (resume.resume_checkpoint)
      adapter_model.safetensors, adapter_config.json, tokenizer files: the trained weights

Files are replaced whole (written aside, then renamed), so a reader never sees half of one; JSON-lines
files are appended to and flushed line by line, so a killed process loses at most the line it was writing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

RUN_FILE = "run.yaml"
METRICS_FILE = "metrics.jsonl"
SAMPLES_FILE = "samples.jsonl"
DASHBOARD_FILE = "dashboard.png"
EVAL_FILE = "eval.json"  # held-out scores before and after training (the demo's too), with pass@k
SUMMARY_FILE = "train_summary.json"


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
            raise ValueError(f"{path}: line {number} is not JSON ({error.msg})") from error
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
