"""Continuing a run after a disconnect: which checkpoint to load, and whether the new settings allow it.

A checkpoint holds weights, optimizer and sampler state made under the run's settings; resuming under
other settings would silently train a different run, so the saved ``run.yaml`` is compared first: a change in what the
checkpoint depends on is refused, naming each; any other change (max_steps to extend, other rows, a longer reward
timeout) is said, one warning line naming each, and kept in the new ``run.yaml`` (``chosen.resumes``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..log import logger
from .callbacks import RunCallback
from .config import config_to_dict
from .files import CHECKPOINT_RECORD, RUN_FILE, checkpoints, missing_parts, replace_file
from .record import RunRecord, read_run
from .settings import ConfigError

# What a checkpoint's weights, optimizer and sampler state depend on. Anything else (max_steps to extend,
# save/log frequency) may change between the first run and its resumption.
RESUME_FIXED_RUN = ("model", "backend", "lora_rank", "rewards", "chat_template_kwargs")
RESUME_FIXED_CONFIG = (
    "learning_rate", "lr_scheduler_type", "warmup_steps", "warmup_ratio", "weight_decay", "adam_beta1", "adam_beta2",
    "adam_epsilon", "max_grad_norm", "optim", "seed", "per_device_train_batch_size", "gradient_accumulation_steps",
    "num_generations", "generation_batch_size", "steps_per_generation", "max_completion_length", "temperature",
    "top_p", "beta", "loss_type", "scale_rewards", "reward_weights", "epsilon", "epsilon_high", "num_iterations",
)
PARTIAL_PREFIX = "partial-"  # a checkpoint resuming passed over, renamed out of the Trainer's rotation
# What differs between two records of one run without being a change: the folder as each call named it, and the
# TensorBoard folder transformers < 5 names after the time
NOT_CHANGES = ("output_dir", "logging_dir", "overwrite", "dataset")


class RecordInCheckpoints(RunCallback):
    """Keeps the run's ``run.yaml`` in each checkpoint as it is saved (``checkpoint-N/run_record.yaml``), so that a
    resume into a folder whose run.yaml was edited, cut short or removed since says what changed, by key
    (:func:`~.files.record_change`)."""

    def on_save(self, args, state, control, **kwargs):
        record = Path(args.output_dir) / RUN_FILE
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and record.is_file() and checkpoint.is_dir():
            replace_file(checkpoint / CHECKPOINT_RECORD, record.read_bytes())


def saved_whole(checkpoint: Path) -> bool:
    """Whether ``checkpoint`` holds everything resuming needs: weights, optimizer, scheduler, trainer state."""
    return not missing_parts(checkpoint)


def finished_at(checkpoint: Path, max_steps: int) -> int | None:
    """The step ``checkpoint`` was saved at when the run had trained all of ``max_steps`` there, else None. Resumed
    from there, the Trainer would train one step past max_steps (transformers 4.56 and 5 alike)."""
    step = json.loads((checkpoint / "trainer_state.json").read_text()).get("global_step", 0)
    return step if 0 < max_steps <= step else None


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The newest ``checkpoint-N`` in ``output_dir`` that was saved whole, or None; newer ones that are not whole are
    skipped (and left on disk), where the Trainer's own choice would crash on them or silently reset the optimizer."""
    for checkpoint in checkpoints(output_dir):
        missing = missing_parts(checkpoint)
        if not missing:
            return checkpoint
        logger.warning(f"skipping {checkpoint.name}: it has no {', no '.join(missing)} (its save was cut off, or a file "
                       "was removed)")
    return None


def _as_recorded(record: RunRecord) -> dict[str, Any]:
    """A record as one level of ``name -> value``: the settings (``load.*``, ``heldout.*``), the training rows
    (``rows``, ``rows_fingerprint``) and every GRPOConfig field, which holds what ``overrides`` set."""
    settings = record.settings.to_dict()
    settings.pop("overrides", None)
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        if key in ("load", "heldout") and isinstance(value, dict):
            flat.update({f"{key}.{name}": inner for name, inner in value.items()})
        else:
            flat[key] = value
    flat.update({key: record.chosen.get(key) for key in ("rows", "rows_fingerprint")})
    flat.update(record.grpo_config)
    return {key: value for key, value in flat.items() if key not in NOT_CHANGES}


def check_resume(saved_run_yaml: str | Path, config, run: RunRecord) -> list[str]:
    """Refuse to resume a run whose saved ``run.yaml`` differs in something the checkpoint depends on; return the other
    changes, each as ``name: old -> new`` (``rows_fingerprint``: other training rows; ``max_steps``: extended; ...).

    Raises ConfigError listing each changed field the checkpoint depends on as ``field: old -> new``.
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
    before = _as_recorded(saved_record)
    after = _as_recorded(RunRecord(run.settings, run.chosen, new_config))
    checked = {*RESUME_FIXED_RUN, *RESUME_FIXED_CONFIG, "load.lora_rank"}
    return [f"{key}: {before.get(key)!r} -> {after.get(key)!r}" for key in dict.fromkeys([*before, *after])
            if key not in checked and before.get(key) != after.get(key)]


def resume_checkpoint(output_dir: Path, config, run: RunRecord) -> Path | None:
    """The checkpoint to continue from, once the saved run record agrees with ``config`` and ``run``; the other changes
    since are said and added to ``run.chosen["resumes"]``, after those of earlier resumes.

    Raises ConfigError when a setting the checkpoint depends on changed; None (said) when ``output_dir`` holds no run
    yet (``run.settings.output_problems`` refuses a run's folder without a whole checkpoint), and the run starts from the
    beginning.
    """
    changes: list[str] = []
    if (output_dir / RUN_FILE).exists():
        changes = check_resume(output_dir / RUN_FILE, config, run)
        run.chosen["resumes"] = list(read_run(output_dir / RUN_FILE).chosen.get("resumes", []))
    checkpoint = latest_checkpoint(output_dir)
    if checkpoint is None:
        logger.warning(f"no complete checkpoint in {output_dir} to resume from; training from the start")
    else:
        logger.info(f"resuming from {checkpoint.name}, with its optimizer, scheduler and trainer state")
        run.chosen.setdefault("resumes", []).append({"checkpoint": checkpoint.name, "changed": changes})
        if changes:
            rows = " (other training rows: the steps from here train on them)" if any(
                change.startswith("rows_fingerprint:") for change in changes) else ""
            logger.warning(f"resuming {checkpoint.name} with changes since {RUN_FILE} (old -> new){rows}: {'; '.join(changes)}")
    for newer in checkpoints(output_dir):
        if checkpoint is not None and newer == checkpoint:
            break
        # Out of the Trainer's rotation, which keeps the newest save_total_limit checkpoint-N folders by step: left
        # there, a newer partial one would count among them and push out the whole one this run resumes from.
        kept = newer.with_name(PARTIAL_PREFIX + newer.name)
        while kept.exists():  # passed over before, in an earlier resume of this run
            kept = kept.with_name(kept.name + "-again")
        newer.rename(kept)
        logger.warning(f"kept the incomplete {newer.name} as {kept.name}, out of the checkpoints the Trainer rotates")
    return checkpoint
