"""Reward functions that cannot kill or hang a long run, and the stop that ends one whose reward keeps failing.

A reward that raises, returns what is not scores (the lab's gate, :func:`rewards.calling.read_scores`:
the wrong number of them, NaN, inf), or runs past its time limit (``reward_timeout``, :data:`REWARD_TIMEOUT`
by default), is reported once with its name and traceback (for a hang: the stack where it was stuck), and
that batch scores ``None`` (TRL skips it) instead of losing hours of training. If it keeps failing,
:class:`RewardFailureStop` stops the run with a checkpoint and ``train`` raises :class:`RewardFailure`
naming it.

Each call gets its own copy of what TRL hands it (:func:`rewards.calling.reward_arguments`): TRL passes every reward the
same lists and logs them afterwards, so an edit one reward makes to them would reach the next reward and samples.jsonl.

Each reward runs where TRL runs it (see :mod:`grpo_lite.guards.time_limit`): a plain function on the training
thread, stopped there when it runs past its limit; off the main thread it runs without a limit, and
:func:`unlimited` says which and why.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from typing import Any

from transformers import TrainerCallback

from rewards.calling import is_async_reward, private_copy, read_scores, reward_arguments, run_coroutine
from rewards.combine import reward_name

from ..errors import RunFault
from ..log import logger
from ..machine import stack
from ..run.settings import REWARD_TIMEOUT
from ..run.stopping import StopSwitch
from .time_limit import TimedOut, TimeLimit, unavailable_reason


class RewardFailure(RunFault, RuntimeError):
    """A reward function kept failing; training stopped after saving a checkpoint."""


class GuardedReward:
    """``func`` called as TRL calls it, each call for at most ``timeout`` seconds (None: no limit), with
    failures and hangs turned into ``None`` scores and counted."""

    def __init__(self, func: Callable, timeout: float | None = REWARD_TIMEOUT, name: str | None = None):
        self.func = func
        self.__name__ = name or reward_name(func)  # what TRL logs it under (trl.trainer.utils.get_callable_name)
        self.timeout = timeout
        # async rewards run on an event loop of their own, which any thread can time
        self.unlimited_reason = None if timeout is None or is_async_reward(func) else unavailable_reason()
        limited = timeout is not None and self.unlimited_reason is None
        self.limit = TimeLimit(timeout, name=f"reward {self.__name__}") if limited else None
        self.calls = 0
        self.failures = 0
        self.consecutive_failures = 0
        self.last_error: str | None = None

    def _failed(self, message: str, n: int) -> list[None]:
        self.failures += 1
        self.consecutive_failures += 1
        if self.failures == 1 or message != self.last_error:
            logger.warning(f"reward function {self.__name__!r} failed; this batch scores None.\n{message}")
        self.last_error = message
        return [None] * n

    _FATE = "It was stopped there."

    def _hung(self, hang: TimedOut, n: int) -> list[None]:
        return self._failed(
            f"it did not return within reward_timeout={hang.seconds:g} s. It was here:\n{hang.stack}{self._FATE} "
            "Fix the function (a timeout for its network calls, no input()), or raise reward_timeout "
            "(train(..., reward_timeout=...), None for no limit) if scoring a batch really takes this long.", n)

    def _checked(self, value: Any, n: int) -> list[float | None]:
        scores, violations = read_scores(value, n)
        if violations:
            return self._failed(f"it {violations[0].message}", n)
        self.consecutive_failures = 0
        return scores

    def __call__(self, *args, completions=(), **kwargs):
        self.calls += 1
        n = len(completions)  # before the call: the function may change its own copy
        args, kwargs = private_copy(args), reward_arguments({"completions": completions, **kwargs})
        try:
            if self.limit is None:
                scores = self.func(*args, **kwargs)
            else:
                scores = self.limit.call(self.func, *args, **kwargs)
        except TimedOut as hang:
            return self._hung(hang, n)
        except Exception:
            return self._failed(traceback.format_exc(), n)
        return self._checked(scores, n)


class AsyncGuardedReward(GuardedReward):
    """:class:`GuardedReward` for ``async def`` reward functions (TRL awaits them concurrently)."""

    _FATE = "Code that blocks its event loop cannot be stopped: it is left running there, on a loop of its own."

    async def __call__(self, *args, completions=(), **kwargs):
        self.calls += 1
        n = len(completions)  # before the call: the function may change its own copy
        args, kwargs = private_copy(args), reward_arguments({"completions": completions, **kwargs})
        try:
            if self.limit is None:
                scores = await self.func(*args, **kwargs)
            else:
                scores = await self.limit.call_async(self.func, *args, **kwargs)
        except TimedOut as hang:
            return self._hung(hang, n)
        except Exception:
            return self._failed(traceback.format_exc(), n)
        return self._checked(scores, n)


class AwaitedGuardedReward(AsyncGuardedReward):
    """:class:`AsyncGuardedReward` called plainly, for a TRL that awaits no callable object (``async_reward_objects``
    in grpo_lite/machine/stack.py): each call runs the function's coroutine to its end, one reward after another."""

    def __call__(self, *args, completions=(), **kwargs):
        return run_coroutine(super().__call__(*args, completions=completions, **kwargs))


def guard(func: Callable, timeout: float | None = REWARD_TIMEOUT, name: str | None = None) -> GuardedReward:
    """``func`` wrapped so that its failures and hangs score ``None``; async functions stay async where the installed
    TRL awaits the wrapper. ``name``: the one TRL logs it under (default: its own, :func:`rewards.combine.reward_name`)."""
    if isinstance(func, GuardedReward) and name in (None, func.__name__):
        return func
    func = func.func if isinstance(func, GuardedReward) else func
    if not is_async_reward(func):
        return GuardedReward(func, timeout, name)
    return AsyncGuardedReward(func, timeout, name) if stack.newer("async_reward_objects") else AwaitedGuardedReward(func, timeout, name)


def unlimited(rewards: Sequence[GuardedReward]) -> str | None:
    """One line naming the rewards that run without the time limit asked for, and why; None when there are none."""
    unlimited = [r for r in rewards if r.unlimited_reason is not None]
    if not unlimited:
        return None
    names = ", ".join(repr(r.__name__) for r in unlimited)
    return (f"reward_timeout does not apply to {names}: {unlimited[0].unlimited_reason}. "
            "They run as under plain TRL; a hang in one of them hangs the run.")


class RewardFailureStop(TrainerCallback):
    """Asks ``switch`` to stop when a reward function has failed ``patience`` calls in a row.

    List it before the switch: it checks at each step's end, and the switch acts at the same step's end.
    """

    def __init__(self, rewards: Sequence[GuardedReward], switch: StopSwitch, patience: int = 3):
        self.rewards = rewards
        self.switch = switch
        self.patience = patience
        self.failed: GuardedReward | None = None

    def on_step_end(self, args, state, control, **kwargs):
        for reward in self.rewards:
            if self.failed is None and reward.consecutive_failures >= self.patience:
                self.failed = reward
                self.switch.request(f"reward function {reward.__name__!r} failed {self.patience} calls in a row",
                                    error=self.error(state.global_step, args.output_dir))
        return control

    def error(self, step: int, output_dir) -> RewardFailure:
        """The exception ``train`` raises after saving, naming the function and its last error."""
        return RewardFailure(
            f"reward function {self.failed.__name__!r} failed {self.patience} calls in a row; training "
            f"stopped at step {step} and a checkpoint was saved in {output_dir}. Last error:\n{self.failed.last_error}"
        )
