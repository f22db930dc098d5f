"""Reward functions that cannot kill a long run, and the stop that ends one whose reward keeps failing.

A reward that raises, or returns the wrong number of scores, is reported once with its name and
traceback, and that batch scores ``None`` (TRL skips it) instead of losing hours of training. If it keeps
failing, :class:`RewardFailureStop` stops the run with a checkpoint and ``train`` raises
:class:`RewardFailure` naming it.
"""

from __future__ import annotations

import traceback
from typing import Any, Callable, Sequence

from transformers import TrainerCallback

from rewards import reward_name

from .log import logger
from .stopping import StopSwitch


class RewardFailure(RuntimeError):
    """A reward function kept failing; training stopped after saving a checkpoint."""


class GuardedReward:
    """``func`` called as TRL calls it, with failures turned into ``None`` scores and counted."""

    def __init__(self, func: Callable):
        self.func = func
        self.__name__ = reward_name(func)
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

    def _checked(self, scores: Any, n: int) -> list[float | None]:
        if not isinstance(scores, (list, tuple)) or len(scores) != n:
            got = f"{len(scores)} values" if isinstance(scores, (list, tuple)) else type(scores).__name__
            return self._failed(f"it returned {got} for {n} completions; return one float (or None) per completion", n)
        self.consecutive_failures = 0
        return list(scores)

    def __call__(self, *args, completions=(), **kwargs):
        self.calls += 1
        try:
            scores = self.func(*args, completions=completions, **kwargs)
        except Exception:
            return self._failed(traceback.format_exc(), len(completions))
        return self._checked(scores, len(completions))


class AsyncGuardedReward(GuardedReward):
    """:class:`GuardedReward` for ``async def`` reward functions (TRL awaits them concurrently)."""

    async def __call__(self, *args, completions=(), **kwargs):
        self.calls += 1
        try:
            scores = await self.func(*args, completions=completions, **kwargs)
        except Exception:
            return self._failed(traceback.format_exc(), len(completions))
        return self._checked(scores, len(completions))


def guard(func: Callable) -> GuardedReward:
    """``func`` wrapped so that its failures score ``None``; async functions stay async."""
    from trl.trainer.utils import is_async_callable

    if isinstance(func, GuardedReward):
        return func
    return AsyncGuardedReward(func) if is_async_callable(func) else GuardedReward(func)


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
