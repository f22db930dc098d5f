"""Curriculum training: several GRPO runs in a row on the same LoRA weights, e.g. format first, then correctness.

Each stage is an ordinary :func:`grpo_lite.train` run in its own folder (``<output_dir>/<i>-<name>``) with its
own rewards and settings; without an ``output_dir`` the plan gets a fresh ``outputs/<model>-<n>``. A folder holding
an earlier plan (stage folders that are runs) is refused before the first stage starts, unless ``resume=True`` or
``overwrite=True`` is among the common settings; a folder holding anything else is refused either way. The stages'
step records are also joined into ``<output_dir>/metrics.jsonl`` with steps numbered on from the previous stage and a
``stage`` field, so one history shows the whole curriculum.
A stage that ends early (the Stop button, Ctrl-C, a reward that keeps failing) ends the plan there, with that
stage's checkpoint: the later stages do not start.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewards import resolve_rewards
from rewards.combine import reward_name

from ..log import logger
from ..monitor.metrics import read_metrics
from ..run.files import METRICS_FILE, fresh_run_dir, run_name, say_fresh_run_dir, write_jsonl
from ..run.settings import ConfigError, output_problems
from ..shapes import Whole, problems
from .trainer import TrainResult, model_name, train


class Stage:
    """One stage: its rewards, how many steps, and any ``train`` / GRPOConfig overrides for it alone.

    >>> Stage(rewards="soft_xml_format_reward", max_steps=50, name="format")
    Stage(rewards='soft_xml_format_reward', max_steps=50, name='format')
    >>> Stage(rewards="gsm8k", max_steps=250, learning_rate=5e-6)
    Stage(rewards='gsm8k', max_steps=250, name=None, learning_rate=5e-06)
    """

    def __init__(self, rewards: Any, max_steps: int, name: str | None = None, **overrides: Any):
        said = problems(Whole(low=1), max_steps, "max_steps", "a stage needs at least one step")
        if said:
            raise ConfigError(f"Stage({said[0]}")
        self.rewards = rewards
        self.max_steps = max_steps
        self.name = name
        self.overrides = overrides

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.overrides.items())
        return f"Stage(rewards={self.rewards!r}, max_steps={self.max_steps}, name={self.name!r}{extra})"


def _combine(stage_dirs: Sequence[Path], names: Sequence[str], path: Path) -> None:
    """Write the stages' records as one history: steps continue across stages, each record names its stage."""
    records, offset = [], 0
    for stage_dir, name in zip(stage_dirs, names):
        stage_records = read_metrics(stage_dir)
        records += [{**r, "step": r["step"] + offset, "stage": name, "stage_step": r["step"]} for r in stage_records]
        offset += max((r["step"] for r in stage_records), default=0)
    write_jsonl(path, records)


def train_stages(
    stages: Sequence[Stage],
    model,
    tokenizer,
    dataset,
    *,
    output_dir: str | Path | None = None,
    **common: Any,
) -> list[TrainResult]:
    """Run ``stages`` one after another on ``model``'s LoRA weights; returns the :class:`TrainResult` of each stage run.

    ``common`` are ``train`` arguments for every stage (``preset``, ``num_generations``, ...); a stage's own
    overrides win over them.
    """
    if not stages:
        raise ConfigError("train_stages: no stages; pass a list like [Stage(rewards=..., max_steps=...), ...]")
    fresh = output_dir is None
    output_dir = fresh_run_dir(run_name(model_name(model))) if fresh else Path(output_dir)
    names = [stage.name or f"stage{i}" for i, stage in enumerate(stages, start=1)]
    stage_dirs = [output_dir / f"{i}-{name}" for i, name in enumerate(names, start=1)]
    asked = dict(resume=common.get("resume") is True, overwrite=common.get("overwrite") is True)
    taken = output_problems(output_dir, **asked, owner="plan") + [
        problem for folder in stage_dirs for problem in output_problems(folder, **asked)]
    if taken:  # before the first stage trains: a later stage refused would leave the plan half done
        raise ConfigError("\n".join(f"train_stages: {problem}" for problem in taken))
    if fresh:
        say_fresh_run_dir(output_dir)
    results = []
    for stage, name, stage_dir in zip(stages, names, stage_dirs):
        funcs, _ = resolve_rewards(stage.rewards)
        logger.info(f"stage {name!r}: {stage.max_steps} steps with rewards {', '.join(map(reward_name, funcs))}")
        settings = {**common, **stage.overrides, "max_steps": stage.max_steps}
        result = train(model, tokenizer, dataset, stage.rewards, output_dir=stage_dir, **settings)
        model = result.model  # the same LoRA weights, now trained, go into the next stage
        results.append(result)
        _combine(stage_dirs[: len(results)], names, output_dir / METRICS_FILE)
        if result.stopped is not None:
            later = names[len(results):]
            if later:
                logger.info(f"stage {name!r} ended early ({result.stopped}): not running {', '.join(map(repr, later))}")
            break
    return results
