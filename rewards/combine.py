"""Combining rewards: sums, weights that map onto TRL's ``reward_weights``, and adaptive weights.

Prefer passing several reward functions to the trainer over summing them into one: TRL then logs each
one's mean and std (``rewards/<name>/mean``), which is how a user sees which part of the reward moves.
:class:`RewardSet` keeps that and carries the weights; :class:`Combined` is for a single named total.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence


def _name(func: Callable) -> str:
    return getattr(func, "__name__", type(func).__name__)


class Combined:
    """One reward that is the sum of several; ``None`` where every part is ``None``.

    >>> from rewards.format import soft_xml_format_reward
    >>> from rewards.correctness import exact_match_reward
    >>> total = Combined(soft_xml_format_reward, exact_match_reward, name="math_total")
    >>> total(completions=["<reasoning>x</reasoning><answer>4</answer>"], answer=["4"])
    [2.5]
    """

    def __init__(self, *parts: Callable, name: str):
        if not parts:
            raise ValueError("Combined needs at least one reward function")
        self.parts = parts
        self.__name__ = name

    def __call__(self, prompts=None, completions=(), **kwargs) -> list[float | None]:
        columns = [part(prompts=prompts, completions=completions, **kwargs) for part in self.parts]
        totals: list[float | None] = []
        for scores in zip(*columns):
            present = [s for s in scores if s is not None]
            totals.append(round(sum(present), 6) if present else None)
        return totals


@dataclass(frozen=True)
class Weighted:
    """A reward with a weight. Called directly it returns weighted scores; in a :class:`RewardSet` the
    weight goes to TRL's ``reward_weights`` and the function is passed unchanged (so its metric stays
    unweighted and comparable)."""

    func: Callable
    weight: float

    @property
    def __name__(self) -> str:
        return _name(self.func)

    def __call__(self, prompts=None, completions=(), **kwargs) -> list[float | None]:
        scores = self.func(prompts=prompts, completions=completions, **kwargs)
        return [None if s is None else s * self.weight for s in scores]


def weighted(func: Callable, weight: float) -> Weighted:
    """``func`` with ``weight``: ``RewardSet(weighted(correctness, 2.0), format_reward)``."""
    return Weighted(func, float(weight))


class RewardSet:
    """Reward functions and their weights, ready for ``GRPOConfig(reward_weights=...)``.

    >>> from rewards.format import soft_xml_format_reward
    >>> from rewards.correctness import exact_match_reward
    >>> rs = RewardSet(weighted(exact_match_reward, 2.0), soft_xml_format_reward)
    >>> [f.__name__ for f in rs.funcs], rs.weights
    (['exact_match_reward', 'soft_xml_format_reward'], [2.0, 1.0])
    """

    def __init__(self, *rewards: Callable | Weighted):
        if not rewards:
            raise ValueError("RewardSet needs at least one reward function")
        self.items = [r if isinstance(r, Weighted) else Weighted(r, 1.0) for r in rewards]

    @property
    def funcs(self) -> list[Callable]:
        return [item.func for item in self.items]

    @property
    def weights(self) -> list[float]:
        return [item.weight for item in self.items]

    def __iter__(self) -> Iterator[Callable]:
        return iter(self.funcs)

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return "RewardSet(" + ", ".join(f"{_name(i.func)}x{i.weight:g}" for i in self.items) + ")"


class AdaptiveReward:
    """A reward whose weight adapts to how often the model succeeds at it.

    After each batch the success rate (share of scored completions at or above ``success_threshold``)
    moves the weight: x1.2 below 0.3 (make a hard reward louder), x0.9 above 0.8 (quiet a mastered one),
    kept within ``[min_weight, max_weight]``. Scores come back multiplied by the weight in force for
    that batch; the weight is logged as ``adaptive/<name>/weight`` when the trainer gives ``log_metric``.

    >>> from rewards.correctness import exact_match_reward
    >>> adaptive = AdaptiveReward(exact_match_reward, success_threshold=2.0)
    >>> adaptive(completions=["<answer>1</answer>"] * 4, answer=["2"] * 4), adaptive.weight
    ([0.0, 0.0, 0.0, 0.0], 1.2)
    """

    def __init__(
        self,
        func: Callable,
        *,
        initial_weight: float = 1.0,
        success_threshold: float = 1e-9,
        raise_below: float = 0.3,
        lower_above: float = 0.8,
        min_weight: float = 0.25,
        max_weight: float = 4.0,
    ):
        self.func = func
        self.weight = initial_weight
        self.success_threshold = success_threshold
        self.raise_below, self.lower_above = raise_below, lower_above
        self.min_weight, self.max_weight = min_weight, max_weight
        self.__name__ = _name(func)
        self.history: list[tuple[float, float]] = []  # (success rate, weight used) per call

    def __call__(self, prompts=None, completions=(), log_metric=None, **kwargs) -> list[float | None]:
        scores = self.func(prompts=prompts, completions=completions, **kwargs)
        used = self.weight
        scored = [s for s in scores if s is not None]
        if scored:
            rate = sum(s >= self.success_threshold for s in scored) / len(scored)
            self.history.append((rate, used))
            if rate < self.raise_below:
                self.weight = min(self.max_weight, self.weight * 1.2)
            elif rate > self.lower_above:
                self.weight = max(self.min_weight, self.weight * 0.9)
        if log_metric is not None:
            log_metric(f"adaptive/{self.__name__}/weight", used)
        return [None if s is None else round(s * used, 6) for s in scores]


def expand(rewards: Any) -> tuple[list[Callable], list[float] | None]:
    """Reward functions and (when any were weighted) their weights from functions, ``Weighted`` items
    and ``RewardSet``s."""
    items: Sequence = [rewards] if callable(rewards) and not isinstance(rewards, RewardSet) else list(rewards)
    funcs: list[Callable] = []
    weights: list[float] = []
    any_weight = False
    for item in items:
        for part in item.items if isinstance(item, RewardSet) else [item]:
            if isinstance(part, Weighted):
                funcs.append(part.func)
                weights.append(part.weight)
                any_weight = any_weight or part.weight != 1.0
            else:
                funcs.append(part)
                weights.append(1.0)
    return funcs, (weights if any_weight else None)
