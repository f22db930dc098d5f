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
import os
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rewards.registry import did_you_mean

from ..errors import UserError
from ..machine import stack
from .porting import REMOVED_FIELDS, is_number, is_whole, port_overrides, still_a_field
from .presets import TRAINING_PRESETS, TRL_PRESET, preset_name, preset_options, preset_values

REWARD_TIMEOUT = 600.0  # seconds per reward call: far more than scoring a batch takes, short of losing a night
LORA_TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
BACKEND_CHOICES = ("auto", "unsloth", "transformers", "cpu")
RECORD_ONLY = ("chosen", "grpo_config")  # what run.yaml holds beyond the settings: never part of a recipe


class ConfigError(UserError, ValueError):
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
    # LoRA options that Unsloth's get_peft_model and PEFT's LoraConfig both take, with the default both give them
    lora_dropout: float = _help("dropout on the LoRA path (Unsloth's kernels are fastest at 0)", 0.0)
    bias: str = _help("none | all | lora_only: which biases train", "none")
    use_rslora: bool = _help("rank-stabilized LoRA: scale by lora_alpha / sqrt(rank) instead of lora_alpha / rank", False)
    init_lora_weights: bool | str = _help("LoRA's initial weights: true (B = 0), false, or a PEFT method (gaussian, pissa, "
                                          "olora, ...)", True)
    modules_to_save: list[str] | None = _help("modules trained whole beside LoRA (e.g. [lm_head, embed_tokens])", None)
    layers_to_transform: list[int] | int | None = _help("layer indices LoRA adapts; null: every layer", None)
    layers_pattern: str | None = _help("name of the layer list, with layers_to_transform (e.g. layers)", None)
    ensure_weight_tying: bool | None = _help("keep tied embedding and output weights tied in modules_to_save; null: Unsloth "
                                             "decides (PEFT: false)", None)
    chat_template: str | None = _help("the tokenizer's chat template: a Jinja string, or (with Unsloth) the name of one of "
                                      "its templates (chatml, qwen-2.5, llama-3.1, ...); null: the model's own", None)
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

    def problems(self) -> list[str]:
        """Every load setting of the wrong type or out of range, each with its fix."""
        found = []
        if self.backend not in BACKEND_CHOICES:
            found.append(f"backend={self.backend!r}: use one of {', '.join(BACKEND_CHOICES)}")
        if not is_whole(self.max_seq_length) or self.max_seq_length < 1:
            found.append(f"max_seq_length={self.max_seq_length!r}: give the longest prompt + completion in tokens (e.g. 2048)")
        if not isinstance(self.load_in_4bit, bool):
            found.append(f"load_in_4bit={self.load_in_4bit!r}: use true or false")
        if self.fast_inference not in (True, False, "auto"):
            found.append(f"fast_inference={self.fast_inference!r}: use true, false or auto")
        if self.lora_rank is not None and (not is_whole(self.lora_rank) or self.lora_rank < 1):
            found.append(f"lora_rank={self.lora_rank!r}: give a LoRA rank of 1 or more (16 is usual), or null/None to train "
                         "every weight")
        if self.lora_alpha is not None and (not is_number(self.lora_alpha) or self.lora_alpha <= 0):
            found.append(f"lora_alpha={self.lora_alpha!r}: give a positive number, or null/None for 2 * lora_rank")
        modules = self.target_modules
        if not (isinstance(modules, str) or (isinstance(modules, list) and modules and all(isinstance(m, str) for m in modules))):
            found.append(f"target_modules={modules!r}: give module names (e.g. [q_proj, v_proj]) or 'all-linear'")
        share = self.gpu_memory_utilization
        if share != "auto" and (not is_number(share) or not 0 < share < 1):
            found.append(f"gpu_memory_utilization={share!r}: give vLLM's share of the GPU between 0 and 1 (e.g. 0.5), or auto")
        if not is_whole(self.seed):
            found.append(f"seed={self.seed!r}: give a whole number")
        if not is_number(self.lora_dropout) or not 0 <= self.lora_dropout < 1:
            found.append(f"lora_dropout={self.lora_dropout!r}: give a dropout between 0 and 1 (e.g. 0.05), or 0 for none")
        if self.bias not in ("none", "all", "lora_only"):
            found.append(f"bias={self.bias!r}: use none, all or lora_only")
        if not isinstance(self.use_rslora, bool):
            found.append(f"use_rslora={self.use_rslora!r}: use true or false")
        if not isinstance(self.init_lora_weights, (bool, str)):
            found.append(f"init_lora_weights={self.init_lora_weights!r}: use true, false or a PEFT method name (e.g. gaussian)")
        saved = self.modules_to_save
        if saved is not None and not (isinstance(saved, list) and all(isinstance(m, str) for m in saved)):
            found.append(f"modules_to_save={saved!r}: give module names (e.g. [lm_head]), or null")
        layers = [self.layers_to_transform] if is_whole(self.layers_to_transform) else self.layers_to_transform
        if layers is not None and not (isinstance(layers, list) and layers and all(is_whole(n) and n >= 0 for n in layers)):
            found.append(f"layers_to_transform={layers!r}: give layer indices (e.g. [0, 1, 2]), or null for every layer")
        if self.layers_pattern is not None and not isinstance(self.layers_pattern, str):
            found.append(f"layers_pattern={self.layers_pattern!r}: give the name of the model's layer list (e.g. layers), or null")
        if not (self.ensure_weight_tying is None or isinstance(self.ensure_weight_tying, bool)):
            found.append(f"ensure_weight_tying={self.ensure_weight_tying!r}: use true, false or null")
        if self.chat_template is not None and (not isinstance(self.chat_template, str) or not self.chat_template.strip()):
            found.append(f"chat_template={self.chat_template!r:.60}: give a Jinja template, a template name, or null")
        if not isinstance(self.from_pretrained, dict):
            found.append(f"from_pretrained={self.from_pretrained!r}: give a mapping of keyword -> value")
        return found


@dataclass
class Heldout:
    """Rows evaluated before and after training, not trained on: the ``heldout:`` section of a recipe."""

    data: Any = _help("where the rows come from, in the shapes of dataset (with an answer); from Python, a prepared "
                      "dataset", None)
    n: int | None = _help("how many held-out rows are evaluated; null: all", 200)
    samples: int = _help("sampled completions per held-out row for pass@k; 1: greedy only", 1)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Heldout:
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
            values["heldout"] = Heldout.from_dict(values["heldout"])
        values["overrides"] = numbers_from_text(dict(values.get("overrides") or {}))
        return cls(**values)

    def problems(self, *, model_loaded: bool = False) -> list[str]:
        """Every setting that cannot work, each with its fix; empty when the run can start. Nothing heavy is loaded:
        the model path, the output folder and the data files are looked at, not loaded (``model_loaded``: the
        model is in memory already, so its path is not checked)."""
        problems = _timeout_problems(self.reward_timeout) + _config_problems(self.preset, self.overrides)
        if self.load is not None:
            problems += [f"load.{problem}" for problem in self.load.problems()]
            beta = self.overrides.get("beta", preset_values(preset_name(self.preset)).get("beta", 0.0))
            if self.load.bias != "none" and is_number(beta) and beta > 0:
                # TRL copies the LoRA config into a frozen "ref" adapter for the KL term, and PEFT trains biases in one
                # adapter only (peft/tuners/tuners_utils.py, BaseTuner._check_new_adapter_config)
                problems.append(f"load.bias={self.load.bias!r} with beta={beta}: PEFT lets one adapter train biases, and the "
                                "KL term needs a second (TRL's reference adapter); use bias: none, or beta=0 (no KL)")
        if self.overrides.get("use_vllm") and importlib.util.find_spec("vllm") is None:  # asked for, not chosen by the run
            problems.append("use_vllm=True needs vLLM, which is not installed: pip install 'grpo-lite[vllm]' on a GPU that "
                            "runs it, or leave use_vllm out (generation then goes through transformers)")
        if not model_loaded:
            problems += model_problems(self.model)
        if self.output_dir is not None:
            problems += _output_problems(Path(self.output_dir))
        if isinstance(self.dataset, dict):
            problems += [f"dataset: {problem}" for problem in data_problems(self.dataset)]
        if self.heldout is not None:
            problems += _heldout_problems(self.heldout)
            if isinstance(self.heldout.data, dict):
                problems += [f"heldout: {problem}" for problem in data_problems(self.heldout.data)]
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

    def validate(self, where: str = "the run", *, model_loaded: bool = False) -> RunSettings:
        """Raise :class:`ConfigError` listing every problem (:meth:`problems`), one per line; else return self."""
        problems = self.problems(model_loaded=model_loaded)
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
            return dataclasses.replace(self, heldout=Heldout.from_dict({**heldout, name: value}))
        if dot and section == "dataset":
            return dataclasses.replace(self, dataset={**(self.dataset or {}), name: value})
        if key in {f.name for f in dataclasses.fields(self)} - {"load", "dataset", "heldout", "overrides"}:
            return dataclasses.replace(self, **{key: value})
        return dataclasses.replace(self, overrides={**self.overrides, **numbers_from_text({key: value})})


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")


def model_problems(model: str) -> list[str]:
    """A local model folder that is not there, or a name that is neither a folder nor a hub id."""
    if model == "tiny":
        return []
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            return [f"model {model!r} is a file; give the folder a model was saved to (it holds config.json), or a hub id"]
        if not (path / "config.json").exists():
            return [f"model {model!r}: the folder has no config.json; give the folder a model was saved to "
                    "(save_pretrained), or a hub id"]
        return []
    parent = path.parent
    local = model.startswith((".", "/", "~")) or "\\" in model or model.count("/") > 1 or (str(parent) != "." and parent.is_dir())
    if local or not HUB_ID.fullmatch(model) or "--" in model or ".." in model:
        nearest = next((p for p in path.parents if p.is_dir()), Path("."))
        hint = did_you_mean(path.name, [p.name for p in nearest.iterdir()]) if local and nearest == parent else ""
        return [f"model {model!r}: no such folder{hint}, and not a hub id (namespace/name); give a model folder, a hub "
                "id, or 'tiny'"]
    return []


def _output_problems(output_dir: Path) -> list[str]:
    """An output folder that cannot be made or written: a file in its place or above it, a folder without write access."""
    existing = next(p for p in (output_dir, *output_dir.parents) if p.exists() or p == Path(p.anchor) or p == Path("."))
    if not existing.is_dir():
        where = "is a file" if existing == output_dir else f"cannot be made: {existing} is a file"
        return [f"output_dir {str(output_dir)!r} {where}; pick a folder for the run's files"]
    if not os.access(existing, os.W_OK | os.X_OK):
        return [f"output_dir {str(output_dir)!r} cannot be written ({existing} is read-only for this user); pick a folder "
                "you can write to"]
    return []


def data_problems(spec: dict[str, Any]) -> list[str]:
    """What stops a recipe's data section from giving rows: an unknown built-in, a missing, unreadable or empty file,
    a missing column. The file is read here, before any model loads."""
    from ..data.prepare import DatasetError, builtin_names, load_rows

    spec = dict(spec)
    if "builtin" in spec:
        return [] if spec["builtin"] in builtin_names() else [
            f"no built-in dataset {spec['builtin']!r}{did_you_mean(str(spec['builtin']), builtin_names())}; "
            f"available: {', '.join(builtin_names())}"]
    if "path" not in spec:
        return ["give path: <a .jsonl, .json or .csv file> or builtin: <name>"]
    try:
        rows = load_rows(spec["path"])
    except DatasetError as error:
        return [str(error)]
    columns = set(rows.column_names)
    wanted = ["prompt"] if spec.get("prepared") else [spec.get("question", "question")] + (
        [spec.get("answer", "answer")] if spec.get("answer", "answer") is not None else [])
    missing = [column for column in wanted if column not in columns]
    return [f"{spec['path']}: no column {column!r} (columns: {', '.join(sorted(columns))}); name the right one "
            f"({'question' if column == wanted[0] else 'answer'}: <column>)" for column in missing]


def numbers_from_text(overrides: dict[str, Any]) -> dict[str, Any]:
    """GRPOConfig values given as text read as the numbers their fields hold, as transformers' argument parser
    reads them: YAML 1.1 reads ``1e-5`` as text, and ``--set learning_rate=1e-5`` comes as text."""
    kinds = grpo_config_kinds()
    converted = dict(overrides)
    for key, value in overrides.items():
        kind = kinds.get(key)
        if isinstance(value, str) and kind in (int, float):
            try:
                converted[key] = kind(value)
            except ValueError:
                pass  # left as it is: the type check names it
    return converted


def read_yaml(path: Path) -> dict[str, Any]:
    """The mapping in a run YAML or ``run.yaml``; a file that is not one is a :class:`ConfigError` naming the file,
    and the line and column where YAML stopped reading it."""
    try:
        text = path.read_text(encoding="utf-8")
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        if isinstance(error, yaml.reader.ReaderError):  # a character YAML does not allow, at an offset
            before = text[: error.position]
            line, column = before.count("\n"), len(before) - before.rfind("\n") - 1
            problem = f"character {error.character!r} is not allowed"
        else:
            line, column = (mark.line, mark.column) if mark is not None else (None, None)
            problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        where = f"{path}, line {line + 1}, column {column + 1}" if line is not None else str(path)
        raise ConfigError(f"{where}: not valid YAML ({problem}); a run YAML is a mapping of settings, one "
                          "'key: value' per line") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not a text file ({error.reason} at byte {error.start}); a run YAML is UTF-8 text") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: a run YAML is a mapping of settings (model, dataset, rewards, ...), not a "
                          f"{type(document).__name__}")
    return document


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
    fields, kinds = grpo_config_fields(), grpo_config_kinds()
    problems = []
    for key, value in overrides.items():
        if key in REMOVED_FIELDS and not still_a_field(key):
            problems.append(f"{key}: {REMOVED_FIELDS[key]}")
        elif key not in fields and key in stack.CHANGED_FIELDS:
            problems.append(f"{key!r} is not a GRPOConfig option here: {stack.missing_field_reason(key)}")
        elif key not in fields:
            problems.append(f"{key!r} is not a GRPOConfig option{did_you_mean(key, fields)}")
        elif value is not None and key in kinds and not _of_kind(value, kinds[key]):
            wanted = {int: "a whole number", float: "a number", bool: "true or false"}[kinds[key]]
            problems.append(f"{key}={value!r}: give {wanted}")
    return problems


def _of_kind(value: Any, kind: type) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    return is_whole(value) if kind is int else is_number(value)


def grpo_config_kinds() -> dict[str, type]:
    """GRPOConfig's int, float and bool fields (optional ones included) and their type."""
    from trl import GRPOConfig

    kinds = {}
    for f in dataclasses.fields(GRPOConfig):
        options = [a for a in (typing.get_args(f.type) or (f.type,)) if a is not type(None)]
        if f.init and len(options) == 1 and options[0] in (int, float, bool):
            kinds[f.name] = options[0]
    return kinds


def _option_problems(o: dict[str, Any]) -> list[str]:
    """What GRPOConfig would accept but cannot train, or TRL would refuse only once the model is loaded."""
    problems = []
    g = o.get("num_generations", 8)
    if not isinstance(g, int) or g < 2:
        problems.append(f"num_generations={g!r}: GRPO compares completions within a group, so use 2 or more (4-16 is usual)")
        g = None
    steps = o.get("max_steps", -1)
    if steps is None or (is_whole(steps) and steps != -1 and steps < 1):
        problems.append(f"max_steps={steps!r}: give a positive number of steps, or -1 to train for num_train_epochs")
    for key, low, fix in (("per_device_train_batch_size", 1, "completions per device per step"),
                          ("gradient_accumulation_steps", 1, "steps to accumulate"), ("save_steps", 0, "steps between saves"),
                          ("logging_steps", 0, "steps between log lines"), ("num_train_epochs", 0, "epochs")):
        if is_number(o.get(key)) and not (o[key] >= low if low else o[key] > 0):
            problems.append(f"{key}={o[key]!r}: give the {fix}, {'1 or more' if low else 'more than 0'}")
    if is_number(o.get("temperature")) and o["temperature"] <= 0:
        problems.append(f"temperature={o['temperature']!r}: GRPO samples its groups, so give a temperature above 0 (1.0 is usual)")
    if is_whole(o.get("top_k")) and o["top_k"] < 0:
        problems.append(f"top_k={o['top_k']!r}: give how many of the likeliest tokens to sample from, or 0 (or -1) for all")
    if is_number(o.get("min_p")) and not 0 <= o["min_p"] <= 1:
        problems.append(f"min_p={o['min_p']!r}: give a probability from 0 to 1 (0.1 is usual), or null for none")
    if is_number(o.get("top_p")) and not 0 < o["top_p"] <= 1:
        problems.append(f"top_p={o['top_p']!r}: give a probability mass in (0, 1]")
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
    processes = int(os.environ.get("WORLD_SIZE", "1"))  # TRL counts every process's batch
    generation_batch = o.get("generation_batch_size") or per_device * processes * (o.get("steps_per_generation") or accumulation)
    if g and generation_batch % g:
        problems.append(
            f"the generation batch ({generation_batch} completions: per_device_train_batch_size={per_device}, "
            f"gradient_accumulation_steps={accumulation}{f', {processes} processes' if processes > 1 else ''}) "
            f"must be divisible by num_generations={g}: e.g. set "
            f"per_device_train_batch_size={g} or num_generations to a divisor of {generation_batch}"
        )
    optim = str(o.get("optim", ""))
    if "8bit" in optim and importlib.util.find_spec("bitsandbytes") is None:
        problems.append(f"optim={optim!r} needs bitsandbytes: pip install bitsandbytes, or set optim='adamw_torch'")
    import torch

    if not o.get("use_cpu") and not torch.cuda.is_available() and (o.get("bf16") or o.get("fp16")):
        cpu_presets = [name for name, values in TRAINING_PRESETS.items() if values.get("use_cpu")] + [TRL_PRESET]
        problems.append(f"this preset uses bf16/fp16, which needs a GPU, and none is available: use preset='{cpu_presets[0]}' "
                        f"(or 'auto', or '{TRL_PRESET}' for TRL's defaults)")
    return problems


def _config_problems(preset: str, overrides: dict[str, Any]) -> list[str]:
    problems = [] if preset_name(preset) in TRAINING_PRESETS else [
        f"unknown preset {preset!r}{did_you_mean(preset, TRAINING_PRESETS)}; choose one of {_presets()}"]
    ported = port_overrides(preset, overrides)
    problems += ported.problems + _field_problems(ported.overrides)
    return problems or _option_problems(preset_options(preset, ported.overrides))


def resolve_options(preset: str = "auto", **overrides: Any) -> dict[str, Any]:
    """The GRPOConfig keyword arguments for ``preset`` (its values, then ``overrides`` as :func:`port_overrides`
    translates them), checked as :meth:`RunSettings.validate` checks them: raises :class:`ConfigError` naming each
    option to change. ``max_prompt_length`` is no GRPOConfig field: train() drops the long prompts itself."""
    problems = _config_problems(preset, overrides)
    if problems:
        raise ConfigError("\n".join(problems))
    return preset_options(preset, port_overrides(preset, overrides).overrides)


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
