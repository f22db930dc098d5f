"""Combining rewards: sums, weights that map onto TRL's ``reward_weights``, and adaptive weights.

Prefer passing several reward functions to the trainer over summing them into one: TRL then logs each
one's mean and std (``rewards/<name>/mean``), which is how a user sees which part of the reward moves.
:class:`RewardSet` keeps that and carries the weights; :class:`Combined` is for a single named total.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from .errors import RewardError


def reward_name(func: Callable) -> str:
    """The name TRL logs a reward under (``rewards/<name>/mean``): a function's ``__name__``, the wrapped
    function's for a ``functools.partial``, the class name for a callable object without ``__name__``
    (what ``trl.trainer.utils.get_callable_name`` returns).

    >>> reward_name(functools.partial(reward_name)), reward_name(Weighted(len, 2.0))
    ('reward_name', 'len')
    """
    while isinstance(func, functools.partial):
        func = func.func
    return getattr(func, "__name__", type(func).__name__)


def distinct_names(funcs: Sequence[Callable]) -> list[str]:
    """The name each reward is logged under: its :func:`reward_name`, and for the second and later of one name (two
    lambdas, two partials of one function) that name with ``_2``, ``_3``, ..., so that each keeps a curve of its own.

    >>> distinct_names([len, lambda completions, **kw: [], lambda completions, **kw: [], functools.partial(len)])
    ['len', '<lambda>', '<lambda>_2', 'len_2']
    """
    return distinct([reward_name(func) for func in funcs])


def distinct(names: Sequence[str]) -> list[str]:
    """``names`` with the second and later of each numbered on (``_2``, ``_3``, ...), past any name already taken."""
    told: list[str] = []
    for name in names:
        if name in told:
            number = 2
            while f"{name}_{number}" in told or f"{name}_{number}" in names:
                number += 1
            name = f"{name}_{number}"
        told.append(name)
    return told


def name_clashes(funcs: Sequence[Callable], names: Sequence[str]) -> str | None:
    """One line saying which rewards of one name :func:`distinct_names` told apart, and how; None when none shared one."""
    renamed = [(reward_name(func), name) for func, name in zip(funcs, names) if name != reward_name(func)]
    if not renamed:
        return None
    shared = list(dict.fromkeys(old for old, _ in renamed))
    told = ", ".join(f"{old!r} as {', '.join([old] + [new for o, new in renamed if o == old])}" for old in shared)
    return f"rewards of one name are logged apart (rewards/<name>/mean): {told}; give them names of their own (def, or __name__)"


def weighted_total(scores: Sequence[float | None], weights: Sequence[float]) -> float | None:
    """A completion's reward as GRPOTrainer sums it: each score present times its weight (``None`` when no
    function scored it; TRL's nansum over ``reward_weights``)."""
    present = [(float(s), float(w)) for s, w in zip(scores, weights) if s is not None]
    return round(sum(s * w for s, w in present), 6) if present else None


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
            raise RewardError("Combined needs at least one reward function")
        self.parts = parts
        self.__name__ = name
        self.runs_code = any(getattr(part, "runs_code", False) for part in parts)

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
        return reward_name(self.func)

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
            raise RewardError("RewardSet needs at least one reward function")
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
        return "RewardSet(" + ", ".join(f"{reward_name(i.func)}x{i.weight:g}" for i in self.items) + ")"


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
        self.__name__ = reward_name(func)
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

