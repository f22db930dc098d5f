"""rescore_run(): what other rewards would have taught, on the completions a run actually generated.

A run's ``samples.jsonl`` keeps every logged completion with the advantage training gave it. Scoring the
same completions with other rewards, with the run's advantage settings, shows which completions the new
rewards would push the other way (the sign of their advantage flips), which groups that taught nothing
would now teach, and which would fall silent. ``samples.jsonl`` keeps the prompt and completion, not the dataset's columns:
pass the training dataset for rewards that read them (``answer``, ``test_cases``); rows are matched on
their question (the prompt's last user message).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

from rewards import check_rewards, resolve_rewards
from rewards.check import RewardReport, reads_gold, records
from rewards.diagnoses import TIE, Finding, finding, is_no_signal
from rewards.display import RichReport

from ..data.prepare import DatasetError
from ..data.prompts import FOLD_SEPARATOR
from ..errors import NotFound
from ..monitor.samples import question_of, read_samples
from ..run.files import RUN_FILE
from ..run.record import read_run


def _sign(value: float | None) -> int:
    return 0 if value is None or abs(value) < TIE else (1 if value > 0 else -1)


@dataclass
class RescoreReport(RichReport):
    """Each logged completion's advantage in training (``old``) and under the new rewards (``new``)."""

    text_width = 140

    rows: list[dict[str, Any]]
    labs: list[RewardReport] = field(default_factory=list)

    @property
    def flipped(self) -> list[dict[str, Any]]:
        """Completions the new rewards would push the other way."""
        return [r for r in self.rows if _sign(r["old"]) * _sign(r["new"]) < 0]

    def _groups(self) -> list[list[dict[str, Any]]]:
        return [list(members) for _, members in groupby(self.rows, key=lambda r: (r["step"], r["prompt"]))]

    @property
    def now_teaching(self) -> int:
        """Groups that taught nothing in training and would teach now."""
        return sum(all(_sign(r["old"]) == 0 for r in g) and any(_sign(r["new"]) for r in g) for g in self._groups())

    @property
    def now_silent(self) -> int:
        """Groups that taught in training and would teach nothing now."""
        return sum(any(_sign(r["old"]) for r in g) and all(_sign(r["new"]) == 0 for r in g) for g in self._groups())

    @property
    def findings(self) -> list[Finding]:
        """What the new rewards would teach, judged by :data:`rewards.diagnoses.DIAGNOSES` as preview judges it."""
        groups = self._groups()
        silent = sum(all(_sign(r["new"]) == 0 for r in g) for g in groups) / max(len(groups), 1)
        found = [finding("no_signal", f"{silent:.0%} of the logged groups would teach nothing under the new rewards: "
                         "every completion of those prompts scores the same")] if is_no_signal(silent) else []
        constant = {p.function: p for lab in self.labs for p in lab.problems if p.kind == "constant_reward"}
        return found + [finding("constant_reward", f"{name}: {p.message}") for name, p in constant.items()]

    @property
    def ok(self) -> bool:
        return all(lab.ok for lab in self.labs)

    def __rich__(self):
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        groups = self._groups()
        head = Text(f"Re-scored {len(self.rows)} completions in {len(groups)} groups: {len(self.flipped)} would be pushed "
                    f"the other way; {self.now_teaching} groups that taught nothing would teach, {self.now_silent} that "
                    "taught would fall silent", style="bold")
        table = Table(title="completions whose advantage changes sign (first 20)")
        for column in ("step", "question", "completion", "old advantage", "new advantage"):
            table.add_column(column, overflow="ellipsis", no_wrap=column in ("question", "completion"), max_width=45)
        for r in self.flipped[:20]:
            table.add_row(str(r["step"]), Text(question_of(r["prompt"])), Text(r["completion"].replace("\n", "\\n")),
                          f"{r['old']:.3g}", f"{r['new']:.3g}")
        problems = [Text(f"x {p}", style="red") for lab in self.labs for p in lab.problems
                    if p.kind not in ("no_signal", "constant_reward")]
        return Group(head, table, *[Text(str(f), style="yellow") for f in self.findings], *problems)


def _columns_by_question(dataset, question: str) -> dict[str, dict[str, Any]]:
    rows = records(dataset)
    found = {}
    for row in rows:
        key = question_of(row["prompt"]) if "prompt" in row else str(row.get(question, ""))
        found[key] = {k: v for k, v in row.items() if k not in ("prompt", question)}
    return found


def _dataset_question(columns: dict[str, dict[str, Any]], question: str) -> str | None:
    """The dataset's key for a logged question: the question itself, or, where training folded the system prompt into
    the question (a chat template without a system turn, grpo_lite.data.prompts), the question after the system text."""
    if question in columns:
        return question
    start = question.find(FOLD_SEPARATOR)
    while start >= 0:
        if question[start + len(FOLD_SEPARATOR):] in columns:
            return question[start + len(FOLD_SEPARATOR):]
        start = question.find(FOLD_SEPARATOR, start + 1)
    return None


def rescore_run(output_dir: str | Path, rewards: Any, dataset: Any = None, *, question: str = "question") -> RescoreReport:
    """Score the completions in ``output_dir``'s samples.jsonl with ``rewards`` and compare their advantages.

    ``dataset``: the training data (a ``prepare_dataset`` dataset, or rows with a ``question`` column) whose
    columns the rewards read; needed when a reward reads the gold ``answer``. The advantage settings
    (``scale_rewards``, ``multi_objective_aggregation``) are the run's, from its run.yaml.
    """
    output_dir = Path(output_dir)
    samples = read_samples(output_dir)
    if not samples:
        raise NotFound(f"rescore_run: no samples.jsonl with completions in {output_dir}; pass the output_dir "
                                "train() wrote to")
    funcs, _ = resolve_rewards(rewards)
    needs_gold = [f.__name__ for f in funcs if reads_gold(f)]
    if needs_gold and dataset is None:
        raise DatasetError(f"rescore_run: {', '.join(needs_gold)} read the 'answer' column, which samples.jsonl does not "
                         "keep; pass dataset=<the training dataset>")
    columns = _columns_by_question(dataset, question) if dataset is not None else {}
    config = read_run(output_dir).grpo_config if (output_dir / RUN_FILE).exists() else {}
    settings = {"scale_rewards": config.get("scale_rewards", "group"),
                "multi_objective_aggregation": config.get("multi_objective_aggregation", "sum_then_normalize")}
    rows, labs, missing = [], [], set()
    for step, batch in groupby(samples, key=lambda s: s["step"]):
        batch = list(batch)
        lab_rows = []
        for s in batch:
            key = question_of(s["prompt"])
            found = _dataset_question(columns, key)
            if columns and found is None:
                missing.add(key)
            lab_rows.append({"prompt": s["prompt"], "completion": s["completion"], **columns.get(found, {})})
        if missing:
            raise DatasetError(f"rescore_run: {len(missing)} questions of samples.jsonl are not in the dataset, e.g. "
                             f"{next(iter(missing))[:80]!r}; pass the dataset the run trained on")
        lab = check_rewards(rewards, lab_rows, **settings)
        labs.append(lab)
        rows += [{"step": step, "prompt": s["prompt"], "completion": s["completion"], "old": s.get("advantage"),
                  "new": scored.get("advantage"), "scores": scored["scores"]} for s, scored in zip(batch, lab.rows)]
    return RescoreReport(rows=rows, labs=labs)
