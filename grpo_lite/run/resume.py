"""Continuing a run after a disconnect: which checkpoint to load, and whether the new settings allow it.

A checkpoint holds weights, optimizer and sampler state made under the run's settings; resuming under
other settings would silently train a different run, so the saved ``run.yaml`` is compared first.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..log import logger
from .config import config_to_dict
from .files import RUN_FILE
from .record import RunRecord, read_run
from .settings import ConfigError

# What a checkpoint's weights, optimizer and sampler state depend on. Anything else (max_steps to extend,
# save/log frequency) may change between the first run and its resumption.
RESUME_FIXED_RUN = ("model", "backend", "lora_rank", "rewards")
RESUME_FIXED_CONFIG = (
    "learning_rate", "lr_scheduler_type", "warmup_steps", "weight_decay", "adam_beta1", "adam_beta2",
    "adam_epsilon", "max_grad_norm", "optim", "seed", "per_device_train_batch_size", "gradient_accumulation_steps",
    "num_generations", "generation_batch_size", "steps_per_generation", "max_completion_length", "temperature",
    "top_p", "beta", "loss_type", "scale_rewards", "reward_weights", "epsilon", "epsilon_high", "num_iterations",
)


def saved_whole(checkpoint: Path) -> bool:
    """Whether a checkpoint's save finished: the Trainer writes ``trainer_state.json`` last, so a checkpoint
    without a readable one was cut off (by a kill or a full disk) mid-save."""
    try:
        json.loads((checkpoint / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return False
    return True


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The newest ``checkpoint-N`` in ``output_dir`` that was saved whole, or None.

    A checkpoint cut off mid-save is skipped (and left on disk), where the Trainer's own choice would crash on it.
    """
    steps = sorted((int(p.name.split("-")[1]), p) for p in output_dir.glob("checkpoint-*") if p.name.split("-")[1].isdigit())
    for _, checkpoint in reversed(steps):
        if saved_whole(checkpoint):
            return checkpoint
        logger.warning(f"skipping {checkpoint}: its save was cut off")
    return None


def check_resume(saved_run_yaml: str | Path, config, run: RunRecord) -> None:
    """Refuse to resume a run whose saved ``run.yaml`` differs in something the checkpoint depends on.

    Raises ConfigError listing each changed field as ``field: old -> new``.
    """
    saved_run_yaml = Path(saved_run_yaml)
    saved_record = read_run(saved_run_yaml)
    saved, new = saved_record.fixed(), run.fixed()
    saved_config, new_config = saved_record.grpo_config, config_to_dict(config)
    changed = [(key, saved[key], new[key]) for key in RESUME_FIXED_RUN if saved[key] is not None and saved[key] != new[key]]
    changed += [
        (key, saved_config.get(key), new_config.get(key))
        for key in RESUME_FIXED_CONFIG
        if key in saved_config and saved_config.get(key) != new_config.get(key)
    ]
    if changed:
        diff = "\n".join(f"  {key}: {old!r} -> {new!r}" for key, old, new in changed)
        raise ConfigError(
            f"cannot resume the run in {saved_run_yaml.parent}: its checkpoint was trained with other settings "
            f"(old from {saved_run_yaml.name} -> new):\n{diff}\n"
            "Use the saved settings to resume (max_steps may grow), or start a new run in another output_dir."
        )


def resume_checkpoint(output_dir: Path, config, run: RunRecord) -> Path | None:
    """The checkpoint to continue from, once the saved run record agrees with ``config`` and ``run``.

    Raises ConfigError when a setting the checkpoint depends on changed; None (said) when there is no
    complete checkpoint, and the run starts from the beginning.
    """
    if (output_dir / RUN_FILE).exists():
        check_resume(output_dir / RUN_FILE, config, run)
    checkpoint = latest_checkpoint(output_dir)
    if checkpoint is None:
        logger.warning(f"no complete checkpoint in {output_dir} to resume from; training from the start")
    return checkpoint
