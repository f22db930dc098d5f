"""Run settings -> a checked ``trl.GRPOConfig``, and a ``run.yaml``'s config back into one."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ..machine import stack
from .settings import ConfigError, grpo_config_fields, resolve_options


def make_config(preset: str = "auto", *, output_dir: str | Path = "outputs/grpo-lite", **overrides: Any):
    """A validated ``trl.GRPOConfig`` from a preset (``"auto"`` picks one for this machine) and overrides."""
    from trl import GRPOConfig

    from ..machine.notebook import one_gpu_per_process

    # transformers' TrainingArguments fills dict options in place (4.56.2's fsdp_config gains min_num_params, xla, ...):
    # GRPOConfig gets copies, so the settings given, and the run.yaml that records them, keep what was written
    options = copy.deepcopy(resolve_options(preset, **overrides))
    try:
        config = GRPOConfig(output_dir=str(output_dir), **options)
    except Exception as error:  # TRL's and transformers' own checks, or what they import for an option (deepspeed)
        culprits = [key for key in overrides if key in options and _builds(GRPOConfig, output_dir, options, key)]
        if not culprits and not isinstance(error, ValueError):
            raise  # not the user's options: grpo-lite's bug, or the machine's
        named = ", ".join(f"{key}={options[key]!r}" for key in culprits) or "the options"
        raise ConfigError(f"GRPOConfig rejected {named}: {type(error).__name__}: {' '.join(str(error).split())}") from error
    return one_gpu_per_process(config)


def _builds(config_class, output_dir, options: dict[str, Any], without: str) -> bool:
    """Whether the GRPOConfig builds with ``without`` left at its default: then it is what the config refused."""
    try:
        config_class(output_dir=str(output_dir), **copy.deepcopy({key: value for key, value in options.items() if key != without}))
    except Exception:  # still refused without it
        return False
    return True


def config_to_dict(config) -> dict[str, Any]:
    """Every init field of a GRPOConfig as plain YAML-friendly values; of a renamed field, the name the installed
    release reads only (its old name mirrors it: ``RENAMED_FIELDS`` in grpo_lite/machine/stack.py)."""
    fields = grpo_config_fields()
    return {k: v for k, v in config.to_dict().items() if k in fields and stack.field_name(k) == k}


def config_from_dict(options: dict[str, Any]):
    """The GRPOConfig a :func:`config_to_dict` record describes, a renamed field read under the installed release's
    name whichever release wrote it (where a record holds both, that name's value, as transformers takes it)."""
    from trl import GRPOConfig

    fields = grpo_config_fields()
    read = {k: v for k, v in options.items() if k in fields and stack.field_name(k) == k}
    read.update({stack.field_name(k): v for k, v in options.items() if stack.field_name(k) not in {k, *read}})
    options = copy.deepcopy(read)  # as make_config: left as they were
    if options.get("generation_batch_size") is not None:
        # GRPOConfig derives steps_per_generation from generation_batch_size and refuses both at once
        options.pop("steps_per_generation", None)
    if options.get("loss_type") == "dapo":
        # The default of TRL and Unsloth alike. Passed explicitly, Unsloth's GRPOConfig applies the DAPO paper's
        # settings (epsilon_high 0.28, mask_truncated_completions) and warns about beta (unsloth/models/rl.py);
        # left out, the recorded epsilon_high and mask_truncated_completions come back as they were.
        options.pop("loss_type")
    return GRPOConfig(**options)
