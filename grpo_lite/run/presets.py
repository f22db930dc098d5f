"""Training presets: the GRPOConfig values a run starts from, and the one ``auto`` picks for this machine.

Defaults follow the seed recipe (lr 5e-6, Adam betas 0.9/0.99, weight decay 0.1, warmup 0.1, cosine,
max_grad_norm 0.1, 8 generations, a log line every step) with one deliberate change: ``beta=0.04``.
TRL's default ``beta=0.0`` drops the reference model, so no KL is computed or logged, and KL is one of
the signals that tells a healthy run from a drifting one. Two Trainer defaults change for the faults of a
long run (docs/faults.md): a NaN loss is logged as NaN, and only the two newest checkpoints are kept.

Every field a run relies on is set here even where it is TRL's default: once Unsloth is imported, GRPOConfig is
Unsloth's generated class (unsloth/models/rl.py), whose defaults differ (gradient_accumulation_steps 2,
optim adamw_8bit, seed 3407, vllm_importance_sampling_correction False), so an unset field would train
differently on a GPU machine than in the tests.

A preset is written for the newest TRL and transformers; :func:`preset_values` gives it in the installed ones' form
(warmup as ``warmup_ratio`` where ``warmup_steps`` is a whole number) and leaves out a field the installed TRL lacks,
which :func:`unavailable_values` names for the table train() prints (grpo_lite/machine/stack.py).

``preset="trl"`` is TRL's GRPOConfig defaults and nothing of grpo-lite's. train() says first, in one table, each value a
preset uses that differs from TRL's default (``BASE_REASONS`` gives the why), and run.yaml records where each value
came from (``chosen.sources``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..machine import stack

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

# Why BASE differs from TRL's GRPOConfig default, one short reason per field: the table train() prints first reads it.
BASE_REASONS = {
    "learning_rate": "seed recipe",
    "adam_beta2": "seed recipe",
    "weight_decay": "seed recipe",
    "warmup_steps": "seed recipe: warmup 0.1 of the steps",
    "warmup_ratio": "seed recipe: warmup 0.1 of the steps",
    "lr_scheduler_type": "seed recipe",
    "max_grad_norm": "seed recipe",
    "beta": "grpo-lite's base: KL on",
    "logging_steps": "grpo-lite's base: a log line every step",
    "logging_nan_inf_filter": "grpo-lite's base: a NaN loss is logged as NaN",
    "save_steps": "grpo-lite's base",
    "save_total_limit": "grpo-lite's base: two newest checkpoints",
}

# TRL's own defaults, nothing of grpo-lite's: `preset="trl"`. On a machine without a GPU the run adds use_cpu=True and
# bf16=False (TRL's bf16=None turns into bf16=True, mixed precision a CPU run cannot train in), and says so.
TRL_PRESET = "trl"

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
        "activation_checkpointing": False,
        "save_steps": 5,
    },
    # Colab / Kaggle T4: no bf16 support, 16 GB.
    "t4-16gb": {
        "fp16": True,
        "bf16": False,
        "optim": "adamw_8bit",
        "per_device_train_batch_size": 8,
        "max_completion_length": 256,
        "activation_checkpointing": True,
    },
    "l4-24gb": {
        "bf16": True,
        "optim": "adamw_8bit",
        "per_device_train_batch_size": 8,
        "max_completion_length": 512,
        "activation_checkpointing": True,
    },
    "a100-80gb": {
        "bf16": True,
        "per_device_train_batch_size": 16,
        "num_generations": 16,
        "max_completion_length": 1024,
        "activation_checkpointing": True,
    },
    TRL_PRESET: {},  # TRL's defaults: preset_values() gives no BASE for it
}


def _written_values(name: str) -> dict[str, Any]:
    """BASE and the preset's own entry as written, for the newest TRL and transformers; nothing for ``trl``."""
    if name == TRL_PRESET:
        return {}
    values = {stack.field_name(key): value for key, value in {**BASE, **TRAINING_PRESETS.get(name, {})}.items()}
    warmup = values.get("warmup_steps")
    if isinstance(warmup, float) and warmup < 1 and not stack.newer("warmup_steps_ratio"):
        values["warmup_ratio"] = values.pop("warmup_steps")  # transformers 4: warmup_steps counts steps
    return values


# One setting in two fields: the user's warmup, in either, replaces the preset's (on transformers 4 a preset's
# warmup_ratio would otherwise still apply beside a user's warmup_steps=0).
WARMUP_FIELDS = ("warmup_steps", "warmup_ratio")


def preset_values(name: str, asked: Any = ()) -> dict[str, Any]:
    """The GRPOConfig values a preset (a name in TRAINING_PRESETS, not ``auto``) sets on the installed TRL and
    transformers: BASE and its own entry, or nothing at all for ``trl``; its warmup left out where ``asked`` (the
    fields the user set) holds one."""
    dropped = WARMUP_FIELDS if set(WARMUP_FIELDS) & set(asked) else ()
    return {key: value for key, value in _written_values(name).items()
            if (key not in stack.CHANGED_FIELDS or stack.has_config_field(key)) and key not in dropped}


def unavailable_values(name: str) -> dict[str, Any]:
    """The values the preset ``name`` would set that the installed GRPOConfig has no field for."""
    return {key: value for key, value in _written_values(name).items()
            if key in stack.CHANGED_FIELDS and not stack.has_config_field(key)}


def preset_reason(name: str, key: str) -> str:
    """Why the preset ``name`` sets ``key``: its own entry names it, else BASE's reason."""
    if key in TRAINING_PRESETS.get(name, {}):
        return f"preset {name}"
    return BASE_REASONS.get(key, "grpo-lite's base")


def auto_preset() -> str:
    """The preset for the machine this runs on, judged by its GPU (or its lack of one)."""
    from ..machine.device import supports_bf16, this_gpu

    gpu = this_gpu()
    if gpu is None:
        return "cpu-smoke"
    if not supports_bf16():  # a T4 (compute capability 7.5): fp16, whatever emulation torch counts
        return "t4-16gb"
    return "a100-80gb" if gpu.memory_gb >= 60 else "l4-24gb"


def preset_name(preset: str) -> str:
    """The preset a run trains with: ``"auto"`` is the one :func:`auto_preset` picks for this machine."""
    return auto_preset() if preset == "auto" else preset


def trl_defaults() -> dict[str, Any]:
    """TRL's own GRPOConfig defaults, read from TRL's class even where Unsloth's generated subclass replaced
    ``trl.GRPOConfig`` (its defaults differ: docs/architecture.md)."""
    from trl import GRPOConfig

    cls = next(c for c in GRPOConfig.__mro__ if c.__module__.startswith("trl."))
    defaults = {}
    for f in dataclasses.fields(cls):
        if f.init:
            defaults[f.name] = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    for old, new in stack.RENAMED_FIELDS.items():
        if new in defaults:  # transformers' new name defaults to None, which takes TRL's default of the old one
            defaults[new] = defaults.pop(old) if defaults[new] is None else defaults[new]
            defaults.pop(old, None)
    return defaults


def machine_values(preset: str) -> dict[str, Any]:
    """What ``preset="trl"`` needs on this machine to mean TRL's defaults and train: TRL's values pinned where the
    installed GRPOConfig is Unsloth's (its defaults differ), and on a machine without a GPU use_cpu=True, bf16=False
    (TRL turns bf16=None into bf16=True, which the Trainer cannot train with on a CPU). Other presets set these
    themselves."""
    if preset_name(preset) != TRL_PRESET:
        return {}
    import inspect

    from trl import GRPOConfig

    # Unsloth's generated class states its defaults in its __init__'s signature (unsloth/models/rl.py)
    active = {name: p.default for name, p in inspect.signature(GRPOConfig.__init__).parameters.items()
              if p.default is not inspect.Parameter.empty}
    # loss_type=None is Unsloth's sentinel for TRL's 'dapo', while an explicit 'dapo' brings DAPO's epsilon_high=0.28
    # (rl.py, "Resolve the None loss_type / beta sentinels"): left unpinned, as config_from_dict leaves it out
    values = {key: value for key, value in trl_defaults().items() if key in active and active[key] != value and key != "loss_type"}
    return {**values, **cpu_values(preset)}


def cpu_values(preset: str) -> dict[str, Any]:
    """use_cpu=True, bf16=False for ``preset="trl"`` on a machine without a GPU (see :func:`machine_values`)."""
    import torch

    return {"use_cpu": True, "bf16": False} if preset_name(preset) == TRL_PRESET and not torch.cuda.is_available() else {}


def preset_options(preset: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """The GRPOConfig values a run with ``preset`` trains with: the preset's, what this machine needs, then ``overrides``."""
    name = preset_name(preset)
    return {**preset_values(name, overrides), **machine_values(name), **overrides}
