"""The run record: a run's settings, one typed shape for every way a run is described.

``load_model``/``train`` keyword arguments, a recipe YAML, ``grpo-lite train --set`` flags and the ``run.yaml``
a run writes all become a :class:`RunSettings` (with its :class:`LoadSettings`), so none of them can drop a
setting the others keep. ``run.yaml`` is that record written out, plus what the run chose for itself
(``chosen``: the preset ``auto`` picked, the backend, vLLM's share, reward weights from a ``RewardSet``) and
the full GRPOConfig it trained with. Its top level is a recipe: ``grpo-lite launch-kit <run dir>`` and
``grpo-lite train`` read it back as the same run.

    model: Qwen/Qwen2.5-1.5B-Instruct
    load: {max_seq_length: 1024, lora_rank: 32, ...}
    rewards: [soft_xml_format_reward, numeric_correctness_reward]
    preset: auto
    reward_timeout: 600
    overrides: {max_steps: 200}
    chosen: {preset: gpu-24gb, backend: unsloth, overrides: {use_vllm: true, ...}}
    grpo_config: {...every GRPOConfig field...}
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .config import ConfigError, config_to_dict, preset_name, resolve_options

REWARD_TIMEOUT = 600.0  # seconds per reward call: far more than scoring a batch takes, short of losing a night
LORA_TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _help(text: str, default: Any = dataclasses.MISSING, **kwargs: Any):
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": text}, **kwargs)
    return field(default=default, metadata={"help": text}, **kwargs)


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
class RunSettings:
    """One GRPO run as a user asks for it: what a recipe YAML holds and what ``run.yaml`` records."""

    model: str = _help("a hub id, a local model folder, or 'tiny' (an offline random Qwen2)")
    rewards: list[str] = _help("reward or preset names, or module:function paths of your own")
    dataset: dict[str, Any] | None = _help("{builtin: arithmetic} | {path: data.jsonl, question: q, answer: a} | "
                                           "{path: dataset.jsonl, prepared: true}; a run record has none", None)
    load: LoadSettings | None = _help("how the model is loaded (the fields below); null: a model not loaded by "
                                      "load_model", None)
    reward_weights: list[float] | None = _help("one weight per reward function; null: all 1", None)
    preset: str = _help("training preset (cpu-smoke, t4, gpu-24gb, ...); auto picks one for this machine", "auto")
    output_dir: str | None = _help("where the run's files go", None)
    reward_timeout: float | None = _help("seconds one reward call may take before its batch scores None; null: no limit",
                                         REWARD_TIMEOUT)
    heldout: dict[str, Any] | None = _help("rows evaluated before and after training, not trained on: the shapes of "
                                           "dataset (with an answer); null: none", None)
    heldout_n: int | None = _help("how many held-out rows are evaluated; null: all", 200)
    heldout_samples: int = _help("sampled completions per held-out row for pass@k; 1: greedy only", 1)
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
        if "load" in values:
            values["load"] = None if values["load"] is None else LoadSettings.from_dict(values["load"], f"{where}: load")
        values["overrides"] = dict(values.get("overrides") or {})
        return cls(**values)

    def validate(self, where: str = "the run") -> RunSettings:
        """Check everything that can be checked before a model loads; raises ConfigError naming the setting."""
        check_reward_timeout(self.reward_timeout, where)
        try:
            resolve_options(self.preset, **self.overrides)
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}") from None
        if self.heldout_n is not None and (isinstance(self.heldout_n, bool) or not isinstance(self.heldout_n, int)
                                           or self.heldout_n < 1):
            raise ConfigError(f"{where}: heldout_n={self.heldout_n!r}: give how many held-out rows to evaluate (e.g. 200), "
                              "or null for all")
        if isinstance(self.heldout_samples, bool) or not isinstance(self.heldout_samples, int) or self.heldout_samples < 1:
            raise ConfigError(f"{where}: heldout_samples={self.heldout_samples!r}: give the sampled completions per "
                              "held-out row (1: greedy only)")
        from rewards import resolve_rewards

        try:
            funcs, _ = resolve_rewards(self.rewards)  # a preset name stands for several functions
        except (ValueError, TypeError) as error:  # an unknown name, a path that does not import, no **kwargs
            raise ConfigError(f"{where}: {error}") from None
        if self.reward_weights is not None and len(self.reward_weights) != len(funcs):
            raise ConfigError(f"{where}: reward_weights has {len(self.reward_weights)} values for the {len(funcs)} "
                              f"reward functions of {self.rewards}")
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain values, in field order, leaving out what is unset (a dataset and output_dir a record has none of)."""
        document = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        document["load"] = self.load.to_dict() if self.load is not None else None
        return {key: value for key, value in document.items()
                if not (value is None and key in ("dataset", "output_dir", "load", "reward_weights", "heldout"))}

    def with_setting(self, setting: str) -> RunSettings:
        """This run with one ``KEY=VALUE`` (the value read as YAML) applied: ``load.X``, ``dataset.X``, a run
        setting (``preset=t4``) or else a GRPOConfig field (``max_steps=50``)."""
        key, sep, raw = setting.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {setting!r}: write KEY=VALUE, e.g. --set max_steps=50")
        value = yaml.safe_load(raw)
        section, dot, name = key.partition(".")
        if dot and section == "load":
            load = (self.load or LoadSettings()).to_dict()
            return dataclasses.replace(self, load=LoadSettings.from_dict({**load, name: value}, f"--set {key}"))
        if dot and section in ("dataset", "heldout"):
            return dataclasses.replace(self, **{section: {**(getattr(self, section) or {}), name: value}})
        if key in {f.name for f in dataclasses.fields(self)} - {"load", "dataset", "heldout", "overrides"}:
            return dataclasses.replace(self, **{key: value})
        return dataclasses.replace(self, overrides={**self.overrides, key: value})


# What run.yaml holds beyond the settings: read back by read_run, never part of a recipe.
RECORD_ONLY = ("chosen", "grpo_config")


@dataclass
class RunRecord:
    """``run.yaml``: the settings asked for, what the run chose for itself, and the GRPOConfig it trained with."""

    settings: RunSettings
    chosen: dict[str, Any] = field(default_factory=dict)
    grpo_config: dict[str, Any] = field(default_factory=dict)

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        document = {**self.settings.to_dict(), "chosen": self.chosen, "grpo_config": self.grpo_config}
        path.write_text(yaml.dump(document, Dumper=_RecordDumper, sort_keys=False, default_flow_style=False))
        return path

    @property
    def reward_names(self) -> list[str]:
        """The rewards as the metrics name them (``rewards/<name>/mean``): a ``module:function`` path's function."""
        return [reference.rpartition(":")[2] for reference in self.settings.rewards]

    def fixed(self) -> dict[str, Any]:
        """What a checkpoint's weights depend on besides the GRPOConfig: a resumed run must match it."""
        load = self.settings.load
        return {"model": self.settings.model, "backend": self.chosen.get("backend"),
                "lora_rank": load.lora_rank if load is not None else self.chosen.get("lora_rank"),
                "rewards": self.settings.rewards}


class _RecordDumper(yaml.SafeDumper):
    """YAML's safe types, plus what ``from_pretrained`` keywords hold: a torch dtype by the name transformers
    reads back (``dtype: bfloat16``); anything else as its text, which a launch kit cannot turn back into it."""


def _represent_other(dumper: yaml.SafeDumper, value: Any):
    import torch

    if isinstance(value, torch.dtype):
        return dumper.represent_str(str(value).removeprefix("torch."))
    from .log import logger

    logger.warning(f"run.yaml records {value!r} as text: pass it to load_model by name, or rebuild it by hand to rerun")
    return dumper.represent_str(repr(value))


_RecordDumper.add_multi_representer(object, _represent_other)


def read_run(path: str | Path) -> RunRecord:
    """The :class:`RunRecord` in a ``run.yaml`` (or the run folder holding it); the one reader of run records.

    A record written before ``chosen`` existed (backend and lora_rank at the top, reward weights among the
    overrides) is read into the same shape.
    """
    from .run_files import RUN_FILE

    path = Path(path)
    path = path / RUN_FILE if path.is_dir() else path
    if not path.exists():
        raise FileNotFoundError(f"{path}: no run record; pass the output_dir that train() wrote to")
    document = yaml.safe_load(path.read_text()) or {}
    chosen = dict(document.get("chosen") or {})
    if "backend" in document:  # the older layout
        overrides = dict(document.get("overrides") or {})
        if "reward_weights" in overrides:
            document["reward_weights"] = overrides.pop("reward_weights")
        document["overrides"] = overrides
        chosen["backend"] = document.pop("backend")
        chosen["lora_rank"] = document.pop("lora_rank", None)
    settings = RunSettings.from_dict(document, path.name)
    return RunRecord(settings=settings, chosen=chosen, grpo_config=dict(document.get("grpo_config") or {}))


def record_run(model, rewards, config, *, preset: str, reward_weights, chosen_weights, reward_timeout, heldout,
               heldout_n, heldout_samples, overrides: dict[str, Any], chosen_overrides: dict[str, Any]) -> RunRecord:
    """The record of a :func:`grpo_lite.train` call: its arguments as given, what it chose, its GRPOConfig.

    A held-out dataset given as rows is recorded by its size (``chosen``); a recipe names where it comes from."""
    loaded = getattr(model, "grpo_lite_load", None)
    backend = getattr(model, "grpo_lite_backend", None)
    peft_config = getattr(model, "peft_config", {}).get(getattr(model, "active_adapter", "default"))
    name = loaded[0] if loaded else str(getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__)
    settings = RunSettings(
        model=name, rewards=[reward_reference(f) for f in rewards], load=loaded[1] if loaded else None,
        reward_weights=list(reward_weights) if reward_weights is not None else None, preset=preset,
        reward_timeout=reward_timeout, heldout_n=heldout_n, heldout_samples=heldout_samples, overrides=dict(overrides))
    chosen: dict[str, Any] = {"preset": preset_name(preset)}
    if heldout is not None:
        chosen["heldout_rows"] = len(heldout)
    if backend is not None:
        chosen.update(backend=backend.name, backend_reason=backend.reason, load_in_4bit=backend.load_in_4bit,
                      fast_inference=backend.fast_inference)
        if backend.gpu_memory_utilization is not None:
            chosen["gpu_memory_utilization"] = backend.gpu_memory_utilization
    if loaded is None:
        chosen["lora_rank"] = getattr(peft_config, "r", None)
    if chosen_weights is not None and reward_weights is None:
        chosen["reward_weights"] = list(chosen_weights)
    if chosen_overrides:
        chosen["overrides"] = dict(chosen_overrides)
    return RunRecord(settings=settings, chosen=chosen, grpo_config=config_to_dict(config))


def reward_reference(func) -> str:
    """The name that resolves back to ``func``: its registry name, else ``module:function`` when importable,
    else its bare name (a function defined in a notebook, which a launch kit cannot import)."""
    from rewards import reward_name
    from rewards.registry import REWARDS

    inner = getattr(func, "func", func)  # a guarded reward wraps the user's function
    name = reward_name(inner)
    if REWARDS.get(name) is inner:
        return name
    module, qualname = getattr(inner, "__module__", None), getattr(inner, "__qualname__", "")
    if module and module != "__main__" and "<" not in qualname:
        try:
            if getattr(importlib.import_module(module), qualname, None) is inner:
                return f"{module}:{qualname}"
        except ImportError:
            pass
    return name


def check_reward_timeout(timeout: Any, where: str | None = None) -> None:
    """The one check of ``reward_timeout``: a positive number of seconds, or None for no limit."""
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0):
        raise ConfigError(f"{where + ': ' if where else ''}reward_timeout={timeout!r}: give the seconds one reward call may take (e.g. 600), "
                          "or null/None for no limit")


def field_help() -> str:
    """Every setting of a run YAML with its help, for ``grpo-lite train --help``."""
    lines = ["run YAML settings (also as --set KEY=VALUE):"]
    for f in dataclasses.fields(RunSettings):
        lines.append(f"  {f.name:<28} {f.metadata['help']}")
    for f in dataclasses.fields(LoadSettings):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        lines.append(f"  {'load.' + f.name:<28} {f.metadata['help']} (default {default!r})")
    return "\n".join(lines)


def _refuse_unknown(values: dict[str, Any], cls, where: str) -> None:
    names = [f.name for f in dataclasses.fields(cls)]
    for key in values:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=2)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise ConfigError(f"{where}: unknown setting {key!r}{hint} (settings: {', '.join(names)})")
