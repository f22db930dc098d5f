"""How a reward function is called and what it must return: TRL's GRPOTrainer convention, kept in one place.

TRL calls every reward as ``f(prompts=, completions=, completion_ids=, **columns, trainer_state=,
log_extra=, log_metric=)`` and awaits ``async`` ones (trl/trainer/grpo_trainer.py, ``_calculate_rewards``).
The reward lab, and through it ``preview``, ``rescore_run`` and ``grpo-lite score``, call rewards here the
same way, so a function scores the same in each; training checks the returned scores with the same gate.

>>> async def shout(completions, **kwargs):
...     return [float(c.isupper()) for c in completions]
>>> call_reward(shout, prompts=["p", "p"], completions=["HI", "hi"], completion_ids=[[1], [2]])
[1.0, 0.0]
>>> score_violations([1.0, float("nan")], 2)
[ScoreViolation(kind='not_a_number', message='returned nan for completion 1; return a finite float, or None for a completion it does not score', row=1)]
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def is_async_reward(func: Callable) -> bool:
    """Whether calling ``func`` returns a coroutine: ``async def`` functions, partials of them and callable
    objects with an ``async def __call__`` (the forms of trl.trainer.utils.is_async_callable)."""
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or (callable(func) and inspect.iscoroutinefunction(func.__call__))


def _run(coroutine) -> Any:
    """A coroutine's result: on a new event loop, in a thread of its own when this one already runs a loop
    (a notebook's kernel does)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="grpo-lite async reward") as pool:
        return pool.submit(asyncio.run, coroutine).result()


def call_reward(func: Callable, *, prompts: list, completions: list, completion_ids: list, **kwargs: Any) -> Any:
    """``func``'s return value, called with TRL's keywords (``kwargs``: the dataset's other columns, one value
    per completion, and ``trainer_state``, ``log_extra``, ``log_metric``); ``async`` functions are awaited."""
    result = func(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
    return _run(result) if is_async_reward(func) else result


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


def score_violations(scores: Any, n: int) -> list[ScoreViolation]:
    """What is wrong with ``scores`` as the scores of ``n`` completions: one float (or None) per completion,
    finite. NaN is refused too: TRL would read it as None, so a NaN the function computed (0/0, a mean of
    nothing) would silently drop its completion."""
    if not isinstance(scores, (list, tuple)) or len(scores) != n:
        got = f"{len(scores)} scores" if isinstance(scores, (list, tuple)) else f"a {type(scores).__name__}"
        return [ScoreViolation("wrong_length", f"returned {got} for {n} completions; return one float (or None) per completion")]
    return [
        ScoreViolation("not_a_number", f"returned {score!r} for completion {i}; return a finite float, or None for a "
                       "completion it does not score", i)
        for i, score in enumerate(scores)
        if score is not None and not (isinstance(score, numbers.Real) and math.isfinite(score))
    ]
