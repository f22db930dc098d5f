"""preview(): what your rewards would teach, on the model's own completions, before a GPU hour is spent.

It samples groups of completions from the model as GRPOTrainer would (the run's sampling settings, the
chat template, vLLM when the model has an engine), scores them in the reward lab with training's weights
and advantage formula, and reports what decides whether a run can learn:

- groups with no signal: every completion of a prompt scores the same, so its advantages are 0;
- pass@k next to greedy accuracy for each correctness reward: can GRPO improve this at all?
- rewards that pull against each other (negative correlation over the samples);
- rewards that pay for length (correlation with the completion's token count);
- completions cut at ``max_completion_length``.

With tools or an environment (``grpo_lite.preview(..., tools=...)``, grpo_lite/training/episode_preview.py), TRL's own
tool loop plays the groups as episodes, and the same report adds what only episodes show (:mod:`.episodes`): every
episode cut at the turn limit, a tool whose every call fails, no tool ever called.

Each finding comes with a one-line suggestion. The report's display summarises first (findings, problems, one
line per reward function), then the first groups and how many more there are; ``report.browse()`` opens an
interactive view of every group in a notebook, ``report.to_csv(path)`` writes every completion's scores, and
``report.rescore()`` scores the same completions again with the rewards as they are defined now.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rewards import RewardSet, check_rewards, resolve_rewards
from rewards.calling import as_trl_completion
from rewards.check import ERRORS, RewardReport, function_table, problem_lines, reads_gold
from rewards.combine import Weighted
from rewards.diagnoses import TIE, Finding, finding, is_correct, is_no_signal, is_truncated
from rewards.display import RichReport

from ..data.prepare import DatasetError, as_dataset
from ..model.inference import Completion, sample
from ..monitor.samples import question_of
from ..run.settings import ConfigError
from .episodes import episode_findings
from .scoring import as_rewards_get, pass_at_k, powers_of_two

SAMPLING = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "max_completion_length")
ADVANTAGE = ("reward_weights", "scale_rewards", "multi_objective_aggregation")
OPPOSED = -0.3  # correlation at or below which two rewards pull against each other
LENGTH_PAYING = 0.5  # correlation with token count at or above which a reward pays for length
GROUPS_SHOWN = 20  # groups the display draws; every group is in report.groups, .browse() and .to_csv()


def correlation(xs: Sequence[float | None], ys: Sequence[float | None]) -> float | None:
    """Pearson correlation over the pairs where both are scored; None with fewer than 3 or no spread."""
    pairs = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
    if len(pairs) < 3:
        return None
    mx, my = sum(x for x, _ in pairs) / len(pairs), sum(y for _, y in pairs) / len(pairs)
    sxy = sum((x - mx) * (y - my) for x, y in pairs)
    sx, sy = math.sqrt(sum((x - mx) ** 2 for x, _ in pairs)), math.sqrt(sum((y - my) ** 2 for _, y in pairs))
    return sxy / (sx * sy) if sx > 0 and sy > 0 else None


def sampling_settings(preset: str = "auto", **overrides: Any) -> dict[str, Any]:
    """The sampling and advantage settings a run with ``preset`` and ``overrides`` trains with: GRPOConfig's
    defaults, then the preset's, then the overrides (checked like train's)."""
    from trl import GRPOConfig

    from ..run.settings import resolve_options

    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig) if f.name in SAMPLING + ADVANTAGE}
    generations = overrides.get("num_generations", 8)
    options = resolve_options(preset, **{"per_device_train_batch_size": generations, **overrides})
    return {**defaults, **{k: v for k, v in options.items() if k in SAMPLING + ADVANTAGE}}


def _current(func: Any) -> Any:
    """A function defined in the notebook or script as it is defined now (a cell may have been run again)."""
    main = sys.modules.get("__main__")
    name = getattr(func, "__name__", None)
    if getattr(func, "__module__", None) == "__main__" and name and callable(getattr(main, name, None)):
        return getattr(main, name)
    return func


def current_rewards(spec: Any) -> Any:
    """``spec`` with every function of the notebook replaced by its current definition; names re-resolve."""
    if isinstance(spec, RewardSet):
        return RewardSet(*[Weighted(_current(item.func), item.weight) for item in spec.items])
    if isinstance(spec, Weighted):
        return Weighted(_current(spec.func), spec.weight)
    if isinstance(spec, (list, tuple)):
        return [current_rewards(item) for item in spec]
    return _current(spec)


@dataclass
class PreviewReport(RichReport):
    """The lab's report on sampled groups, with what decides whether GRPO can learn from them.

    ``lab`` is the reward lab's :class:`~rewards.check.RewardReport` (every row: scores, total, advantage);
    ``groups[i]`` lists the lab rows of prompt ``i``; ``findings`` say what to change. A preview with tools or an
    environment, or a rollout function (grpo_lite.training.episode_preview) keeps each completion's episode in
    ``episodes`` (samples.jsonl's rows), ``with_tools`` where the episodes had tools to call; a preview of replies has none.
    """

    text_width = 140
    groups_shown = GROUPS_SHOWN  # set on a report to draw more or fewer groups

    lab: RewardReport
    rows: list[dict[str, Any]]
    groups: list[list[int]]
    completions: list[Completion]
    rewards: Any
    settings: dict[str, Any]
    greedy_rows: list[dict[str, Any]] = field(default_factory=list, repr=False)
    greedy_scores: dict[str, list[float | None]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list, repr=False)
    with_tools: bool = False

    # Summaries ------------------------------------------------------------------------------------

    @property
    def functions(self) -> list[str]:
        return self.lab.functions

    @property
    def num_generations(self) -> int:
        return len(self.groups[0]) if self.groups else 0

    def no_signal(self, group: int) -> bool:
        return all(abs(self.lab.rows[i].get("advantage") or 0.0) < TIE for i in self.groups[group])

    @property
    def no_signal_share(self) -> float:
        return sum(self.no_signal(g) for g in range(len(self.groups))) / max(len(self.groups), 1)

    @property
    def truncated_share(self) -> float:
        return sum(c.truncated for c in self.completions) / max(len(self.completions), 1)

    def crashed(self, group: int) -> bool:
        failed = {p.row for p in self.lab.problems if p.kind in ERRORS and p.row is not None}
        broken = {p.function for p in self.lab.problems if p.kind in ERRORS and p.row is None}
        return bool(broken) or any(i in failed for i in self.groups[group])

    def truncated(self, group: int) -> bool:
        return any(self.completions[i].truncated for i in self.groups[group])

    def disagree(self, group: int) -> bool:
        """Two rewards rank this group's completions in opposite ways."""
        rows = [self.lab.rows[i]["scores"] for i in self.groups[group]]
        columns = [[row[name] for row in rows] for name in self.functions]
        return any((r := correlation(a, b)) is not None and r <= OPPOSED
                   for i, a in enumerate(columns) for b in columns[i + 1:])

    @property
    def correctness(self) -> list[str]:
        """The rewards that read the gold answer: the ones pass@k is measured with."""
        return [name for name, func in zip(self.functions, resolve_rewards(self.rewards)[0]) if reads_gold(func)]

    def pass_at_k(self, name: str) -> dict[int, float]:
        """pass@k of reward ``name`` (a completion counts when it scores above 0), k up to the group size."""
        n = self.num_generations
        counts = [sum(is_correct(self.lab.rows[i]["scores"][name]) for i in group) for group in self.groups]
        return {k: sum(pass_at_k(n, c, k) for c in counts) / len(counts) for k in powers_of_two(n)}

    def greedy_accuracy(self, name: str) -> float | None:
        scores = self.greedy_scores.get(name)
        return sum(is_correct(s) for s in scores) / len(scores) if scores else None

    def correlations(self) -> dict[tuple[str, str], float]:
        columns = {name: self.lab.scores(name) for name in self.functions}
        pairs = {}
        for i, a in enumerate(self.functions):
            for b in self.functions[i + 1:]:
                r = correlation(columns[a], columns[b])
                if r is not None:
                    pairs[(a, b)] = r
        return pairs

    def length_correlations(self) -> dict[str, float]:
        lengths = [len(c.token_ids) for c in self.completions]
        found = {name: correlation(self.lab.scores(name), lengths) for name in self.functions}
        return {name: r for name, r in found.items() if r is not None}

    # Re-scoring -----------------------------------------------------------------------------------

    def rescore(self, rewards: Any = None) -> PreviewReport:
        """The same completions scored again, with ``rewards`` or, by default, the rewards as they are defined
        now: edit a reward function in its cell, run the cell, then rescore."""
        spec = current_rewards(self.rewards if rewards is None else rewards)
        return report_on(self.rows, self.groups, self.completions, spec, self.settings, self.greedy_rows, episodes=self.episodes,
                         with_tools=self.with_tools)

    def browse(self):
        """An interactive view in a notebook: groups one by one, filters, a re-score button."""
        from .preview_browser import PreviewBrowser

        return PreviewBrowser(self).widget

    def to_csv(self, path):
        """Write every sampled completion's scores, total and advantage to a CSV file (the lab's rows; ``group`` is
        the prompt's index)."""
        return self.lab.to_csv(path)

    def __rich__(self):
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        lines = [Text(f"Preview: {len(self.groups)} prompts x {self.num_generations} completions, "
                      f"{self.no_signal_share:.0%} of groups with no signal, {self.truncated_share:.0%} truncated",
                      style="bold")]
        if self.episodes:
            ended = Counter(episode["ended"] for episode in self.episodes)
            lines.append(Text("episodes ended: " + ", ".join(f"{where} {count}" for where, count in ended.most_common())))
        for name in self.correctness:
            greedy = self.greedy_accuracy(name)
            passes = ", ".join(f"pass@{k} {v:.0%}" for k, v in self.pass_at_k(name).items())
            lines.append(Text(f"{name}: greedy accuracy {'-' if greedy is None else f'{greedy:.0%}'}, {passes}"))
        shown_groups = self.groups[: max(self.groups_shown, 0)]
        title = "groups" if len(shown_groups) == len(self.groups) else f"groups 0-{len(shown_groups) - 1} of {len(self.groups):,}"
        groups = Table(title=title)
        for column in ("group", "prompt", "answer", "mean total", "spread", "no signal", "truncated"):
            groups.add_column(column, overflow="ellipsis", no_wrap=column == "prompt", max_width=50 if column == "prompt" else None)
        for g, members in enumerate(shown_groups):
            totals = [self.lab.rows[i]["total"] for i in members if self.lab.rows[i]["total"] is not None]
            spread = max(totals) - min(totals) if totals else 0.0
            mean = f"{sum(totals) / len(totals):.3g}" if totals else "-"
            groups.add_row(str(g), Text(question_of(self.rows[members[0]]["prompt"])), Text(str(self.lab.rows[members[0]]["gold"])),
                           mean, f"{spread:.3g}", "yes" if self.no_signal(g) else "", str(sum(self.completions[i].truncated for i in members)))
        findings = [Text(f"! {found}", style="yellow") for found in self.findings] or [Text("no findings", style="green")]
        problems = [problem for problem in self.lab.problems if problem.kind not in ("no_signal", "constant_reward")]
        shown = [Text(line.replace("report.problems", "report.lab.problems"), style="red")
                 for line, _ in problem_lines(problems)]
        rest = []
        if len(self.groups) > len(shown_groups):
            rest.append(Text(f"... and {len(self.groups) - len(shown_groups):,} more groups: report.groups, report.browse(), "
                             "report.to_csv(path)", style="italic"))
        return Group(*lines, *findings, *shown, function_table(self.lab), groups, *rest)


def _findings(report: PreviewReport) -> list[Finding]:
    found = []
    n = report.num_generations
    if is_no_signal(report.no_signal_share):
        found.append(finding("no_signal", f"{report.no_signal_share:.0%} of a batch would teach nothing: every completion "
                             "of those prompts scores the same"))
    found += [finding(p.kind, f"{p.function}: {p.message}") for p in report.lab.problems if p.kind == "constant_reward"]
    for name in report.correctness:
        passes = report.pass_at_k(name)
        greedy = report.greedy_accuracy(name)
        if passes[n] == 0:
            found.append(Finding("never_correct", f"{name}: no completion of any prompt is right (pass@{n} = 0), so GRPO "
                                 "has nothing to reinforce", "start from an easier task or a stronger model, add partial "
                                 "credit (a format reward), or raise num_generations"))
        elif greedy is not None and greedy >= 0.95 and passes[1] >= 0.95:
            found.append(Finding("already_solved", f"{name}: greedy accuracy {greedy:.0%} and pass@1 {passes[1]:.0%}: "
                                 "little left to learn", "use harder prompts, or check that the reward is not too easy"))
        elif greedy is not None and passes[n] - greedy >= 0.2:
            found.append(Finding("headroom", f"{name}: pass@{n} {passes[n]:.0%} against greedy {greedy:.0%}: the model "
                                 "often samples the right answer, which GRPO can sharpen into its first answer",
                                 "good: train; greedy accuracy should climb towards pass@k"))
    for (a, b), r in report.correlations().items():
        if r <= OPPOSED:
            found.append(Finding("opposed_rewards", f"{a} and {b} pull against each other (correlation {r:.2f}): what "
                                 "one pays, the other takes back", "check that both mean what you want; weight the one "
                                 "that matters more (rewards.weighted) or drop the other"))
    for name, r in report.length_correlations().items():
        if r >= LENGTH_PAYING:
            found.append(Finding("pays_for_length", f"{name} rises with completion length (correlation {r:.2f}): the "
                                 "policy can earn it by writing more", "if length is not the goal, cap it "
                                 "(max_length_penalty, soft_overlong_punishment) or score content only"))
    if is_truncated(report.truncated_share):
        found.append(finding("truncated", f"{report.truncated_share:.0%} of completions hit max_completion_length"))
    return found + episode_findings(report.episodes, has_tools=report.with_tools)


def report_on(rows, groups, completions, rewards, settings, greedy_rows, *, episodes=(), with_tools: bool = False) -> PreviewReport:
    """The report on sampled groups: ``rows`` scored in the lab with ``rewards`` and ``settings``' advantage formula,
    ``completions`` as sampled, ``greedy_rows`` for the greedy accuracy, ``episodes`` where the rollouts were played as
    episodes, ``with_tools`` where they had tools to call."""
    funcs, weights = resolve_rewards(rewards)
    lab = check_rewards(rewards, rows, reward_weights=settings.get("reward_weights") or weights,
                        scale_rewards=settings["scale_rewards"],
                        # TRL before 0.27 has no such field and always sums, then normalizes (machine/stack.py)
                        multi_objective_aggregation=settings.get("multi_objective_aggregation", "sum_then_normalize"))
    correctness = [f for f in funcs if reads_gold(f)]
    greedy_scores = {}
    if greedy_rows and correctness:
        greedy_lab = check_rewards(correctness, greedy_rows)
        greedy_scores = {name: greedy_lab.scores(name) for name in greedy_lab.functions}
    report = PreviewReport(lab=lab, rows=rows, groups=groups, completions=completions, rewards=rewards,
                           settings=settings, greedy_rows=greedy_rows, greedy_scores=greedy_scores, episodes=list(episodes),
                           with_tools=with_tools)
    report.findings = _findings(report)
    return report


def checked_input(dataset, rewards: Any, num_generations: int):
    """``dataset`` as a Dataset, refused before any generation where preview could not judge it: no prompts, groups
    of one, rewards that do not resolve (``None``: the episodes' environments score them)."""
    dataset = as_dataset(dataset)
    if "prompt" not in dataset.column_names:
        raise DatasetError(f"preview: the dataset has no 'prompt' column (columns: {dataset.column_names}); build it "
                         "with grpo_lite.prepare_dataset")
    if num_generations < 2:
        raise ConfigError(f"preview: num_generations={num_generations}; GRPO compares completions within a group, use 2 or more")
    if rewards is not None:
        resolve_rewards(rewards)  # names and signatures checked before any generation
    return dataset


def preview(
    model,
    tokenizer,
    dataset,
    rewards: Any,
    *,
    n_prompts: int = 8,
    num_generations: int = 8,
    max_completion_length: int | None = None,
    preset: str = "auto",
    greedy: bool = True,
    batch_size: int = 16,
    seed: int = 0,
    chat_template_kwargs: dict[str, Any] | None = None,
    **overrides: Any,
) -> PreviewReport:
    """Sample ``num_generations`` completions for each of the first ``n_prompts`` rows of ``dataset`` (a
    ``prepare_dataset`` dataset) as training would, score them with ``rewards``, and report what they teach.

    Sampling and advantage settings are the run's: ``preset`` and ``overrides`` are those you would give
    ``train`` (``temperature``, ``top_p``, ``top_k``, ``min_p``, ``repetition_penalty``, ``scale_rewards``,
    ``reward_weights``, ...); ``max_completion_length`` defaults to the preset's. With
    ``greedy``, one greedy completion per prompt gives the greedy accuracy pass@k is compared with. Prompts are rendered
    as training renders them, with ``chat_template_kwargs`` (``None``: those the last ``train()`` with this tokenizer
    used; see :func:`grpo_lite.generate`) and each row's own values of the columns the chat template reads over them.

    Example::

        report = preview(model, tokenizer, dataset, "gsm8k", n_prompts=8, num_generations=8)
        report            # findings with suggestions, groups, pass@k next to greedy accuracy
        report.browse()   # in a notebook: group by group, filters, re-score after editing a reward
    """
    import torch

    dataset = checked_input(dataset, rewards, num_generations)
    settings = sampling_settings(preset, num_generations=num_generations, **overrides)
    if max_completion_length is not None:
        settings["max_completion_length"] = max_completion_length
    chosen = [dict(row) for row in dataset.select(range(min(n_prompts, len(dataset))))]
    options = dict(max_completion_length=settings["max_completion_length"], batch_size=batch_size,
                   chat_template_kwargs=chat_template_kwargs)
    with torch.random.fork_rng():  # seeded, and the caller's random stream left as it was
        torch.manual_seed(seed)
        completions = sample(model, tokenizer, chosen, do_sample=True, num_return_sequences=num_generations,
                             temperature=settings["temperature"], top_p=settings["top_p"], top_k=settings["top_k"],
                             min_p=settings["min_p"], repetition_penalty=settings["repetition_penalty"], **options)
    scored = as_rewards_get(tokenizer, chosen, chat_template_kwargs)
    rows, groups = [], []
    for g, row in enumerate(scored):
        groups.append(list(range(len(rows), len(rows) + num_generations)))
        rows += [_lab_row(row, c) for c in completions[g * num_generations:(g + 1) * num_generations]]
    greedy_rows = [_lab_row(row, c) for row, c in zip(scored, sample(model, tokenizer, chosen, **options))] if greedy else []
    return report_on(rows, groups, completions, rewards, settings, greedy_rows)


def _lab_row(row: dict[str, Any], completion: Completion) -> dict[str, Any]:
    """A completion as the reward functions receive it in training: a chat message for a chat prompt
    (GRPOTrainer's conversational format), with its token ids and the dataset row's other columns."""
    return {**{k: v for k, v in row.items() if k != "prompt"}, "prompt": row["prompt"],
            "completion": as_trl_completion(row["prompt"], completion.text), "completion_ids": list(completion.token_ids)}
