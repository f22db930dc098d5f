"""Held-out evaluation around a training run: the same rows scored before the first step and after the last.

``train(heldout=...)`` adds :class:`HeldoutEvaluation`: it evaluates greedily (plus pass@k with
``heldout_samples > 1``) when training begins and ends, playing each episode with the run's tools and environments as
training does, says both side by side, keeps them as
``comparison`` and writes them to ``eval.json`` in the run folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ..data.prepare import DatasetError
from ..log import logger
from ..run.files import EVAL_FILE, write_json
from ..run.settings import REWARD_TIMEOUT
from .scoring import Comparison, compare, evaluate, rows_problem


def check_heldout(heldout, environment_factory: Any = None) -> None:
    """Raise before any model work when ``heldout`` is no dataset, or lacks the columns evaluation reads (an ``answer``
    unless its episodes play in environments that score them)."""
    if not hasattr(heldout, "column_names"):
        raise DatasetError(f"heldout is a {type(heldout).__name__}, not a datasets.Dataset; build it with "
                           "grpo_lite.prepare_dataset(rows, question=..., answer=...)")
    if (problem := rows_problem(heldout.column_names, environment_factory=environment_factory, rows="heldout")) is not None:
        raise DatasetError(problem)


class HeldoutEvaluation(TrainerCallback):
    """Evaluates ``dataset`` (its first ``heldout_n`` rows) with ``rewards`` when training begins and ends."""

    def __init__(self, tokenizer, dataset, rewards: Any, output_dir: str | Path, *, heldout_n: int | None = 200,
                 heldout_samples: int = 1, temperature: float = 1.0, max_completion_length: int = 128,
                 chat_template_kwargs: dict[str, Any] | None = None, tools: list[Any] | None = None,
                 max_tool_calling_iterations: int | None = None, environment_factory: Any = None,
                 reward_timeout: float | None = REWARD_TIMEOUT):
        check_heldout(dataset, environment_factory)
        self.tokenizer = tokenizer
        self.dataset = dataset
        self.rewards = rewards
        self.path = Path(output_dir) / EVAL_FILE
        self.options = dict(heldout_n=heldout_n, heldout_samples=heldout_samples, temperature=temperature,
                            max_completion_length=max_completion_length, chat_template_kwargs=dict(chat_template_kwargs or {}), tools=tools,
                            max_tool_calling_iterations=max_tool_calling_iterations, environment_factory=environment_factory,
                            reward_timeout=reward_timeout)
        self.before = None
        self.comparison: Comparison | None = None

    def _evaluate(self, model, when: str):
        samples = self.options["heldout_samples"]
        rows = len(self.dataset) if self.options["heldout_n"] is None else min(self.options["heldout_n"], len(self.dataset))
        logger.info(f"held-out evaluation {when}: {rows} rows, greedy" + (f" and {samples} samples each" if samples > 1 else ""))
        return evaluate(model, self.tokenizer, self.dataset, self.rewards, progress=f"held-out {when}", **self.options)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.before = self._evaluate(model, "before training")
        logger.info(f"held-out before training ({self.before.n} rows): accuracy {self.before.accuracy:.1%}, "
                    f"format rate {self.before.format_rate:.1%}")

    def on_train_end(self, args, state, control, model=None, **kwargs):
        self.comparison = compare(self.before, self._evaluate(model, "after training"))
        logger.info(f"held-out before and after training:\n{self.comparison}")
        if state.is_world_process_zero:
            write_json(self.path, {"before": self.comparison.base.as_dict(), "after": self.comparison.trained.as_dict()})
