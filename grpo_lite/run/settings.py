"""A run's settings, one typed shape for every way a run is described, and the one place they are checked.

``load_model``/``train`` keyword arguments, a recipe YAML, ``grpo-lite train --set`` flags and the ``run.yaml``
a run writes all become a :class:`RunSettings` (with its :class:`LoadSettings` and :class:`Heldout`), so none
of them can drop a setting the others keep, and :meth:`RunSettings.validate` checks all of them the same way,
before a model loads, naming every problem at once.

    model: Qwen/Qwen2.5-1.5B-Instruct
    load: {max_seq_length: 1024, lora_rank: 32, ...}
    dataset: {path: train.jsonl, question: question, answer: answer}
    rewards: [soft_xml_format_reward, numeric_correctness_reward]
    preset: auto
    reward_timeout: 600
    heldout: {path: test.jsonl, question: question, answer: answer, n: 200, samples: 4}
    overrides: {max_steps: 200}
"""

from __future__ import annotations

import dataclasses
import importlib.util
from dataclasses import dataclass, field
from typing import Any

import yaml

from rewards.registry import did_you_mean

from .presets import BASE, TRAINING_PRESETS, preset_name

REWARD_TIMEOUT = 600.0  # seconds per reward call: far more than scoring a batch takes, short of losing a night
LORA_TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
RECORD_ONLY = ("chosen", "grpo_config")  # what run.yaml holds beyond the settings: never part of a recipe
REMOVED_FIELDS = {
    "max_prompt_length": "TRL removed it; drop long prompts with prepare_dataset(..., tokenizer=tok, max_prompt_tokens=N)",
    "max_new_tokens": "GRPOConfig calls it max_completion_length",
    "warmup_ratio": "transformers 5 takes a warmup ratio as warmup_steps=<float below 1>, e.g. warmup_steps=0.1",
}


class ConfigError(ValueError):
    """An invalid run setting; the message names each setting to change and how."""


def _help(text: str, default: Any = dataclasses.MISSING, **kwargs: Any):
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": text}, **kwargs)
    return field(default=default, metadata={"help": text}, **kwargs)


def _refuse_unknown(values: dict[str, Any], cls, where: str) -> None:
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [f"{where}: unknown setting {key!r}{did_you_mean(str(key), names)} (settings: {', '.join(names)})"
               for key in values if key not in names]
    if unknown:
        raise ConfigError("\n".join(unknown))


def _presets() -> str:
    return ", ".join(["auto", *TRAINING_PRESETS])


@dataclass
class LoadSettings:
    """How :func:`grpo_lite.load_model` loads the model: the ``load:`` section of a recipe."""

    backend: str = _help("auto | unsloth | transformers | cpu: auto takes Unsloth on a CUDA GPU when installed", "auto")
    max_seq_length: int = _help("longest prompt + completion in tokens; a longer run is refused before training "
                                "(Unsloth also sizes its RoPE cache and vLLM by it)", 2048)
    load_in_4bit: bool = _help("4-bit base weights (bitsandbytes) under LoRA", True)
    fast_inference: bool | str = _help("generate through vLLM (Unsloth backend): true | false | auto", "auto")
    lora_rank: int | None = _help("LoRA rank; null trains every weight", 16)
    lora_alpha: int | None = _help("LoRA alpha; null: 2 * lora_rank", None)
    target_modules: list[str] | str = _help("modules LoRA adapts, or 'all-linear'", LORA_TARGET_MODULES)
    gpu_memory_utilization: float | str = _help("vLLM's share of the GPU with fast_inference; auto: what training leaves "
                                                "free, by the memory planner", "auto")
    seed: int = _help("seed of the LoRA adapters' initial weights", 3407)
    from_pretrained: dict[str, Any] = _help("more keyword arguments for the backend's from_pretrained", {})

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None, where: str = "load") -> LoadSettings:
        values = dict(values or {})
        _refuse_unknown(values, cls, where)
        if isinstance(values.get("target_modules"), tuple):
            values["target_modules"] = list(values["target_modules"])
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Heldout:
    """Rows evaluated before and after training, not trained on: the ``heldout:`` section of a recipe."""

    data: Any = _help("where the rows come from, in the shapes of dataset (with an answer); from Python, a prepared "
                      "dataset", None)
    n: int | None = _help("how many held-out rows are evaluated; null: all", 200)
    samples: int = _help("sampled completions per held-out row for pass@k; 1: greedy only", 1)

    @classmethod
    def from_dict(cls, values: dict[str, Any], where: str = "heldout") -> Heldout:
        """``{path: ..., question: ..., n: 200, samples: 4}``: the data's keys beside ``n`` and ``samples``."""
        values = dict(values)
        options = {key: values.pop(key) for key in ("n", "samples") if key in values}
        return cls(data=values or None, **options)

    def to_dict(self) -> dict[str, Any]:
        data = self.data if isinstance(self.data, dict) else {}
        return {**data, "n": self.n, "samples": self.samples}


@dataclass
class RunSettings:
    """One GRPO run as a user asks for it: what a recipe YAML holds, what ``train()`` is given, what ``run.yaml``
    records."""

    model: str = _help("a hub id, a local model folder, or 'tiny' (an offline random Qwen2)")
    rewards: list[Any] = _help("reward or preset names, or module:function paths of your own")
    dataset: dict[str, Any] | None = _help("{builtin: arithmetic} | {path: data.jsonl, question: q, answer: a} | "
                                           "{path: dataset.jsonl, prepared: true}; a run record has none", None)
    load: LoadSettings | None = _help("how the model is loaded (the load.* settings below); null: a model not loaded "
                                      "by load_model", None)
    reward_weights: list[float] | None = _help("one weight per reward function; null: all 1", None)
    preset: str = _help(f"training preset ({_presets()}); auto picks one for this machine", "auto")
    output_dir: str | None = _help("where the run's files go", None)
    reward_timeout: float | None = _help("seconds one reward call may take before its batch scores None; null: no limit",
                                         REWARD_TIMEOUT)
    heldout: Heldout | None = _help("rows evaluated before and after training, not trained on (the heldout.* "
                                    "settings below); null: none", None)
    overrides: dict[str, Any] = _help("trl.GRPOConfig fields: max_steps, num_generations, learning_rate, beta, ...", {})

    @classmethod
    def from_dict(cls, values: dict[str, Any], where: str = "the run") -> RunSettings:
        """Settings from a recipe or ``run.yaml`` document; refuses keys it does not know, naming the close ones."""
        values = {k: v for k, v in values.items() if k not in RECORD_ONLY}
        _refuse_unknown(values, cls, where)
        for key in ("model", "rewards"):
            if values.get(key) is None:
                raise ConfigError(f"{where}: '{key}' is required")
        rewards = values["rewards"]
        values["rewards"] = [rewards] if isinstance(rewards, str) else list(rewards)
        values["model"] = str(values["model"])
        if values.get("load") is not None:
            values["load"] = LoadSettings.from_dict(values["load"], f"{where}: load")
        if values.get("heldout") is not None:
            values["heldout"] = Heldout.from_dict(values["heldout"], f"{where}: heldout")
        values["overrides"] = dict(values.get("overrides") or {})
        return cls(**values)

    def problems(self) -> list[str]:
        """Every setting that cannot work, each with its fix; empty when the run can start. Nothing heavy is loaded."""
        problems = _timeout_problems(self.reward_timeout) + _config_problems(self.preset, self.overrides)
        if self.heldout is not None:
            problems += _heldout_problems(self.heldout)
        from rewards import resolve_rewards

        try:
            funcs, _ = resolve_rewards(self.rewards)  # a preset name stands for several functions
        except (ValueError, TypeError) as error:  # an unknown name, a path that does not import, no **kwargs
            return problems + [str(error)]
        weights = self.reward_weights if self.reward_weights is not None else self.overrides.get("reward_weights")
        if weights is not None and len(weights) != len(funcs):
            names = [r if isinstance(r, str) else getattr(r, "__name__", repr(r)) for r in self.rewards]
            problems.append(f"reward_weights has {len(weights)} values for the {len(funcs)} reward functions of {names}")
        return problems

    def validate(self, where: str = "the run") -> RunSettings:
        """Raise :class:`ConfigError` listing every problem (:meth:`problems`), one per line; else return self."""
        problems = self.problems()
        if problems:
            raise ConfigError("\n".join(f"{where}: {problem}" for problem in problems))
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain values, in field order, leaving out what is unset (a dataset and output_dir a record has none of)."""
        document = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        document["load"] = self.load.to_dict() if self.load is not None else None
        document["heldout"] = self.heldout.to_dict() if self.heldout is not None else None
        return {key: value for key, value in document.items()
                if not (value is None and key in ("dataset", "output_dir", "load", "reward_weights", "heldout"))}

    def with_setting(self, setting: str) -> RunSettings:
        """This run with one ``KEY=VALUE`` (the value read as YAML) applied: ``load.X``, ``dataset.X``,
        ``heldout.X``, a run setting (``preset=t4-16gb``) or else a GRPOConfig field (``max_steps=50``)."""
        key, sep, raw = setting.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {setting!r}: write KEY=VALUE, e.g. --set max_steps=50")
        value = yaml.safe_load(raw)
        section, dot, name = key.partition(".")
        if dot and section == "load":
            load = (self.load or LoadSettings()).to_dict()
            return dataclasses.replace(self, load=LoadSettings.from_dict({**load, name: value}, f"--set {key}"))
        if dot and section == "heldout":
            heldout = (self.heldout or Heldout()).to_dict()
            return dataclasses.replace(self, heldout=Heldout.from_dict({**heldout, name: value}, f"--set {key}"))
        if dot and section == "dataset":
            return dataclasses.replace(self, dataset={**(self.dataset or {}), name: value})
        if key in {f.name for f in dataclasses.fields(self)} - {"load", "dataset", "heldout", "overrides"}:
            return dataclasses.replace(self, **{key: value})
        return dataclasses.replace(self, overrides={**self.overrides, key: value})


def grpo_config_fields() -> set[str]:
    from trl import GRPOConfig

    return {f.name for f in dataclasses.fields(GRPOConfig) if f.init}


def _timeout_problems(timeout: Any) -> list[str]:
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0):
        return [f"reward_timeout={timeout!r}: give the seconds one reward call may take (e.g. 600), or null/None for no limit"]
    return []


def check_reward_timeout(timeout: Any) -> None:
    """``reward_timeout`` alone, as a command-line flag gives it: a positive number of seconds, or None."""
    problems = _timeout_problems(timeout)
    if problems:
        raise ConfigError(problems[0])


def _heldout_problems(heldout: Heldout) -> list[str]:
    problems = []
    if heldout.n is not None and (isinstance(heldout.n, bool) or not isinstance(heldout.n, int) or heldout.n < 1):
        problems.append(f"heldout n={heldout.n!r} (heldout_n in train()): give how many held-out rows to evaluate (e.g. 200), or null for all")
    if isinstance(heldout.samples, bool) or not isinstance(heldout.samples, int) or heldout.samples < 1:
        problems.append(f"heldout samples={heldout.samples!r} (heldout_samples in train()): give the sampled completions per held-out row "
                        "(1: greedy only)")
    return problems


def _field_problems(overrides: dict[str, Any]) -> list[str]:
    fields = grpo_config_fields()
    problems = []
    for key in overrides:
        if key in REMOVED_FIELDS:
            problems.append(f"{key}: {REMOVED_FIELDS[key]}")
        elif key not in fields:
            problems.append(f"{key!r} is not a GRPOConfig option{did_you_mean(key, fields)}")
    return problems


def _option_problems(o: dict[str, Any]) -> list[str]:
    """What GRPOConfig would accept but cannot train, or TRL would refuse only once the model is loaded."""
    problems = []
    g = o.get("num_generations", 8)
    if not isinstance(g, int) or g < 2:
        problems.append(f"num_generations={g!r}: GRPO compares completions within a group, so use 2 or more (4-16 is usual)")
        g = None
    if "max_steps" in o and o["max_steps"] is None:
        problems.append("max_steps=None is not valid: use -1 (train for num_train_epochs) or a positive number of steps")
    beta = o.get("beta", 0.0)
    if beta is None or beta < 0:
        problems.append(f"beta={beta!r}: the KL coefficient must be >= 0 (0.04 is this toolkit's default, 0 disables KL)")
    if o.get("learning_rate", 1.0) <= 0:
        problems.append(f"learning_rate={o['learning_rate']!r} must be positive (5e-6 is a safe start)")
    if o.get("max_completion_length", 1) <= 0:
        problems.append("max_completion_length must be a positive number of tokens")
    if o.get("bf16") and o.get("fp16"):
        problems.append("bf16=True and fp16=True together: pick one (fp16 on a T4, bf16 on Ampere or newer)")
    if o.get("use_cpu") and (o.get("bf16") or o.get("fp16")):
        problems.append("use_cpu=True with bf16/fp16: mixed precision needs a GPU; set bf16=False, fp16=False")
    per_device = o.get("per_device_train_batch_size", 8)
    accumulation = o.get("gradient_accumulation_steps", 1)
    generation_batch = o.get("generation_batch_size") or per_device * (o.get("steps_per_generation") or accumulation)
    if g and generation_batch % g:
        problems.append(
            f"the generation batch ({generation_batch} completions: per_device_train_batch_size={per_device}, "
            f"gradient_accumulation_steps={accumulation}) must be divisible by num_generations={g}: e.g. set "
            f"per_device_train_batch_size={g} or num_generations to a divisor of {generation_batch}"
        )
    optim = str(o.get("optim", ""))
    if "8bit" in optim and importlib.util.find_spec("bitsandbytes") is None:
        problems.append(f"optim={optim!r} needs bitsandbytes: pip install bitsandbytes, or set optim='adamw_torch'")
    import torch

    if not o.get("use_cpu") and not torch.cuda.is_available() and (o.get("bf16") or o.get("fp16")):
        problems.append("this preset uses bf16/fp16, which needs a GPU, and none is available: use preset='cpu-smoke' "
                        "(or 'auto')")
    return problems


def _options(preset: str, overrides: dict[str, Any]) -> dict[str, Any]:
    return {**BASE, **TRAINING_PRESETS.get(preset_name(preset), {}), **overrides}


def _config_problems(preset: str, overrides: dict[str, Any]) -> list[str]:
    problems = [] if preset_name(preset) in TRAINING_PRESETS else [
        f"unknown preset {preset!r}{did_you_mean(preset, TRAINING_PRESETS)}; choose one of {_presets()}"]
    problems += _field_problems(overrides)
    return problems or _option_problems(_options(preset, overrides))


def resolve_options(preset: str = "auto", **overrides: Any) -> dict[str, Any]:
    """The GRPOConfig keyword arguments for ``preset`` (its values, then ``overrides``), checked as
    :meth:`RunSettings.validate` checks them: raises :class:`ConfigError` naming each option to change."""
    problems = _config_problems(preset, overrides)
    if problems:
        raise ConfigError("\n".join(problems))
    return _options(preset, overrides)


def field_help() -> str:
    """Every setting of a run YAML with its help, for ``grpo-lite train --help``."""
    lines = ["run YAML settings (also as --set KEY=VALUE):"]
    for f in dataclasses.fields(RunSettings):
        lines.append(f"  {f.name:<28} {f.metadata['help']}")
    for section, cls in (("load", LoadSettings), ("heldout", Heldout)):
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            lines.append(f"  {section + '.' + f.name:<28} {f.metadata['help']} (default {default!r})")
    return "\n".join(lines)
