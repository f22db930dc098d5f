"""Health rules: turn the metric stream of a GRPO run into warnings a person can act on.

Each rule reads the step records of ``metrics.jsonl`` (TRL's metrics plus the ``invariants/*`` keys of
:mod:`grpo_lite.monitor.invariants`) and fires once when its condition starts; it fires again only after
the condition has cleared. Every threshold and fix lives in :data:`rewards.diagnoses.DIAGNOSES`, the table the
reward lab, preview and rescore read too; docs/monitoring.md explains each one.

What a monitor holds stays the same size however long the run: one :class:`RuleSummary` per rule (how often it
fired, first and last step, the latest occurrence), the newest ``keep`` occurrences, and the rewards of the
last trend windows. Every occurrence of a finished or running run comes back from its metrics.jsonl:
``replay(read_metrics(output_dir))``.

    monitor = HealthMonitor(beta=0.04, reward_names=["correctness"])
    for record in read_metrics("outputs/run"):
        for warning in monitor.update(record):
            print(warning)
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewards.diagnoses import DIAGNOSIS, is_no_signal


@dataclass(frozen=True)
class HealthWarning:
    rule: str
    step: int
    message: str
    fix: str

    def __str__(self) -> str:
        return f"step {self.step}: {self.message} -> {self.fix}"


RECENT_SHOWN = 5  # occurrences a view lists under the per-rule lines
KEPT = 200  # occurrences a HealthMonitor keeps in memory (every one is in metrics.jsonl: replay it)


@dataclass(frozen=True)
class RuleSummary:
    """One rule over a run: how many times it fired, its first step, and its latest occurrence (message and fix)."""

    rule: str
    count: int
    first_step: int
    last: HealthWarning

    @property
    def last_step(self) -> int:
        return self.last.step

    @property
    def message(self) -> str:
        return self.last.message

    @property
    def fix(self) -> str:
        return self.last.fix

    def __str__(self) -> str:
        times = "once" if self.count == 1 else f"{self.count:,} times"
        steps = f"step {self.first_step}" if self.count == 1 else f"steps {self.first_step}-{self.last_step}"
        return f"{self.rule}: {times} ({steps}); latest: {self.message} -> {self.fix}"


@dataclass(frozen=True)
class WarningSummary:
    """What the views show of a run's warnings, the same size however many fired: one :class:`RuleSummary` per rule
    (in the order they first fired) and the ``recent`` newest occurrences; ``total`` counts every occurrence."""

    rules: tuple[RuleSummary, ...] = ()
    recent: tuple[HealthWarning, ...] = ()
    total: int = 0

    @classmethod
    def of(cls, warnings: Iterable[HealthWarning], recent: int = RECENT_SHOWN) -> WarningSummary:
        """The summary of a list of warnings (in the order they fired)."""
        rules: dict[str, RuleSummary] = {}
        newest: deque[HealthWarning] = deque(maxlen=recent)
        total = 0
        for warning in warnings:
            rules[warning.rule] = _counted(rules.get(warning.rule), warning)
            newest.append(warning)
            total += 1
        return cls(tuple(rules.values()), tuple(newest), total)

    def __bool__(self) -> bool:
        return self.total > 0

    def __len__(self) -> int:
        return self.total

    def lines(self) -> list[str]:
        """The summary as text: one line per rule, then the newest occurrences on one line."""
        if not self.total:
            return []
        recent = "; ".join(f"step {w.step} {w.rule}" for w in reversed(self.recent))
        return [str(rule) for rule in self.rules] + [f"{self.total:,} warnings in all; newest: {recent}"]


def _counted(summary: RuleSummary | None, warning: HealthWarning) -> RuleSummary:
    if summary is None:
        return RuleSummary(warning.rule, 1, warning.step, warning)
    return RuleSummary(warning.rule, summary.count + 1, summary.first_step, warning)


def metric(record: Mapping[str, Any], key: str) -> float | None:
    """A metric as a float, or None when absent. metrics.jsonl writes NaN as null and infinities as strings."""
    value = record.get(key)
    return None if value is None else float(value)


def _finite(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def reward_trend(rewards: Sequence[float | None], window: int = DIAGNOSIS["reward_not_improving"].window) -> float | None:
    """Mean of the last third minus mean of the first third of the last ``window`` rewards (None under 6 steps)."""
    recent = _finite(rewards[-window:])
    third = len(recent) // 3
    if third < 2:
        return None
    return sum(recent[-third:]) / third - sum(recent[:third]) / third


class HealthMonitor:
    """Feed it step records in order; ``update`` returns the warnings that start at that step.

    ``beta`` (the run's GRPOConfig.beta) lets ``kl_absent`` fire without a record; ``max_steps`` shortens
    the reward-trend window for runs shorter than it; ``reward_names`` picks the rewards watched by
    ``constant_reward`` (default: every ``rewards/<name>/mean`` in the records).

    It holds a bounded record: ``rules`` (rule -> :class:`RuleSummary`, every occurrence counted), ``warnings``
    (the newest ``keep`` occurrences), ``total`` (how many fired); :meth:`summary` is what the views show.
    """

    def __init__(self, *, beta: float | None = None, max_steps: int | None = None, reward_names: Iterable[str] = (),
                 keep: int = KEPT):
        self.beta = beta
        self.max_steps = max_steps
        self.reward_names = list(reward_names)
        window = DIAGNOSIS["reward_not_improving"].window
        self.trend_window = min(window, max_steps) if max_steps and max_steps > 0 else window
        self.warnings: deque[HealthWarning] = deque(maxlen=keep)
        self.rules: dict[str, RuleSummary] = {}
        self.total = 0
        self.steps = 0  # records seen
        self.rewards: list[float | None] = []  # the rewards of the last two trend windows
        self._active: set[str] = set()
        self._low_std_steps = 0
        self._first_reward_means: dict[str, float | None] = {}
        self._varied_rewards: set[str] = set()
        self._streaks: dict[str, int] = {}  # rule -> steps in a row its metric has been past its threshold

    def update(self, record: dict[str, Any]) -> list[HealthWarning]:
        self.steps += 1
        self.rewards.append(metric(record, "reward"))
        if len(self.rewards) > 4 * self.trend_window:  # trimmed now and then: the rules read two windows
            del self.rewards[:-2 * self.trend_window]
        step = int(record.get("step", self.steps))
        conditions = self._conditions(record, step)
        new = [HealthWarning(name, step, message, DIAGNOSIS[name].fix)
               for name, message in conditions.items() if message and name not in self._active]
        self._active = {name for name, message in conditions.items() if message}
        for warning in new:
            self.rules[warning.rule] = _counted(self.rules.get(warning.rule), warning)
        self.warnings.extend(new)
        self.total += len(new)
        return new

    def summary(self, recent: int = RECENT_SHOWN) -> WarningSummary:
        """What the views show: one line per rule and the ``recent`` newest occurrences (cost independent of run length)."""
        newest = tuple(self.warnings)[-recent:] if recent > 0 else ()
        return WarningSummary(tuple(self.rules.values()), newest, self.total)

    def _conditions(self, record: dict[str, Any], step: int) -> dict[str, str | None]:
        """Each rule's message when its condition holds at this step, else None."""
        return {
            "no_signal": self._no_signal(record),
            "kl_high": self._above(record, "kl_high", "kl", "KL is {value:.3g}: the policy is drifting fast"),
            "reward_not_improving": self._reward_not_improving(),
            "truncated": self._above(record, "truncated", "completions/clipped_ratio",
                                     "{value:.0%} of completions hit max_completion_length"),
            "constant_reward": self._constant_reward(record),
            "nan": next((f"{key} is {record[key]}" for key in ("loss", "grad_norm") if key in record
                         and (record[key] is None or not math.isfinite(metric(record, key)))), None),
            "kl_absent": self._kl_absent(record),
            "zero_grad": self._zero_grad(record, step),
            "advantage_not_centered": self._above(record, "advantage_not_centered",
                                                  "invariants/within_group_adv_sum_absmax",
                                                  "a group's advantages sum to {value:.3g}, not 0"),
            "empty_completion_mask": self._empty_completion_mask(record),
            "kl_dominates": self._above(record, "kl_dominates", "invariants/kl_share",
                                        "the KL term is {value:.0%} of the update signal"),
            "turn_limit": self._at_least(record, "turn_limit", "episodes/turn_limit",
                                         "every episode ended at the turn limit, its last call unanswered"),
            "tool_always_fails": self._for_steps(record, "tool_always_fails", "tools/failure_frequency", above=True,
                                                 message="every tool call failed for {steps} steps"),
            "no_tool_calls": self._for_steps(record, "no_tool_calls", "tools/call_frequency", above=False,
                                             message="no episode called a tool for {steps} steps"),
        }

    @staticmethod
    def _above(record, rule: str, key: str, message: str) -> str | None:
        value = metric(record, key)
        return message.format(value=value) if value is not None and value > DIAGNOSIS[rule].thresholds[key] else None

    @staticmethod
    def _at_least(record, rule: str, key: str, message: str) -> str | None:
        value = metric(record, key)
        return message if value is not None and value >= DIAGNOSIS[rule].thresholds[key] else None

    def _for_steps(self, record, rule: str, key: str, *, above: bool, message: str) -> str | None:
        """``message`` once ``key`` has been at or past the rule's threshold (at least it with ``above``, else at most)
        for its ``window`` steps in a row; a step without the metric (a run without tools) breaks the streak."""
        value, diagnosis = metric(record, key), DIAGNOSIS[rule]
        threshold = diagnosis.thresholds[key]
        past = value is not None and (value >= threshold if above else value <= threshold)
        steps = self._streaks[rule] = self._streaks.get(rule, 0) + 1 if past else 0
        return message.format(steps=steps) if steps >= diagnosis.window else None

    def _no_signal(self, record) -> str | None:
        rule = DIAGNOSIS["no_signal"]
        reward_std, tied = metric(record, "reward_std"), metric(record, "frac_reward_zero_std")
        low = reward_std is not None and reward_std < rule.thresholds["reward_std"]
        self._low_std_steps = self._low_std_steps + 1 if low else 0
        if tied is not None and is_no_signal(tied):
            return f"{tied:.0%} of groups gave every completion the same reward: no learning signal"
        if self._low_std_steps >= rule.window:
            return f"reward_std has stayed under {rule.thresholds['reward_std']} for {self._low_std_steps} steps"
        return None

    def _reward_not_improving(self) -> str | None:
        """A falling trend over the window whose mean is also no higher than the window's before it (or the
        steps before it, early on): a noisy reward that rises from window to window dips inside some windows."""
        window = self.trend_window
        if self.steps < window:
            return None
        trend = reward_trend(self.rewards, window)
        if trend is None or trend > DIAGNOSIS["reward_not_improving"].thresholds["invariants/reward_trend"]:
            return None
        recent, before = _finite(self.rewards[-window:]), _finite(self.rewards[-2 * window:-window])
        if before and sum(recent) / len(recent) > sum(before) / len(before):
            return None
        return f"reward has not improved over the last {window} steps (trend {trend:+.3g})"

    def _constant_reward(self, record) -> str | None:
        """Rewards with zero spread and one mean since the first step, judged from step ``window`` on."""
        names = self.reward_names or [key.split("/")[1] for key in record
                                      if key.startswith("rewards/") and key.endswith("/mean")]
        for name in names:
            mean, std = metric(record, f"rewards/{name}/mean"), metric(record, f"rewards/{name}/std")
            first = self._first_reward_means.setdefault(name, mean)
            if mean is None or mean != first or (std or 0.0) > DIAGNOSIS["constant_reward"].thresholds["rewards/<name>/std"]:
                self._varied_rewards.add(name)
        constant = [name for name in names if name not in self._varied_rewards]
        if self.steps < DIAGNOSIS["constant_reward"].window or not constant:
            return None
        return f"{', '.join(constant)} gave every completion the same score since the first step"

    def _kl_absent(self, record) -> str | None:
        absent = self.beta == 0 if self.beta is not None else record.get("kl") is None
        return "KL is not computed (beta is 0, so there is no reference model)" if absent else None

    def _zero_grad(self, record, step: int) -> str | None:
        rule, grad_norm = DIAGNOSIS["zero_grad"], metric(record, "grad_norm")
        if step >= rule.window and grad_norm is not None and grad_norm <= rule.thresholds["grad_norm"]:
            return f"grad_norm is {grad_norm:g}: no weight moves"
        return None

    def _empty_completion_mask(self, record) -> str | None:
        tokens = metric(record, "invariants/completion_tokens")
        if tokens is not None and tokens <= DIAGNOSIS["empty_completion_mask"].thresholds["invariants/completion_tokens"]:
            return "no completion token is trained on (the completion mask is empty)"
        return None


def replay(records: Iterable[dict[str, Any]], **options) -> list[HealthWarning]:
    """Every warning a metric stream raises, in order (for finished runs and recorded streams: the full record
    behind a live monitor's bounded one)."""
    monitor = HealthMonitor(**options)
    warnings: list[HealthWarning] = []
    for record in records:
        warnings += monitor.update(record)
    return warnings
