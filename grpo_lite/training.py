"""train(): build TRL's GRPOTrainer from a model, a dataset and reward functions, run it, save it.

Everything a run produces lives in its output dir: ``run.yaml`` (the exact config), ``metrics.jsonl``
(one line per step), checkpoints, and the final adapter and tokenizer.
"""

from __future__ import annotations

import inspect
import json
import signal
import sys
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from transformers import TrainerCallback

from .config import check_resume, make_config, save_run_yaml
from .monitor.invariants import InvariantChecks
from .monitor.metrics import METRICS_FILE, MetricsLog
from .monitor.samples import SampleLog

RUN_FILE = "run.yaml"
EVAL_FILE = "eval.json"


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


class GracefulInterrupt(TrainerCallback):
    """Ctrl-C (or a notebook's interrupt) ends training after the current step, saving a checkpoint;
    a second Ctrl-C aborts at once."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def _handle(self, signum, frame):
        if self.requested:
            signal.signal(signal.SIGINT, self._previous or signal.default_int_handler)
            raise KeyboardInterrupt
        self.requested = True
        print("\ngrpo-lite: stopping after this step and saving a checkpoint (Ctrl-C again to abort)", file=sys.stderr, flush=True)

    def on_train_begin(self, args, state, control, **kwargs):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)

    def on_step_end(self, args, state, control, **kwargs):
        if self.requested:
            control.should_save = True
            control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None


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
    evaluation: Any = None  # held-out reports before and after (grpo_lite.evaluation.Comparison) when asked

    @property
    def metrics(self) -> list[dict[str, Any]]:
        from .monitor.metrics import read_metrics

        return read_metrics(self.output_dir / METRICS_FILE)

    @property
    def model(self):
        return self.trainer.model


def resolve_rewards(rewards: Any) -> tuple[list[Callable], list[float] | None]:
    """Reward functions, and their weights when any were given with ``rewards.weighted`` or a
    ``RewardSet``, from functions, registry or preset names, or ``"module:function"`` import paths."""
    from rewards.combine import RewardSet, expand

    single = isinstance(rewards, (str, RewardSet)) or callable(rewards)
    items = [rewards] if single else list(rewards or [])
    if not items:
        raise ValueError("rewards is empty: pass at least one reward function (see the rewards package)")
    named: list[Any] = []
    for item in items:
        if isinstance(item, str) and ":" in item:
            named.append(_import_reward(item))
        elif isinstance(item, str):
            from rewards import resolve

            named.extend(resolve(item))
        elif callable(item) or isinstance(item, RewardSet):
            named.append(item)
        else:
            raise TypeError(f"reward {item!r} is neither a function nor a reward name")
    resolved, weights = expand(named)
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
    return resolved, weights


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


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The newest ``checkpoint-N`` in ``output_dir`` that was saved whole, or None.

    The Trainer writes ``trainer_state.json`` last, so a checkpoint without a readable one was cut off by a
    kill mid-save; it is skipped (and left on disk), where the Trainer's own choice would crash on it.
    """
    steps = sorted((int(p.name.split("-")[1]), p) for p in output_dir.glob("checkpoint-*") if p.name.split("-")[1].isdigit())
    for _, checkpoint in reversed(steps):
        try:
            json.loads((checkpoint / "trainer_state.json").read_text())
        except (OSError, ValueError):
            print(f"grpo-lite: skipping {checkpoint}: its save was cut off", file=sys.stderr)
            continue
        return checkpoint
    return None


def _lora_rank(model) -> int | None:
    """The LoRA rank of a PEFT model's active adapter (None without LoRA)."""
    peft_config = getattr(model, "peft_config", {}).get(getattr(model, "active_adapter", "default"))
    return getattr(peft_config, "r", None)


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
    dashboard: Any = True,
    heldout: Any = None,
    heldout_n: int | None = 200,
    **overrides: Any,
) -> TrainResult:
    """GRPO-train ``model`` on ``dataset`` with ``rewards``; returns a :class:`TrainResult`.

    ``dataset`` needs a ``prompt`` column (see :func:`grpo_lite.prepare_dataset`); its other columns reach
    the reward functions. ``rewards`` are reward functions or registry names. ``overrides`` are
    ``trl.GRPOConfig`` fields (``max_steps=50``, ``num_generations=4``, ...), checked before training starts.
    ``dashboard`` draws a :class:`~grpo_lite.LiveDashboard` (``True``: the notebook or terminal view that
    fits; a view name, ``"log"``...; a ``LiveDashboard`` of your own; ``False``: none). Ctrl-C stops after
    the current step, with a checkpoint. ``heldout`` (a ``prepare_dataset`` dataset with ``prompt`` and ``answer``,
    not trained on) is evaluated greedily on its first ``heldout_n`` rows before and after training: the
    reports, side by side, are printed, returned as ``result.evaluation`` and written to ``eval.json``.
    """
    output_dir = Path(output_dir)
    funcs, set_weights = resolve_rewards(rewards)
    if reward_weights is not None or set_weights is not None:
        overrides["reward_weights"] = list(reward_weights if reward_weights is not None else set_weights)
    config = make_config(preset, output_dir=output_dir, **overrides)
    if "prompt" not in dataset.column_names:
        raise ValueError(
            f"the dataset has no 'prompt' column (columns: {dataset.column_names}); build it with "
            "grpo_lite.prepare_dataset(rows, question=..., answer=...)"
        )
    missing = [c for c in ("prompt", "answer") if heldout is not None and c not in heldout.column_names]
    if missing:
        raise ValueError(f"heldout has no {missing[0]!r} column (columns: {heldout.column_names}); build it with "
                         "grpo_lite.prepare_dataset(rows, question=..., answer=...)")
    if config.reward_weights is not None and len(config.reward_weights) != len(funcs):
        raise ValueError(f"reward_weights has {len(config.reward_weights)} values for {len(funcs)} reward functions")

    from .trl_compat import enable_cpu_logprobs

    enable_cpu_logprobs()
    from trl import GRPOTrainer

    guarded = [guard(f) for f in funcs]
    backend = getattr(model, "grpo_lite_backend", None)
    run = dict(
        model=_model_name(model),
        backend=getattr(backend, "name", None),
        lora_rank=_lora_rank(model),
        rewards=[g.__name__ for g in guarded],
    )
    if resume and (output_dir / RUN_FILE).exists():
        check_resume(output_dir / RUN_FILE, config, **run)
    if _is_main_process():
        save_run_yaml(output_dir / RUN_FILE, config, **run, preset=preset, overrides=overrides)
    stopper = StopOnRewardFailure(guarded)
    watchers = [InvariantChecks(), MetricsLog(output_dir), SampleLog(output_dir), stopper, GracefulInterrupt(), *callbacks]
    if dashboard is True or isinstance(dashboard, str):
        from .monitor.dashboard import LiveDashboard

        dashboard = LiveDashboard(output_dir, view="auto" if dashboard is True else dashboard)
    if dashboard:
        watchers.append(dashboard)
    if "ref" in getattr(model, "peft_config", {}):
        # A previous GRPOTrainer left its frozen "ref" adapter on the model, and TRL refuses to add a second: drop
        # it, so TRL copies the adapter as it is now and this run's KL is measured from where it starts.
        model.delete_adapter("ref")
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=guarded,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=watchers,
    )
    for watcher in watchers:
        if hasattr(watcher, "attach"):
            watcher.attach(trainer)
    if heldout is not None:
        from .evaluation import evaluate

        held_out = dict(n=heldout_n, max_new_tokens=config.max_completion_length)
        before = evaluate(trainer.model, tokenizer, heldout, funcs, **held_out)
        print(f"grpo-lite: held-out before training ({before.n} rows): accuracy {before.accuracy:.1%}, "
              f"format rate {before.format_rate:.1%}", flush=True)
    checkpoint = latest_checkpoint(output_dir) if resume else None
    if resume and checkpoint is None:
        print(f"grpo-lite: no complete checkpoint in {output_dir} to resume from; training from the start", file=sys.stderr)
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    trainer.save_model(str(output_dir))  # Trainer writes from the main process only
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(str(output_dir))
        print(f"grpo-lite: saved the adapter and tokenizer to {output_dir}")
    evaluation = None
    if heldout is not None:
        from .evaluation import compare

        evaluation = compare(before, evaluate(trainer.model, tokenizer, heldout, funcs, **held_out))
        print(evaluation)
        if trainer.is_world_process_zero():
            report = {"before": evaluation.base.as_dict(), "after": evaluation.trained.as_dict()}
            (output_dir / EVAL_FILE).write_text(json.dumps(report, indent=2) + "\n")
    if stopper.failed is not None:
        raise RewardFailure(
            f"reward function {stopper.failed.__name__!r} failed {stopper.patience} calls in a row; training "
            f"stopped at step {trainer.state.global_step} and a checkpoint was saved in {output_dir}. "
            f"Last error:\n{stopper.failed.last_error}"
        )
    return TrainResult(trainer=trainer, output_dir=output_dir, rewards=guarded, evaluation=evaluation)
