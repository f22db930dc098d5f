"""Presets -> ``trl.GRPOConfig``, checked before any model is loaded; YAML round trip of a run's config.

Defaults follow the seed recipe (lr 5e-6, Adam betas 0.9/0.99, weight decay 0.1, warmup 0.1, cosine,
max_grad_norm 0.1, 8 generations, a log line every step) with one deliberate change: ``beta=0.04``.
TRL's default ``beta=0.0`` drops the reference model, so no KL is computed or logged, and KL is one of
the signals that tells a healthy run from a drifting one. Two Trainer defaults change for the faults of a
long run (docs/faults.md): a NaN loss is logged as NaN, and only the two newest checkpoints are kept.

Every field a run relies on is set here even where it is TRL's default: once Unsloth is imported, GRPOConfig is
Unsloth's generated class (unsloth/models/rl.py), whose defaults differ (gradient_accumulation_steps 2,
optim adamw_8bit, seed 3407, vllm_importance_sampling_correction False), so an unset field would train
differently on a GPU machine than in the tests.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
from pathlib import Path
from typing import Any

BASE = {
    "learning_rate": 5e-6,
    "adam_beta1": 0.9,
    "adam_beta2": 0.99,
    "weight_decay": 0.1,
    "warmup_steps": 0.1,  # transformers 5: a float below 1 is a ratio of the total steps
    "lr_scheduler_type": "cosine",
    "max_grad_norm": 0.1,
    "num_generations": 8,
    "beta": 0.04,
    "logging_steps": 1,
    "logging_nan_inf_filter": False,  # the Trainer's default logs a NaN loss as the average of earlier ones
    "save_steps": 100,
    "save_total_limit": 2,  # the newest checkpoint and the one before: a long run cannot fill a 20 GB disk
    "report_to": "none",
    # TRL's defaults, pinned against Unsloth's (module docstring)
    "gradient_accumulation_steps": 1,
    "optim": "adamw_torch_fused",
    "seed": 42,
    "vllm_importance_sampling_correction": True,
}

TRAINING_PRESETS: dict[str, dict[str, Any]] = {
    # Tiny models on a laptop CPU: tests, notebooks in smoke mode, the demo.
    "cpu-smoke": {
        "use_cpu": True,
        "bf16": False,
        "learning_rate": 1e-3,  # a random or tiny model needs large steps to move within a few steps
        "num_generations": 4,
        "per_device_train_batch_size": 4,
        "max_completion_length": 32,
        "max_steps": 10,
        "gradient_checkpointing": False,
        "save_steps": 5,
    },
    # Colab / Kaggle T4: no bf16 support, 16 GB.
    "t4-16gb": {
        "fp16": True,
        "bf16": False,
        "optim": "adamw_8bit",
        "per_device_train_batch_size": 8,
        "max_completion_length": 256,
        "gradient_checkpointing": True,
    },
    "l4-24gb": {
        "bf16": True,
        "optim": "adamw_8bit",
        "per_device_train_batch_size": 8,
        "max_completion_length": 512,
        "gradient_checkpointing": True,
    },
    "a100-80gb": {
        "bf16": True,
        "per_device_train_batch_size": 16,
        "num_generations": 16,
        "max_completion_length": 1024,
        "gradient_checkpointing": True,
    },
}

_REMOVED_FIELDS = {
    "max_prompt_length": "TRL removed it; drop long prompts with prepare_dataset(..., tokenizer=tok, max_prompt_tokens=N)",
    "max_new_tokens": "GRPOConfig calls it max_completion_length",
    "warmup_ratio": "transformers 5 takes a warmup ratio as warmup_steps=<float below 1>, e.g. warmup_steps=0.1",
}


class ConfigError(ValueError):
    """An invalid training configuration; the message says which option to change and how."""


def auto_preset() -> str:
    """The preset for the machine this runs on, judged by its GPU (or its lack of one)."""
    import torch

    if not torch.cuda.is_available():
        return "cpu-smoke"
    from .device import supports_bf16

    props = torch.cuda.get_device_properties(0)
    memory_gb = props.total_memory / 2**30
    if not supports_bf16():  # a T4 (compute capability 7.5): fp16, whatever emulation torch counts
        return "t4-16gb"
    return "a100-80gb" if memory_gb >= 60 else "l4-24gb"


def preset_name(preset: str) -> str:
    """The preset a run trains with: ``"auto"`` is the one :func:`auto_preset` picks for this machine."""
    return auto_preset() if preset == "auto" else preset


def grpo_config_fields() -> set[str]:
    from trl import GRPOConfig

    return {f.name for f in dataclasses.fields(GRPOConfig) if f.init}


def resolve_options(preset: str = "auto", **overrides: Any) -> dict[str, Any]:
    """The GRPOConfig keyword arguments for ``preset`` plus ``overrides``, validated.

    Raises :class:`ConfigError` naming the option to change; nothing heavy is loaded.
    """
    name = preset_name(preset)
    if name not in TRAINING_PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; choose one of {['auto', *TRAINING_PRESETS]}")
    fields = grpo_config_fields()
    for key in overrides:
        if key in _REMOVED_FIELDS:
            raise ConfigError(f"{key}: {_REMOVED_FIELDS[key]}")
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(f"{key!r} is not a GRPOConfig option{hint}")
    options = {**BASE, **TRAINING_PRESETS[name], **overrides}
    _check(options)
    return options


def _check(o: dict[str, Any]) -> None:
    g = o.get("num_generations", 8)
    if not isinstance(g, int) or g < 2:
        raise ConfigError(f"num_generations={g!r}: GRPO compares completions within a group, so use 2 or more (4-16 is usual)")
    if "max_steps" in o and o["max_steps"] is None:
        raise ConfigError("max_steps=None is not valid: use -1 (train for num_train_epochs) or a positive number of steps")
    beta = o.get("beta", 0.0)
    if beta is None or beta < 0:
        raise ConfigError(f"beta={beta!r}: the KL coefficient must be >= 0 (0.04 is this toolkit's default, 0 disables KL)")
    if o.get("learning_rate", 1.0) <= 0:
        raise ConfigError(f"learning_rate={o['learning_rate']!r} must be positive (5e-6 is a safe start)")
    if o.get("max_completion_length", 1) <= 0:
        raise ConfigError("max_completion_length must be a positive number of tokens")
    if o.get("bf16") and o.get("fp16"):
        raise ConfigError("bf16=True and fp16=True together: pick one (fp16 on a T4, bf16 on Ampere or newer)")
    if o.get("use_cpu") and (o.get("bf16") or o.get("fp16")):
        raise ConfigError("use_cpu=True with bf16/fp16: mixed precision needs a GPU; set bf16=False, fp16=False")
    per_device = o.get("per_device_train_batch_size", 8)
    accumulation = o.get("gradient_accumulation_steps", 1)
    if o.get("generation_batch_size"):
        generation_batch = o["generation_batch_size"]
    else:
        generation_batch = per_device * (o.get("steps_per_generation") or accumulation)
    if generation_batch % g:
        raise ConfigError(
            f"the generation batch ({generation_batch} completions: per_device_train_batch_size={per_device}, "
            f"gradient_accumulation_steps={accumulation}) must be divisible by num_generations={g}: e.g. set "
            f"per_device_train_batch_size={g} or num_generations to a divisor of {generation_batch}"
        )
    optim = str(o.get("optim", ""))
    if "8bit" in optim and importlib.util.find_spec("bitsandbytes") is None:
        raise ConfigError(f"optim={optim!r} needs bitsandbytes: pip install bitsandbytes, or set optim='adamw_torch'")
    import torch

    if not o.get("use_cpu") and not torch.cuda.is_available() and (o.get("bf16") or o.get("fp16")):
        raise ConfigError(
            "this preset uses bf16/fp16, which needs a GPU, and none is available: use preset='cpu-smoke' "
            "(or 'auto')"
        )


def vllm_options(model) -> dict[str, Any]:
    """GRPOConfig settings for a model that carries a colocated vLLM engine (Unsloth ``fast_inference``).

    Unsloth's GRPOTrainer sets ``use_vllm=True`` and ``vllm_mode="colocate"`` itself when the model has
    ``vllm_engine`` (unsloth/models/rl.py, the ``vllm_setter`` it adds to the trainer's ``__init__``); saying so
    here puts them in run.yaml too, with vLLM's share of the GPU as load_model gave it.
    """
    if getattr(model, "vllm_engine", None) is None:
        return {}
    options: dict[str, Any] = {"use_vllm": True, "vllm_mode": "colocate"}
    share = getattr(getattr(model, "grpo_lite_backend", None), "gpu_memory_utilization", None)
    if share is not None:
        options["vllm_gpu_memory_utilization"] = share
    return options


def make_config(preset: str = "auto", *, output_dir: str | Path = "outputs/grpo-lite", **overrides: Any):
    """A validated ``trl.GRPOConfig`` from a preset (``"auto"`` picks one for this machine) and overrides."""
    from trl import GRPOConfig

    from .runtime import one_gpu_per_process

    options = resolve_options(preset, **overrides)
    try:
        config = GRPOConfig(output_dir=str(output_dir), **options)
    except ValueError as error:  # TRL's own checks, for combinations not covered above
        raise ConfigError(f"GRPOConfig rejected the options: {error}") from error
    return one_gpu_per_process(config)


def config_to_dict(config) -> dict[str, Any]:
    """Every init field of a GRPOConfig as plain YAML-friendly values."""
    fields = grpo_config_fields()
    return {k: v for k, v in config.to_dict().items() if k in fields}


def config_from_dict(options: dict[str, Any]):
    from trl import GRPOConfig

    fields = grpo_config_fields()
    options = {k: v for k, v in options.items() if k in fields}
    if options.get("generation_batch_size") is not None:
        # GRPOConfig derives steps_per_generation from generation_batch_size and refuses both at once
        options.pop("steps_per_generation", None)
    if options.get("loss_type") == "dapo":
        # The default of TRL and Unsloth alike. Passed explicitly, Unsloth's GRPOConfig applies the DAPO paper's
        # settings (epsilon_high 0.28, mask_truncated_completions) and warns about beta (unsloth/models/rl.py);
        # left out, the recorded epsilon_high and mask_truncated_completions come back as they were.
        options.pop("loss_type")
    return GRPOConfig(**options)
