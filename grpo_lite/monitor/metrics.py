"""metrics.jsonl: every logged training step, appended and flushed as it happens.

The file is the run's durable record: the dashboard, ``show_run`` and resumed runs read it back, and
a process that dies loses nothing that was logged. Only the main process writes.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ..run.files import METRICS_FILE, SUMMARY_FILE, append_jsonl, in_run, read_jsonl, write_json, write_jsonl

SUMMARY_KEYS = ("train_runtime", "train_loss", "train_samples_per_second", "train_steps_per_second")


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else str(value)
    return value


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The step records of a metrics.jsonl file (or of the metrics.jsonl in a run folder)."""
    return read_jsonl(in_run(path, METRICS_FILE))


class MetricsLog(TrainerCallback):
    """Append one JSON object per logged step to ``<output_dir>/metrics.jsonl``.

    Each record has ``step``, ``time`` and every metric TRL logged at that step (``reward``,
    ``reward_std``, ``frac_reward_zero_std``, ``rewards/<name>/mean``, ...). ``kl`` is always present:
    ``null`` when ``beta`` is 0 and TRL computes none. When a run resumes from a checkpoint, records past
    the checkpoint's step are dropped first, so each step appears once.
    """

    def __init__(self, output_dir: str | Path):
        self.path = Path(output_dir) / METRICS_FILE

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(self.path, [r for r in read_metrics(self.path) if r.get("step", 0) <= state.global_step])

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        if any(key in logs for key in SUMMARY_KEYS):
            write_json(self.path.parent / SUMMARY_FILE, {k: _json_value(v) for k, v in logs.items()})
            return
        record = {"step": state.global_step, "time": time.time(), "kl": None}
        record.update({key: _json_value(value) for key, value in logs.items()})
        append_jsonl(self.path, [record])
