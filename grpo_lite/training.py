"""train(): build TRL's GRPOTrainer from a model, a dataset and reward functions, run it, save it.

Everything a run produces lives in its output dir: ``run.yaml`` (the exact config), ``metrics.jsonl``
(one line per step), checkpoints, and the final adapter and tokenizer.
"""

from __future__ import annotations

import inspect
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from transformers import TrainerCallback

from .config import make_config, save_run_yaml
from .monitor.metrics import METRICS_FILE, MetricsLog

RUN_FILE = "run.yaml"


def reward_name(func: Callable) -> str:
    """The metric name TRL gives a reward function (``rewards/<name>/mean``)."""
    from trl.trainer.utils import get_callable_name

    return get_callable_name(func)


class RewardFailure(RuntimeError):
    """A reward function kept failing; training stopped after saving a checkpoint."""


class GuardedReward:
    """A reward function that cannot crash a run.

    An exception, or a result of the wrong length, is reported once with the function's name and
    traceback, and that batch scores ``None`` (TRL skips it) instead of killing hours of training.
    :class:`StopOnRewardFailure` ends the run, with a checkpoint, if the function keeps failing.
    """

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
            print(f"grpo-lite: reward function {self.__name__!r} failed; this batch scores None.\n{message}", file=sys.stderr)
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
    from trl.trainer.utils import is_async_callable

    if isinstance(func, GuardedReward):
        return func
    return AsyncGuardedReward(func) if is_async_callable(func) else GuardedReward(func)


class StopOnRewardFailure(TrainerCallback):
    """Save a checkpoint and stop when a reward function has failed ``patience`` calls in a row."""

    def __init__(self, rewards: Sequence[GuardedReward], patience: int = 3):
        self.rewards = rewards
        self.patience = patience
        self.failed: GuardedReward | None = None

    def on_step_end(self, args, state, control, **kwargs):
        for reward in self.rewards:
            if reward.consecutive_failures >= self.patience:
                self.failed = reward
                control.should_save = True
                control.should_training_stop = True
        return control


@dataclass
class TrainResult:
    """What :func:`train` returns: the trainer, where its files are, and its step records."""

    trainer: Any
    output_dir: Path
    rewards: list[GuardedReward] = field(default_factory=list)

    @property
    def metrics(self) -> list[dict[str, Any]]:
        from .monitor.metrics import read_metrics

        return read_metrics(self.output_dir / METRICS_FILE)

    @property
    def model(self):
        return self.trainer.model


def resolve_rewards(rewards: Any) -> list[Callable]:
    """Reward functions from functions, registry or preset names, or ``"module:function"`` import paths."""
    items = [rewards] if isinstance(rewards, (str,)) or callable(rewards) else list(rewards or [])
    if not items:
        raise ValueError("rewards is empty: pass at least one reward function (see the rewards package)")
    resolved: list[Callable] = []
    for item in items:
        if isinstance(item, str) and ":" in item:
            resolved.append(_import_reward(item))
        elif isinstance(item, str):
            from rewards import resolve

            resolved.extend(resolve(item))
        elif callable(item):
            resolved.append(item)
        else:
            raise TypeError(f"reward {item!r} is neither a function nor a reward name")
    for func in resolved:
        target = func.__call__ if not inspect.isfunction(func) and not inspect.ismethod(func) else func
        try:
            params = inspect.signature(target).parameters.values()
        except (TypeError, ValueError):
            continue
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            raise TypeError(
                f"reward function {reward_name(func)!r} must accept **kwargs: TRL passes every dataset column "
                "and extra arguments (trainer_state, log_metric, ...) as keywords"
            )
    return resolved


def _import_reward(path: str) -> Callable:
    import importlib

    module_name, _, attribute = path.partition(":")
    try:
        func = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"reward {path!r}: cannot import {attribute!r} from module {module_name!r} ({error})") from error
    if not callable(func):
        raise TypeError(f"reward {path!r} is not callable")
    return func


def _is_main_process() -> bool:
    """True outside multi-process launches and on rank 0 inside them (accelerate / torchrun set RANK)."""
    import os

    return int(os.environ.get("RANK", "0")) == 0


def _model_name(model) -> str:
    config = getattr(model, "config", None)
    return str(getattr(config, "_name_or_path", "") or type(model).__name__)


def train(
    model,
    tokenizer,
    dataset,
    rewards: Any,
    *,
    preset: str = "auto",
    output_dir: str | Path = "outputs/grpo-lite",
    reward_weights: Sequence[float] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
    resume: bool = False,
    **overrides: Any,
) -> TrainResult:
    """GRPO-train ``model`` on ``dataset`` with ``rewards``; returns a :class:`TrainResult`.

    ``dataset`` needs a ``prompt`` column (see :func:`grpo_lite.prepare_dataset`); its other columns reach
    the reward functions. ``rewards`` are reward functions or registry names. ``overrides`` are
    ``trl.GRPOConfig`` fields (``max_steps=50``, ``num_generations=4``, ...), checked before training starts.
    """
    output_dir = Path(output_dir)
    if reward_weights is not None:
        overrides["reward_weights"] = list(reward_weights)
    config = make_config(preset, output_dir=output_dir, **overrides)
    funcs = resolve_rewards(rewards)
    if "prompt" not in dataset.column_names:
        raise ValueError(
            f"the dataset has no 'prompt' column (columns: {dataset.column_names}); build it with "
            "grpo_lite.prepare_dataset(rows, question=..., answer=...)"
        )
    if config.reward_weights is not None and len(config.reward_weights) != len(funcs):
        raise ValueError(f"reward_weights has {len(config.reward_weights)} values for {len(funcs)} reward functions")

    from .trl_compat import enable_cpu_logprobs

    enable_cpu_logprobs()
    from trl import GRPOTrainer

    guarded = [guard(f) for f in funcs]
    backend = getattr(model, "grpo_lite_backend", None)
    if _is_main_process():
        save_run_yaml(
            output_dir / RUN_FILE,
            config,
            model=_model_name(model),
            backend=getattr(backend, "name", None),
            rewards=[g.__name__ for g in guarded],
            preset=preset,
            overrides=overrides,
        )
    stopper = StopOnRewardFailure(guarded)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=guarded,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[MetricsLog(output_dir), stopper, *callbacks],
    )
    trainer.train(resume_from_checkpoint=True if resume else None)
    trainer.save_model(str(output_dir))  # Trainer writes from the main process only
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(str(output_dir))
        print(f"grpo-lite: saved the adapter and tokenizer to {output_dir}")
    if stopper.failed is not None:
        raise RewardFailure(
            f"reward function {stopper.failed.__name__!r} failed {stopper.patience} calls in a row; training "
            f"stopped at step {trainer.state.global_step} and a checkpoint was saved in {output_dir}. "
            f"Last error:\n{stopper.failed.last_error}"
        )
    return TrainResult(trainer=trainer, output_dir=output_dir, rewards=guarded)
