"""How a reward function is called and what it must return: TRL's GRPOTrainer convention, kept in one place.

TRL calls every reward as ``f(prompts=, completions=, completion_ids=, **columns, trainer_state=,
log_extra=, log_metric=)`` and awaits ``async`` ones (trl/trainer/grpo_trainer.py, ``_calculate_rewards``).
The reward lab, and through it ``preview``, ``rescore_run`` and ``grpo-lite score``, call rewards here the
same way, so a function scores the same in each; training checks the returned scores with the same gate.

TRL hands every reward the same lists, and keeps them for its completions table: a reward that edits what it is given
(``completions[0][0]["content"] = ...``, ``answer.clear()``) would change what the next reward scores and what the run
logs. So each call gets its own copy (:func:`reward_arguments`), here and in training's reward guard
(grpo_lite/guards/user_code.py). A reward whose required parameter names no column is refused before it runs
(:func:`missing_columns`).

>>> async def shout(completions, **kwargs):
...     return [float(c.isupper()) for c in completions]
>>> call_reward(shout, prompts=["p", "p"], completions=["HI", "hi"], completion_ids=[[1], [2]])
[1.0, 0.0]
>>> read_scores([1.0, float("nan")], 2)[1]
[ScoreViolation(kind='not_a_number', message='returned nan for completion 1; return a finite float, or None for a completion it does not score', row=1)]
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import functools
import inspect
import math
import numbers
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .combine import reward_name
from .errors import RewardError

# What TRL passes every reward besides the dataset's columns: the batch, and the trainer's objects
BATCH_ARGUMENTS = ("prompts", "completions", "completion_ids")
TRAINER_OBJECTS = ("trainer_state", "log_extra", "log_metric")
# Passed as they are, not copied: a reward logs through the trainer's objects and TRL reads what it logged; an
# environment (TRL's environment_factory) keeps its state from call to call
SHARED_ARGUMENTS = (*TRAINER_OBJECTS, "environments")
# Dataset columns TRL keeps from rewards (trl/trainer/grpo_trainer.py, _calculate_rewards): they come as the batch
COLUMNS_NOT_PASSED = ("prompt", "completion", "completion_ids")
_IMMUTABLE = frozenset({str, bytes, int, float, complex, bool, type(None)})


def is_async_reward(func: Callable) -> bool:
    """Whether calling ``func`` returns a coroutine: ``async def`` functions, partials of them and callable
    objects with an ``async def __call__`` (the forms of trl.trainer.utils.is_async_callable)."""
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or (callable(func) and inspect.iscoroutinefunction(func.__call__))


def run_coroutine(coroutine) -> Any:
    """A coroutine's result: on a new event loop, in a thread of its own when this one already runs a loop
    (a notebook's kernel does)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="grpo-lite async reward") as pool:
        return pool.submit(asyncio.run, coroutine).result()


def private_copy(value: Any) -> Any:
    """``value`` copied so that the copy shares nothing mutable with it: lists, tuples and dicts (what a dataset's rows
    and chat messages are made of) rebuilt, their strings and numbers shared, anything else deep-copied.

    Measured on 2 busy CPU cores: a batch of 16 chat completions with their prompts, three columns and 16 x 512 token
    ids copies in 0.6-1.5 ms (``copy.deepcopy``: 5-7 ms, most of it the token ids), 256 completions (768 messages) with
    their columns in about 4 ms: a reward call's copy costs milliseconds against the seconds of the step it scores.

    >>> messages = [{"role": "user", "content": "2+2?"}]
    >>> copied = private_copy(messages)
    >>> copied[0]["content"] = "edited"
    >>> messages
    [{'role': 'user', 'content': '2+2?'}]
    """
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if kind is list or kind is tuple:
        return kind(value if set(map(type, value)) <= _IMMUTABLE else map(private_copy, value))
    if kind is dict:
        return {key: item if type(item) in _IMMUTABLE else private_copy(item) for key, item in value.items()}
    return copy.deepcopy(value)


def reward_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """A reward's own copy of the keywords it is called with: what it edits reaches no other reward and no log. The
    trainer's live objects (:data:`SHARED_ARGUMENTS`) are passed as they are."""
    return {name: value if name in SHARED_ARGUMENTS else private_copy(value) for name, value in arguments.items()}


def call_reward(func: Callable, *, prompts: list, completions: list, completion_ids: list, **kwargs: Any) -> Any:
    """``func``'s return value, called with TRL's keywords (``kwargs``: the dataset's other columns, one value
    per completion, and ``trainer_state``, ``log_extra``, ``log_metric``), each a copy of its own
    (:func:`reward_arguments`); ``async`` functions are awaited."""
    result = func(**reward_arguments(dict(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)))
    return run_coroutine(result) if is_async_reward(func) else result


def missing_columns(func: Callable, columns: Iterable[str]) -> list[str]:
    """The parameters ``func`` requires (no default) that neither TRL nor the dataset's ``columns`` give it: each is a
    column the data lacks, and every call would raise ``TypeError``.

    >>> def accuracy(completions, solution, **kwargs): ...
    >>> missing_columns(accuracy, ["prompt", "answer"]), missing_columns(accuracy, ["prompt", "solution"])
    (['solution'], [])
    """
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # builtins and C callables: nothing to read
        return []
    given = {*BATCH_ARGUMENTS, *TRAINER_OBJECTS, *(set(columns) - set(COLUMNS_NOT_PASSED))}
    return [p.name for p in parameters if p.default is inspect.Parameter.empty and p.name not in given
            and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]


def check_columns(funcs: Sequence[Callable], columns: Sequence[str]) -> None:
    """Refuse rewards that require a column the dataset lacks (:func:`missing_columns`), before anything runs: the
    :class:`RewardError` names each reward, the columns it needs and the dataset's columns."""
    lacking = [(reward_name(func), missing) for func in funcs if (missing := missing_columns(func, columns))]
    if lacking:
        needs = "; ".join(f"reward {name!r} needs column{'s' * (len(missing) > 1)} {', '.join(map(repr, missing))}"
                          for name, missing in lacking)
        raise RewardError(f"{needs}, which the dataset lacks (its columns: {', '.join(columns)}): add the column to the "
                          "data (prepare_dataset keeps every column of the rows), give the parameter a default, or "
                          "drop the reward")


def as_trl_completion(prompt: Any, text: str) -> Any:
    """A completion as GRPOTrainer hands it to rewards: an assistant message in a list for a chat prompt
    (its conversational format), the text itself for a plain-text prompt.

    >>> as_trl_completion([{"role": "user", "content": "2+2?"}], "4")
    [{'role': 'assistant', 'content': '4'}]
    >>> as_trl_completion("2+2?", "4")
    '4'
    """
    return [{"role": "assistant", "content": text}] if isinstance(prompt, (list, tuple)) else text


@dataclass(frozen=True)
class ScoreViolation:
    """Why a reward's return value is not scores TRL can use: ``kind`` is ``wrong_length`` (for the whole call)
    or ``not_a_number`` (for completion ``row``)."""

    kind: str
    message: str
    row: int | None = None


def read_scores(value: Any, n: int) -> tuple[list, list[ScoreViolation]]:
    """A reward's return value as TRL reads it, and what is wrong with it as the scores of ``n`` completions.

    TRL takes any sequence of numbers or None, one per completion (it iterates over the value: a list, a tuple,
    a numpy array, a torch tensor, a generator); the scores come back as a list of floats and None. NaN is
    refused: TRL would read it as None, so a NaN the function computed (0/0, a mean of nothing) would silently
    drop its completion.

    >>> import numpy as np
    >>> read_scores(np.array([1.0, 0.5]), 2)
    ([1.0, 0.5], [])
    >>> read_scores((s for s in [1, None]), 2)
    ([1.0, None], [])
    >>> read_scores("1.0", 1)[1][0].message
    'returned a str for 1 completions; return one float (or None) per completion'
    """
    scores = _as_list(value)
    if scores is None or len(scores) != n:
        got = f"{len(scores)} scores" if scores is not None else f"a {type(value).__name__}"
        return [], [ScoreViolation("wrong_length", f"returned {got} for {n} completions; return one float (or None) per completion")]
    violations = [
        ScoreViolation("not_a_number", f"returned {score!r} for completion {i}; return a finite float, or None for a "
                       "completion it does not score", i)
        for i, score in enumerate(scores)
        if score is not None and not (isinstance(score, numbers.Real) and math.isfinite(score))
    ]
    bad = {v.row for v in violations}
    return [score if score is None or i in bad else float(score) for i, score in enumerate(scores)], violations


def _as_list(value: Any) -> list | None:
    """The items of a one-dimensional sequence or iterable, numpy and torch scalars as Python numbers; None for
    what TRL cannot take as scores (one number, a string, a mapping, a 2-D array)."""
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable) or getattr(value, "ndim", 1) != 1:
        return None
    return [item.item() if getattr(item, "ndim", None) == 0 and hasattr(item, "item") else item for item in value]
