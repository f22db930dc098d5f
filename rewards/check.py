"""The reward lab: run reward functions over sample rows and see what they do before paying for a GPU.

    report = check_rewards([soft_xml_format_reward, numeric_correctness_reward], rows)
    report            # in a notebook or terminal: problems, a line per function, then the first rows
    report.ok         # False when a function crashed, returned the wrong length, NaN/inf, ...
    report.rows       # every row: scores, parsed answer vs gold, total, advantage
    report.to_csv("lab.csv")   # every row, one column per function

The display stays small however many rows: problems one line per kind and function (with a count), then the
first ``report.rows_shown`` rows and how many more there are.

Rows are dicts with ``completion`` (a string or chat messages) and optionally ``prompt``, ``answer``,
``completion_ids`` (the completion's token ids, for length rewards) and any other column a reward reads. A missing
value is None however it is spelt (a DataFrame's NaN: :func:`rewards.extract.is_missing`), so a missing gold answer
reaches the rewards as None. Each function gets its own copy of the rows' values (as in training), and one that
requires a column no row has is reported (``missing_column``) instead of called.
Rows that share a prompt form a GRPO group: the lab shows the advantage each completion would get from the
trainer (same formula as the installed TRL) and flags groups where every completion ties, which teach the
model nothing.
"""

from __future__ import annotations

import csv
import inspect
import json
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .calling import call_reward, missing_columns, read_scores
from .combine import distinct_names, weighted_total
from .correctness import final_answer, gold_answers
from .diagnoses import DIAGNOSIS, TIE
from .display import RichReport
from .errors import RewardError
from .extract import completion_text, is_data_frame, is_missing, several_splits
from .registry import resolve_rewards

RESERVED = ("prompt", "completion", "completion_ids")
ROWS_SHOWN = 20  # rows a report's display draws; every row stays in report.rows and its CSV
PROBLEMS_SHOWN = 12  # lines of problems a display draws (each line: one kind of problem of one function, counted)


@dataclass(frozen=True)
class Problem:
    """Something wrong the lab found: ``kind``, the reward function and row it concerns, and why."""

    kind: str
    message: str
    function: str | None = None
    row: int | None = None

    @property
    def fix(self) -> str:
        """What to change, from :data:`rewards.diagnoses.DIAGNOSES` when the problem is one of its diagnoses."""
        return DIAGNOSIS[self.kind].fix if self.kind in DIAGNOSIS else ""

    def __str__(self) -> str:
        where = " ".join(x for x in (self.function and f"[{self.function}]", self.row is not None and f"row {self.row}") if x)
        return f"{self.kind}: {where + ': ' if where else ''}{self.message}" + (f" -> {self.fix}" if self.fix else "")


@dataclass
class RewardReport(RichReport):
    """Scores per function per row, parsed answers, advantages and the problems found.

    Its display (``str()``, the notebook's HTML) summarises first: the problems, one line per function, then the first
    ``rows_shown`` rows and a count of the rest; every row is in ``rows``, :meth:`records` and :meth:`to_csv`.
    """

    text_width = 160
    rows_shown = ROWS_SHOWN  # set on a report to draw more or fewer rows

    functions: list[str]
    rows: list[dict[str, Any]]
    problems: list[Problem] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    logged_metrics: dict[str, list[float]] = field(default_factory=dict)
    logged_columns: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when no function crashed or returned unusable scores (signal warnings do not count)."""
        return not any(p.kind in ERRORS for p in self.problems)

    def scores(self, function: str) -> list[float | None]:
        return [row["scores"][function] for row in self.rows]

    def kinds(self) -> set[str]:
        return {p.kind for p in self.problems}

    def records(self) -> list[dict[str, Any]]:
        """Every row as one flat dict (each function's score a column): what :meth:`to_csv` writes;
        ``pandas.DataFrame(report.records())`` is the report as a DataFrame."""
        return [{"row": row["row"], "group": row["group"], "completion": row["completion"], "parsed": row["parsed"],
                 "gold": row["gold"], **{name: row["scores"][name] for name in self.functions}, "total": row["total"],
                 "advantage": row.get("advantage")} for row in self.rows]

    def to_csv(self, path: str | Path) -> Path:
        """Write every row to a CSV file (a header, then one line per row; an unscored cell is empty)."""
        path = Path(path)
        columns = ["row", "group", "completion", "parsed", "gold", *self.functions, "total", "advantage"]
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows(self.records())
        return path

    def __rich__(self):
        from rich.console import Group
        from rich.text import Text

        head = Text(f"Reward lab: {len(self.rows):,} rows x {len(self.functions)} functions", style="bold")
        problems = [Text(line, style="bold red" if error else "yellow") for line, error in problem_lines(self.problems)]
        shown = self.rows[: max(self.rows_shown, 0)]
        parts = [head, *(problems or [Text("no problems found", style="green")]), function_table(self)]
        if shown:
            parts.append(self._rows_table(shown))
        if len(self.rows) > len(shown):
            parts.append(Text(f"... and {len(self.rows) - len(shown):,} more rows: report.rows, report.to_csv(path), "
                              "report.records()", style="italic"))
        return Group(*parts)

    def _rows_table(self, rows: list[dict[str, Any]]):
        from rich.table import Table
        from rich.text import Text

        title = f"rows 0-{len(rows) - 1} of {len(self.rows):,}" if len(rows) < len(self.rows) else None
        table = Table(title=title, show_lines=False)
        table.add_column("row", justify="right", min_width=3)
        table.add_column("group", justify="right", min_width=3)
        table.add_column("completion", max_width=40, overflow="ellipsis", no_wrap=True)
        table.add_column("parsed / gold", min_width=8, max_width=22, overflow="ellipsis", no_wrap=True)
        for name in self.functions:  # spaces let long names wrap between words instead of being cut
            header = name.removesuffix("_reward").replace("_", " ")
            table.add_column(header, justify="right", min_width=max(map(len, header.split())))
        table.add_column("total", justify="right", min_width=5)
        table.add_column("advantage", justify="right", min_width=9)
        for row in rows:
            table.add_row(
                str(row["row"]),
                str(row["group"]),
                Text(row["completion"].replace("\n", "\\n")),
                Text(f"{row['parsed']} / {row['gold']}"),
                *[_fmt(row["scores"][name]) for name in self.functions],
                _fmt(row["total"]),
                _fmt(row.get("advantage")),
            )
        return table


ERRORS = {"exception", "wrong_length", "not_a_number", "unreadable_completion", "missing_column"}


def problem_lines(problems: Sequence[Problem], shown: int = PROBLEMS_SHOWN) -> list[tuple[str, bool]]:
    """Problems as at most ``shown`` lines (text, is an error): one per kind and function, with how many times it
    happened and where, so that a tie in 1,000 groups is one line; a problem found once is printed whole."""
    by_kind: dict[tuple[str, str | None], list[Problem]] = {}
    for problem in problems:
        by_kind.setdefault((problem.kind, problem.function), []).append(problem)
    lines = []
    for (kind, function), found in by_kind.items():
        first = found[0]
        if len(found) == 1:
            text = str(first)
        else:
            rows = [p.row for p in found if p.row is not None]
            where = f" (rows {', '.join(map(str, rows[:5]))}{', ...' if len(rows) > 5 else ''})" if rows else ""
            text = (f"{kind}: {f'[{function}] ' if function else ''}{len(found):,} times{where}; the first: {first.message}"
                    + (f" -> {first.fix}" if first.fix else ""))
        lines.append((f"x {text}", kind in ERRORS))
    if len(lines) > shown:
        rest = sum(len(found) for found in list(by_kind.values())[shown:])
        lines = lines[:shown] + [(f"... and {rest:,} more problems in report.problems", False)]
    return lines


def function_table(report: RewardReport):
    """One line per reward function: its weight, mean, lowest and highest score, rows scored and not, problems."""
    from rich.table import Table

    weights = report.settings.get("reward_weights") or [1.0] * len(report.functions)
    counts: dict[str | None, int] = {}
    for problem in report.problems:
        counts[problem.function] = counts.get(problem.function, 0) + 1
    table = Table(title="per function", title_justify="left")
    for column in ("function", "weight", "mean", "min", "max", "scored", "None", "problems"):
        table.add_column(column, justify="left" if column == "function" else "right")
    for name, weight in zip(report.functions, weights):
        scores = [s for s in report.scores(name) if s is not None]
        mean = _fmt(sum(scores) / len(scores)) if scores else "-"
        table.add_row(name, f"{weight:g}", mean, _fmt(min(scores, default=None)), _fmt(max(scores, default=None)),
                      f"{len(scores):,}", f"{len(report.rows) - len(scores):,}", f"{counts.get(name, 0):,}")
    return table


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _columns(samples: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    keys = sorted({k for row in samples for k in row if k not in RESERVED})
    return {key: [row.get(key) for row in samples] for key in keys}


def _call(func: Callable, samples: Sequence[dict[str, Any]], extra: dict[str, Any]) -> list[Any]:
    return call_reward(
        func,
        prompts=[row.get("prompt") for row in samples],
        completions=[row.get("completion") for row in samples],
        completion_ids=[row["completion_ids"] for row in samples],
        **_columns(samples),
        **extra,
    )


def _score_function(func: Callable, name: str, samples: Sequence[dict[str, Any]], extra: dict[str, Any]):
    """One function's scores (None where it could not score) and the problems it showed."""
    n = len(samples)
    columns = list(dict.fromkeys(key for row in samples for key in row))
    missing = missing_columns(func, columns)
    if missing:
        needs = f"column{'s' * (len(missing) > 1)} {', '.join(map(repr, missing))}"
        return [None] * n, [Problem("missing_column", f"needs {needs}, which no row has (the rows' columns: "
                                    f"{', '.join(columns)}); add it to the rows, or give the parameter a default", name)]
    try:
        scores = _call(func, samples, extra)
    except Exception:
        problems = []
        for i, row in enumerate(samples):  # find the rows that make it crash
            try:
                _call(func, [row], extra)
            except Exception as error:
                problems.append(Problem("exception", f"{type(error).__name__}: {error}", name, i))
        if not problems:
            problems.append(Problem("exception", traceback.format_exc(limit=-1).strip(), name))
        return [None] * n, problems
    scores, violations = read_scores(scores, n)
    if any(v.kind == "wrong_length" for v in violations):
        return [None] * n, [Problem(v.kind, v.message, name) for v in violations]
    problems = [Problem(v.kind, v.message, name, v.row) for v in violations]
    bad = {v.row for v in violations}
    clean = [None if i in bad else score for i, score in enumerate(scores)]
    scored = [s for s in clean if s is not None]
    if n >= 2 and len(scored) == n and len(set(scored)) == 1:
        problems.append(Problem("constant_reward", f"scores {scored[0]:g} for every sample: it carries no signal here", name))
    if n and not scored:
        problems.append(Problem("never_scores", "returned None for every sample (missing column? unparseable golds?)", name))
    return clean, problems


def _readable(completion: Any) -> bool:
    try:
        completion_text(completion)
    except TypeError:
        return False
    return not isinstance(completion, (list, tuple)) or all(isinstance(m, dict) and "content" in m for m in completion)


def _groups(samples: Sequence[dict[str, Any]]) -> list[int]:
    keys: dict[str, int] = {}
    return [keys.setdefault(json.dumps(row.get("prompt"), sort_keys=True, default=str), len(keys)) for row in samples]


def check_rewards(
    reward_funcs: Callable | Sequence[Callable],
    samples: Sequence[dict[str, Any]] | Any,
    *,
    reward_weights: Sequence[float] | None = None,
    scale_rewards: str = "group",
    multi_objective_aggregation: str = "sum_then_normalize",
    completion_chars: int = 80,
    trainer_state: Any = None,
) -> RewardReport:
    """Score ``samples`` with every function and report per-row scores, advantages and problems.

    ``reward_funcs`` is anything ``grpo_lite.train`` takes as rewards (functions, names, presets,
    ``"module:function"``, ``RewardSet`` / ``weighted``); their weights count as in training. The advantage
    settings are ``GRPOConfig``'s (``reward_weights``, ``scale_rewards``, ``multi_objective_aggregation``).
    Each function is called as TRL calls it (:func:`rewards.calling.call_reward`: ``async`` ones awaited,
    ``trainer_state`` a Trainer's state before its first step unless given); what it logs through
    ``log_metric`` / ``log_extra`` is in ``report.logged_metrics`` / ``report.logged_columns``.
    """
    funcs, set_weights = resolve_rewards(reward_funcs)
    weights = list(reward_weights) if reward_weights is not None else set_weights
    rows_in = records(samples)
    if not rows_in:
        raise RewardError("no samples: pass rows like {'prompt': ..., 'completion': ..., 'answer': ...}")
    missing = [i for i, row in enumerate(rows_in) if row.get("completion") is None]  # absent, or a missing value
    if missing:
        columns = ", ".join(dict.fromkeys(key for row in rows_in for key in row)) or "none"
        raise RewardError(f"rows {missing[:5]}{' ...' * (len(missing) > 5)} have no completion (the rows' columns: "
                          f"{columns}); each row needs the completion to score")
    if weights is not None and len(weights) != len(funcs):
        raise RewardError(f"reward_weights has {len(weights)} values for {len(funcs)} reward functions")

    names = distinct_names(funcs)  # as training logs them: two lambdas are <lambda> and <lambda>_2
    problems = [
        Problem("unreadable_completion", "not a string or a list of {'role', 'content'} messages", row=i)
        for i, row in enumerate(rows_in)
        if not _readable(row["completion"])
    ]
    readable = [row if _readable(row["completion"]) else {**row, "completion": ""} for row in rows_in]
    # Token ids when the rows carry them (a model's own completions); else one "token" per UTF-8 byte.
    readable = [{**r, "completion_ids": r.get("completion_ids") or list(completion_text(r["completion"]).encode())} for r in readable]
    logged_metrics: dict[str, list[float]] = {}
    logged_columns: dict[str, list[Any]] = {}
    extra = {
        "trainer_state": trainer_state if trainer_state is not None else _trainer_state(),
        "log_metric": lambda name, value: logged_metrics.setdefault(name, []).append(value),
        "log_extra": lambda column, values: logged_columns.setdefault(column, []).extend(values),
    }
    scores: dict[str, list[float | None]] = {}
    for func, name in zip(funcs, names):
        scores[name], found = _score_function(func, name, readable, extra)
        problems += found

    groups = _groups(readable)
    golds = gold_answers([r.get("answer") for r in readable], len(readable))
    failed = {p.function for p in problems if p.kind in ERRORS}
    problems += _unreadable_golds([(f, n) for f, n in zip(funcs, names) if n not in failed], scores, golds)
    w = weights or [1.0] * len(funcs)
    rows = []
    for i, row in enumerate(readable):
        text = completion_text(row["completion"])
        rows.append({
            "row": i,
            "group": groups[i],
            "completion": text[:completion_chars] + ("..." if len(text) > completion_chars else ""),
            "parsed": final_answer(text),
            "gold": golds[i],
            "scores": {n: scores[n][i] for n in names},
            "total": weighted_total([scores[n][i] for n in names], w),
        })
    problems += _advantages(rows, names, weights, scale_rewards, multi_objective_aggregation)
    settings = {"reward_weights": weights, "scale_rewards": scale_rewards, "multi_objective_aggregation": multi_objective_aggregation}
    return RewardReport(functions=names, rows=rows, problems=problems, settings=settings,
                        logged_metrics=logged_metrics, logged_columns=logged_columns)


def records(samples: Any) -> list[dict[str, Any]]:
    """Rows as dicts from a list of dicts, a ``datasets.Dataset`` or a pandas DataFrame (by its columns), each missing
    value None."""
    if (refusal := several_splits(samples, "samples")) is not None:
        raise RewardError(refusal)
    if is_data_frame(samples):
        samples = samples.to_dict(orient="records")
    if isinstance(samples, (str, bytes, dict)) or not isinstance(samples, Iterable):
        raise RewardError(f"samples is a {type(samples).__name__}: pass rows, a list of dicts like {{'prompt': ..., "
                          "'completion': ..., 'answer': ...}, a datasets.Dataset or a pandas DataFrame")
    rows = samples.to_list() if hasattr(samples, "to_list") else list(samples)
    bad = next((i for i, row in enumerate(rows) if not isinstance(row, dict)), None)
    if bad is not None:
        raise RewardError(f"sample {bad} is a {type(rows[bad]).__name__}, expected a dict of column -> value")
    return [{key: None if is_missing(value) else value for key, value in row.items()} for row in rows]


def _trainer_state():
    """What a reward reading ``trainer_state`` sees in the lab: the Trainer's state before its first step."""
    try:
        from transformers import TrainerState
    except ImportError:  # rewards runs without transformers; a reward that reads the state then gets None
        return None
    return TrainerState()


def reads_gold(func: Callable) -> bool:
    """Whether a reward takes the ``answer`` column by name, as the correctness rewards do."""
    target = func if inspect.isfunction(func) or inspect.ismethod(func) else func.__call__
    try:
        return "answer" in inspect.signature(target).parameters
    except (TypeError, ValueError):
        return False


def _unreadable_golds(named_funcs, scores, golds) -> list[Problem]:
    """Rows that have a gold answer which a correctness reward declined (``None``): it cannot read that gold,
    so those rows teach nothing through it."""
    problems = []
    for func, name in named_funcs:
        if not reads_gold(func):
            continue
        for i, (score, gold) in enumerate(zip(scores[name], golds)):
            if score is None and gold is not None:
                problems.append(Problem(
                    "unreadable_gold",
                    f"cannot read the gold answer {gold!r:.60} (it scores None); see the golds it accepts in "
                    "docs/rewards.md, or use a reward for that kind of answer (exact_match_reward for text)",
                    name, i,
                ))
    return problems


def _advantages(rows, names, weights, scale_rewards, aggregation) -> list[Problem]:
    """Fill ``row["advantage"]`` for rows in groups of 2+ completions; flag groups with no signal."""
    from .advantages import as_reward_matrix, group_advantages

    by_group: dict[int, list[dict]] = {}
    for row in rows:
        by_group.setdefault(row["group"], []).append(row)
    groups = [members for members in by_group.values() if len(members) >= 2]
    if not groups:
        return []
    sizes = {len(members) for members in groups}
    if len(sizes) > 1 and (scale_rewards == "batch" or aggregation == "normalize_then_sum"):
        return [Problem("advantages_skipped", f"groups have different sizes {sorted(sizes)}; batch-level advantages need equal groups")]
    equal = len(sizes) == 1
    batches = [[r for members in groups for r in members]] if equal else groups
    for batch in batches:
        size = len(groups[0]) if equal else len(batch)
        matrix = as_reward_matrix([[r["scores"][n] for r in batch] for n in names])
        advantages, _ = group_advantages(matrix, size, weights=weights, scale_rewards=scale_rewards, aggregation=aggregation)
        for row, advantage in zip(batch, advantages.tolist()):
            row["advantage"] = round(advantage, 4)
    return [
        Problem(
            "no_signal",
            f"all {len(members)} completions of group {members[0]['group']} score the same: their advantages are 0 "
            "and this prompt teaches nothing",
        )
        for members in groups
        if all(abs(r["advantage"]) < TIE for r in members)
    ]

