"""A run's settings, one typed shape for every way a run is described, and the one place they are checked.

``load_model``/``train`` keyword arguments, a recipe YAML, ``grpo-lite train --set`` flags and the ``run.yaml``
a run writes all become a :class:`RunSettings` (with its :class:`LoadSettings` and :class:`Heldout`), so none
of them can drop a setting the others keep, and :meth:`RunSettings.validate` checks all of them the same way,
before a model loads, naming every problem at once.

Each setting declares its shape (:mod:`grpo_lite.shapes`) beside its help text: a field's ``shape`` and the ``fix``
its message gives. GRPOConfig's fields take theirs from GRPOConfig's own types, narrowed by :data:`OPTION_RANGES`.
:meth:`RunSettings.problems` checks every value against its shape; what it checks beyond that is what one value
cannot say alone: settings that cannot go together, and whether the model, the data files, the output folder and the
rewards named exist.

    model: Qwen/Qwen2.5-1.5B-Instruct
    load: {max_seq_length: 1024, lora_rank: 32, ...}
    dataset: {path: train.jsonl, question: question, answer: answer}   # or just: dataset: train.jsonl
    rewards: [soft_xml_format_reward, numeric_correctness_reward]
    preset: auto
    reward_timeout: 600
    tool_timeout: 60
    heldout: {path: test.jsonl, question: question, answer: answer, n: 200, samples: 4}
    overrides: {max_steps: 200}
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib.util
import os
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rewards.combine import RewardSet
from rewards.registry import did_you_mean

from ..data.prepare import DATA_KEYS
from ..errors import UserError
from ..machine import stack
from ..shapes import AnyOf, Anything, Declared, Exactly, Flag, Kind, ListOf, Mapping, Number, Shape, Text, Whole, is_number, optional, problems, shown
from .files import RUN_FILE, earlier_run, folder_kind, held, record_change, whole_checkpoint
from .porting import REMOVED_FIELDS, port_overrides, still_a_field
from .presets import TRAINING_PRESETS, TRL_PRESET, preset_name, preset_options, preset_values
from .rollout_checks import rollout_problems

REWARD_TIMEOUT = 600.0  # seconds per reward call: far more than scoring a batch takes, short of losing a night
TOOL_TIMEOUT = 60.0  # seconds per tool call or environment reset: a game's move or a web request, with room to spare
ROLLOUT_TIMEOUT = 1800.0  # seconds per rollout function call: it generates a whole batch of episodes with the model
LORA_TARGET_MODULES = "all-linear"  # every linear layer but the output layer, whatever a family names them, and experts' parameters
BACKEND_CHOICES = ("auto", "unsloth", "transformers", "cpu")
RECORD_ONLY = ("chosen", "grpo_config")  # what run.yaml holds beyond the settings: never part of a recipe
ROLLOUT_OPTIONS = ("tools", "environment_factory", "rollout_func")  # what GRPOTrainer takes beyond one reply per prompt


class ConfigError(UserError, ValueError):
    """An invalid run setting; the message names each setting to change and how."""


def _setting(text: str, default: Any = dataclasses.MISSING, *, shape: Shape, fix: str | None = None):
    """A settings field: its help text (``grpo-lite train --help``), default, declared shape and the fix its message gives."""
    metadata = {"help": text, "declared": Declared(shape, fix)}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def declared(cls) -> dict[str, Declared]:
    """Each field of a settings class and its declared shape."""
    return {f.name: f.metadata["declared"] for f in dataclasses.fields(cls)}


def _unknown(values: dict[str, Any], known, where: str) -> list[str]:
    names = list(known)
    return [f"{where}: unknown setting {key!r}{did_you_mean(str(key), names)} (settings: {', '.join(names)})"
            for key in values if key not in names]


def _from_text(values: dict[str, Any], shapes: dict[str, Shape]) -> dict[str, Any]:
    """Values a run YAML or ``--set`` gives as text read as the numbers their shapes hold (:meth:`Shape.from_text`)."""
    return {key: shapes[key].from_text(value) if key in shapes else value for key, value in values.items()}


def _presets() -> str:
    return ", ".join(["auto", *TRAINING_PRESETS])


DATA_SPEC = Mapping(DATA_KEYS)  # a data section (dataset:, heldout:): where its rows come from, how prepare_dataset reads them
# What a run YAML's sections must be before they can be read at all; a plain path is a data section's file.
SECTION_FIXES = {
    "load": "give a mapping of load settings (e.g. {lora_rank: 16, max_seq_length: 1024})",
    "dataset": "give {builtin: arithmetic}, {path: data.jsonl, question: q, answer: a}, or the data file's path",
    "heldout": "give {path: test.jsonl, n: 200, samples: 4}, or the held-out data file's path",
    "overrides": "give a mapping of GRPOConfig field -> value (e.g. {max_steps: 200})",
}
DATA_SECTIONS = ("dataset", "heldout")
# The reward functions of a run: names, module:function or file.py:function references, functions, a RewardSet
REWARD = AnyOf((Text(), Kind((os.PathLike,), said="a path"), Kind((RewardSet,), callable=True, said="a function")))
REWARDS_SHAPE = AnyOf((REWARD, ListOf(REWARD)))  # empty only beside environments that score themselves (problems)
# A tool, an environment's factory or a rollout function: a module:function or file.py:function reference, or the thing
FUNCTION = AnyOf((Text(), Kind((os.PathLike,), said="a path"), Kind((), callable=True, said="a function or class")))
REFERENCE_FIX = "'module:function' or 'path/to/file.py:function' references (or the functions themselves)"


@dataclass
class LoadSettings:
    """How :func:`grpo_lite.load_model` loads the model: the ``load:`` section of a recipe."""

    backend: str = _setting("auto | unsloth | transformers | cpu: auto takes Unsloth on a CUDA GPU when installed", "auto",
                            shape=Text(among=BACKEND_CHOICES))
    max_seq_length: int = _setting("longest prompt + completion in tokens; a longer run is refused before training "
                                   "(Unsloth also sizes its RoPE cache and vLLM by it)", 2048,
                                   shape=Whole(low=1), fix="give the longest prompt + completion in tokens (e.g. 2048)")
    load_in_4bit: bool = _setting("4-bit base weights (bitsandbytes) under LoRA", True, shape=Flag())
    fast_inference: bool | str = _setting("generate through vLLM (Unsloth backend): true | false | auto", "auto",
                                          shape=AnyOf((Flag(), Exactly("auto"))))
    lora_rank: int | None = _setting("LoRA rank; null trains every weight", 16, shape=optional(Whole(low=1)),
                                     fix="give a LoRA rank of 1 or more (16 is usual), or null/None to train every weight")
    lora_alpha: int | None = _setting("LoRA alpha; null: 2 * lora_rank", None, shape=optional(Number(low=0, low_open=True)),
                                      fix="give a positive number, or null/None for 2 * lora_rank")
    target_modules: list[str] | str = _setting("layers LoRA adapts: all-linear (every linear layer but the output layer, fused "
                                               "ones like Phi's qkv_proj and experts kept as parameters included), or names "
                                               "(e.g. [q_proj, v_proj])",
                                               LORA_TARGET_MODULES,
                                               shape=AnyOf((Text(), ListOf(Text(), empty=False))),
                                               fix="give module names (e.g. [q_proj, v_proj]) or 'all-linear'")
    gpu_memory_utilization: float | str = _setting(
        "vLLM's share of the GPU with fast_inference; auto: what training leaves free, by the memory planner", "auto",
        shape=AnyOf((Exactly("auto"), Number(low=0, high=1, low_open=True, high_open=True))),
        fix="give vLLM's share of the GPU between 0 and 1 (e.g. 0.5), or auto")
    seed: int = _setting("seed of the LoRA adapters' initial weights", 3407, shape=Whole())
    # LoRA options that Unsloth's get_peft_model and PEFT's LoraConfig both take, with the default both give them
    lora_dropout: float = _setting("dropout on the LoRA path (Unsloth's kernels are fastest at 0)", 0.0,
                                   shape=Number(low=0, high=1, high_open=True),
                                   fix="give a dropout between 0 and 1 (e.g. 0.05), or 0 for none")
    bias: str = _setting("none | all | lora_only: which biases train", "none", shape=Text(among=("none", "all", "lora_only")),
                         fix="use none, all or lora_only")
    use_rslora: bool = _setting("rank-stabilized LoRA: scale by lora_alpha / sqrt(rank) instead of lora_alpha / rank", False,
                                shape=Flag())
    init_lora_weights: bool | str = _setting("LoRA's initial weights: true (B = 0), false, or a PEFT method (gaussian, pissa, "
                                             "olora, ...)", True, shape=AnyOf((Flag(), Text())),
                                             fix="use true, false or a PEFT method name (e.g. gaussian)")
    modules_to_save: list[str] | None = _setting("modules trained whole beside LoRA (e.g. [lm_head, embed_tokens])", None,
                                                 shape=optional(ListOf(Text())), fix="give module names (e.g. [lm_head]), or null")
    layers_to_transform: list[int] | int | None = _setting(
        "layer indices LoRA adapts; null: every layer", None,
        shape=optional(AnyOf((Whole(low=0), ListOf(Whole(low=0), empty=False)))),
        fix="give layer indices (e.g. [0, 1, 2]), or null for every layer")
    layers_pattern: str | None = _setting("name of the layer list, with layers_to_transform (e.g. layers)", None,
                                          shape=optional(Text()),
                                          fix="give the name of the model's layer list (e.g. layers), or null")
    ensure_weight_tying: bool | None = _setting("keep tied embedding and output weights tied in modules_to_save; null: Unsloth "
                                                "decides (PEFT: false)", None, shape=optional(Flag()))
    # Unsloth's FastVisionModel.get_peft_model options (unsloth/models/vision.py): which layers of a vision-language
    # model LoRA goes on; the language layers only by default, as Unsloth's vision GRPO notebooks pass
    finetune_vision_layers: bool = _setting("LoRA on a vision-language model's vision tower too", False, shape=Flag())
    finetune_language_layers: bool = _setting("LoRA on the language model's layers", True, shape=Flag())
    finetune_attention_modules: bool = _setting("LoRA on the attention layers", True, shape=Flag())
    finetune_mlp_modules: bool = _setting("LoRA on the MLP layers", True, shape=Flag())
    chat_template: str | None = _setting("the tokenizer's chat template: a Jinja string, or (with Unsloth) the name of one of "
                                         "its templates (chatml, qwen-2.5, llama-3.1, ...); null: the model's own", None,
                                         shape=optional(Text()), fix="give a Jinja template, a template name, or null")
    from_pretrained: dict[str, Any] = _setting("more keyword arguments for the backend's from_pretrained", {},
                                               shape=Mapping(), fix="give a mapping of keyword -> value")

    @classmethod
    def read(cls, values: dict[str, Any], where: str = "load") -> tuple[LoadSettings | None, list[str]]:
        """Settings from a recipe's ``load:`` mapping, with numbers given as text read as numbers; or None and the
        keys it does not know, naming the close ones."""
        unknown = _unknown(values, declared(cls), where)
        return (None, unknown) if unknown else (cls(**_from_text(values, declared(cls))), [])

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def problems(self) -> list[str]:
        """Every load setting that does not fit its declared shape, each with its fix."""
        return [p for name, shape in declared(type(self)).items() for p in problems(shape, getattr(self, name), name)]


@dataclass
class Heldout:
    """Rows evaluated before and after training, not trained on: the ``heldout:`` section of a recipe."""

    data: Any = _setting("where the rows come from, in the shapes of dataset (with an answer); from Python, a prepared "
                         "dataset", None, shape=AnyOf((DATA_SPEC, Anything())))
    n: int | None = _setting("how many held-out rows are evaluated; null: all", 200, shape=optional(Whole(low=1)),
                             fix="give how many held-out rows to evaluate (e.g. 200; heldout_n in train()), or null for all")
    samples: int = _setting("sampled completions per held-out row for pass@k; 1: greedy only", 1, shape=Whole(low=1),
                            fix="give the sampled completions per held-out row (1: greedy only; heldout_samples in train())")

    @classmethod
    def read(cls, values: dict[str, Any], where: str = "heldout") -> tuple[Heldout | None, list[str]]:
        """``{path: ..., question: ..., n: 200, samples: 4}``: the data's keys beside ``n`` and ``samples``; or None and
        the keys neither knows."""
        unknown = _unknown(values, [*DATA_KEYS, "n", "samples"], where)
        if unknown:
            return None, unknown
        values = _from_text(values, {**DATA_KEYS, **declared(cls)})
        options = {key: values.pop(key) for key in ("n", "samples") if key in values}
        return cls(data=values or None, **options), []

    def to_dict(self) -> dict[str, Any]:
        data = self.data if isinstance(self.data, dict) else {}
        return {**data, "n": self.n, "samples": self.samples}

    def problems(self) -> list[str]:
        """Every held-out setting that does not fit its declared shape; the data's keys are named as a recipe writes
        them, beside n and samples (``heldout.question``)."""
        found = [p for name, shape in declared(type(self)).items()
                 for p in problems(shape, getattr(self, name), "heldout" if name == "data" else f"heldout.{name}")]
        if self.data is None:
            found.append("heldout: give path: <a .jsonl, .json or .csv file> or builtin: <name> for the held-out rows")
        return found


def map_rollout_options(options: dict[str, Any], change: Callable[[Any, str], Any]) -> dict[str, Any]:
    """``options`` (tools, environment_factory, rollout_func: absent or None where not set) with ``change(item, where)``
    applied to each function or reference they hold: each tool, each environment of a dict, the one environment, the
    rollout function; ``where`` names it as a setting (``tools[0]``, ``environment_factory['numbers']``)."""
    changed: dict[str, Any] = {}
    for name in ROLLOUT_OPTIONS:
        value = options.get(name)
        if value is None:
            changed[name] = None
        elif name == "tools" and isinstance(value, list):
            changed[name] = [change(tool, f"tools[{i}]") for i, tool in enumerate(value)]
        elif isinstance(value, dict):
            changed[name] = {key: change(each, f"{name}[{key!r}]") for key, each in value.items()}
        else:
            changed[name] = change(value, name)
    return changed


def refuse_lacking_options(given: dict[str, Any]) -> None:
    """Raise :class:`ConfigError` where the installed TRL or transformers cannot run one of the rollout options ``given``
    (tools, environment_factory, rollout_func), naming the releases it needs and the stack that has them."""
    for name, value in given.items():
        option = "environment_factory (a dict)" if name == "environment_factory" and isinstance(value, dict) else name
        if (reason := stack.lacking(option)) is not None:
            lock = stack.pinned(stack.LOCK_STACK)
            raise ConfigError(f"{reason}: train on the latest stack (requirements/lock.txt: TRL {lock['trl']}, transformers "
                              f"{lock['transformers']})")


@dataclass
class RunSettings:
    """One GRPO run as a user asks for it: what a recipe YAML holds, what ``train()`` is given, what ``run.yaml``
    records."""

    model: str = _setting("a hub id, a local model folder, or 'tiny' (an offline random Qwen2)", shape=Text(),
                          fix="give a hub id, a local model folder, or 'tiny'")
    rewards: list[Any] = _setting("reward or preset names, module:function or path/to/file.py:function references of your own",
                                  shape=REWARDS_SHAPE,
                                  fix="give reward or preset names, 'module:function' or 'path/to/file.py:function' "
                                      "references, or functions, in a list (weights go in reward_weights)")
    dataset: dict[str, Any] | None = _setting("{builtin: arithmetic} | {path: data.jsonl, question: q, answer: a} | "
                                              "{path: dataset.jsonl, prepared: true} | data.jsonl; a run record has none",
                                              None, shape=optional(DATA_SPEC), fix=SECTION_FIXES["dataset"])
    load: LoadSettings | None = _setting("how the model is loaded (the load.* settings below); null: a model not loaded "
                                         "by load_model", None, shape=optional(Kind((LoadSettings,), said="load settings")),
                                         fix=SECTION_FIXES["load"])
    reward_weights: list[float] | None = _setting("one weight per reward function; null: all 1", None,
                                                  shape=optional(ListOf(Number(), empty=False)),
                                                  fix="give one number per reward function (e.g. [2.0, 0.5]), or null for all 1")
    preset: str = _setting(f"training preset ({_presets()}); auto picks one for this machine", "auto", shape=Text(),
                           fix=f"give a preset's name ({_presets()})")
    output_dir: str | None = _setting("where the run's files go; null: a fresh outputs/<model>-<n> for each run", None,
                                      shape=optional(AnyOf((Text(), Kind((os.PathLike,), said="a path")))),
                                      fix="give the folder for the run's files, or null for a fresh outputs/<model>-<n>")
    overwrite: bool = _setting("replace the earlier run in output_dir (its record, logs, checkpoints and weights); false: a "
                               "folder holding a run is refused", False, shape=Flag())
    reward_timeout: float | None = _setting("seconds one reward call may take before its batch scores None; null: no limit",
                                            REWARD_TIMEOUT, shape=optional(Number(low=0, low_open=True)),
                                            fix="give the seconds one reward call may take (e.g. 600), or null/None for no limit")
    tool_timeout: float | None = _setting("seconds one call of a tool, or of an environment's reset or method, may take before "
                                          "it is stopped and the model told the call failed; null: no limit", TOOL_TIMEOUT,
                                          shape=optional(Number(low=0, low_open=True)),
                                          fix="give the seconds one tool call may take (e.g. 60), or null/None for no limit")
    rollout_timeout: float | None = _setting("seconds one call of rollout_func (a whole batch of episodes) may take before the "
                                             "run stops with its checkpoint; null: no limit", ROLLOUT_TIMEOUT,
                                             shape=optional(Number(low=0, low_open=True)),
                                             fix="give the seconds one rollout_func call may take (e.g. 1800), or null/None "
                                                 "for no limit")
    chat_template_kwargs: dict[str, Any] | None = _setting(
        "keyword arguments for the chat template, in training and in every prompt after it (e.g. {enable_thinking: false} "
        "for Qwen3); null: none", None, shape=optional(Mapping()),
        fix="give a mapping of keyword -> value for the chat template (e.g. {enable_thinking: false}), or null")
    fold_system_prompt: bool = _setting("where the chat template rejects or drops a system turn (Gemma 2, Mistral v0.1, "
                                        "Phi-3-mini): true folds the system prompt into the first user turn, false refuses "
                                        "the data", True, shape=Flag(),
                                        fix="use true (fold the system prompt into the first user turn where the template has "
                                            "no system turn) or false (refuse such data)")
    heldout: Heldout | None = _setting("rows evaluated before and after training, not trained on (the heldout.* "
                                       "settings below); null: none", None,
                                       shape=optional(Kind((Heldout,), said="held-out settings")), fix=SECTION_FIXES["heldout"])
    tools: list[Any] | None = _setting("functions the model may call in a rollout, each result shown to it before it goes on "
                                       "(TRL's tools; the latest stack): references or functions; null: none", None,
                                       shape=optional(ListOf(FUNCTION, empty=False)),
                                       fix=f"give a list of {REFERENCE_FIX}, or null for none")
    environment_factory: Any = _setting("a class making one environment per rollout, reset(**row) before it, its methods the "
                                        "tools and its get_reward() a reward (TRL's environment_factory; the latest stack), "
                                        "or a mapping of name -> class each row picks by its environment column: references "
                                        "or classes; null: none", None, shape=optional(AnyOf((FUNCTION, Mapping()))),
                                        fix=f"give one of {REFERENCE_FIX}, or a mapping of environment name -> one, or null")
    rollout_func: Any = _setting("a function rollout_func(prompts, trainer) that plays each rollout itself (TRL's "
                                 "rollout_func; the latest stack): a reference or a function; null: none", None,
                                 shape=optional(FUNCTION), fix=f"give one of {REFERENCE_FIX}, or null for none")
    overrides: dict[str, Any] = _setting("trl.GRPOConfig fields: max_steps, num_generations, learning_rate, beta, ...", {},
                                         shape=Mapping(), fix=SECTION_FIXES["overrides"])

    @classmethod
    def from_dict(cls, values: dict[str, Any], where: str = "the run", *, section_where: str | None = None) -> RunSettings:
        """Settings from a recipe or ``run.yaml`` document; refuses, all at once, keys it does not know (naming the close
        ones), a missing model or rewards, and sections that are not mappings. A data section given as a plain path is
        its file (``dataset: train.jsonl`` is ``{path: train.jsonl}``); numbers given as text are read as the numbers
        their settings hold. ``section_where`` names the sections in messages (default: ``<where>: load``)."""
        values = {k: v for k, v in values.items() if k not in RECORD_ONLY}
        found = _unknown(values, declared(cls), where)
        found += [f"{where}: '{key}' is required" for key in ("model", "rewards") if values.get(key) is None
                  and not (key == "rewards" and values.get("environment_factory") is not None)]
        for key in DATA_SECTIONS:
            if isinstance(values.get(key), str):
                values[key] = {"path": values[key]}
        found += [f"{where}: {key}={shown(values[key])}: {fix}" for key, fix in SECTION_FIXES.items()
                  if values.get(key) is not None and not Mapping().fits(values[key])]
        if isinstance(values.get("load"), dict):
            values["load"], unknown = LoadSettings.read(values["load"], section_where or f"{where}: load")
            found += unknown
        if isinstance(values.get("heldout"), dict):
            values["heldout"], unknown = Heldout.read(values["heldout"], section_where or f"{where}: heldout")
            found += unknown
        if found:
            raise ConfigError("\n".join(found))
        if values.get("rewards") is None:
            values["rewards"] = []  # the environments' get_reward alone scores the episodes
        elif isinstance(values["rewards"], str):
            values["rewards"] = [values["rewards"]]  # one reward named alone
        values = _from_text(values, {k: v for k, v in declared(cls).items() if k not in ("load", "heldout")})
        values["overrides"] = numbers_from_text(values.get("overrides") or {})
        return cls(**values)

    def problems(self, *, model_loaded: bool = False, resume: bool = False) -> list[str]:
        """Every setting that cannot work, each with its fix; empty when the run can start. Nothing heavy is loaded:
        the model path, the output folder and the data files are looked at, not loaded (``model_loaded``: the
        model is in memory already, so its path is not checked; ``resume``: the run continues the one in output_dir)."""
        found, wrong = [], set()
        for name, shape in declared(type(self)).items():
            said = problems(shape, getattr(self, name), name)
            found += said
            wrong |= {name} if said else set()
        if isinstance(self.load, LoadSettings):
            found += [f"load.{problem}" for problem in self.load.problems()]
        if isinstance(self.heldout, Heldout):
            found += self.heldout.problems()
        if isinstance(self.overrides, dict) and "chat_template_kwargs" in self.overrides:
            found.append("chat_template_kwargs is a run setting, not only a GRPOConfig one (generate, evaluate and preview "
                         "render with it too): give it as train(chat_template_kwargs=...) or at the top of the run YAML")
        if not {"preset", "overrides"} & wrong:
            found += _config_problems(self.preset, self.overrides)
            beta = self.overrides.get("beta", preset_values(preset_name(self.preset)).get("beta", 0.0))
            if isinstance(self.load, LoadSettings) and self.load.bias != "none" and is_number(beta) and beta > 0:
                # TRL copies the LoRA config into a frozen "ref" adapter for the KL term, and PEFT trains biases in one
                # adapter only (peft/tuners/tuners_utils.py, BaseTuner._check_new_adapter_config)
                found.append(f"load.bias={self.load.bias!r} with beta={beta}: PEFT lets one adapter train biases, and the "
                             "KL term needs a second (TRL's reference adapter); use bias: none, or beta=0 (no KL)")
            if self.overrides.get("use_vllm") and importlib.util.find_spec("vllm") is None:  # asked for, not chosen by the run
                found.append("use_vllm=True needs vLLM, which is not installed: pip install 'grpo-lite[vllm]' on a GPU that "
                             "runs it, or leave use_vllm out (generation then goes through transformers)")
        if not model_loaded and "model" not in wrong:
            found += model_problems(self.model)
        if not {"output_dir", "overwrite"} & wrong:
            found += output_problems(self.output_dir, resume=resume, overwrite=self.overwrite)
        if isinstance(self.dataset, dict) and "dataset" not in wrong:
            found += [f"dataset: {problem}" for problem in data_problems(self.dataset)]
        if isinstance(self.heldout, Heldout) and isinstance(self.heldout.data, dict) and not self.heldout.problems():
            found += [f"heldout: {problem}" for problem in data_problems(self.heldout.data)]
        if not set(ROLLOUT_OPTIONS) & wrong:
            try:
                given = self.rollouts()
            except UserError as error:  # references that do not import, an option this stack lacks
                found += str(error).splitlines()
            else:  # what TRL would meet only once the trainer is built: an undocumented tool, two of one name, ...
                found += rollout_problems(given, scored_by_environments=self.rewards == [])
        if self.rollout_func is not None and isinstance(self.heldout, Heldout) and self.heldout.data is not None:
            found.append("heldout with rollout_func: held-out rows are played as replies or in TRL's tool loop, and a "
                         "rollout function plays its episodes only inside the trainer, sampling as it chooses; leave "
                         "heldout out, and see its episodes before training with preview(..., rollout_func=...)")
        if {"rewards", "overrides"} & wrong:
            return found
        try:
            funcs, _ = self.reward_functions()
        except UserError as error:  # an unknown name, a path that does not import, no **kwargs, none at all
            return found + [str(error)]
        weights = self.reward_weights if self.reward_weights is not None else self.overrides.get("reward_weights")
        if isinstance(weights, list) and len(weights) != len(funcs):
            names = [r if isinstance(r, str) else getattr(r, "__name__", repr(r)) for r in self.rewards]
            found.append(f"reward_weights has {len(weights)} values for the {len(funcs)} reward functions of {names}")
        return found

    def reward_functions(self) -> tuple[list[Any], list[float] | None]:
        """The reward functions and their weights (``rewards.resolve_rewards``: a preset name stands for several); none
        where the run's environments score their own episodes with ``get_reward()``, which TRL adds to them."""
        if self.rewards == []:
            if self.environment_factory is None:
                raise ConfigError("rewards is empty: give at least one reward function, or an environment_factory whose "
                                  "environments score their own episodes with get_reward()")
            return [], None
        from rewards import resolve_rewards

        return resolve_rewards(self.rewards)

    def rollouts(self) -> dict[str, Any]:
        """The tools, environment factories and rollout function the run gives TRL's trainer, each reference imported;
        only those set. Raises :class:`ConfigError` for a reference that does not import, naming its setting, and for an
        option the installed TRL or transformers lacks, naming the stack that has it; every reference at once."""
        from rewards.registry import import_reference

        unimported: list[str] = []

        def imported(value: Any, where: str) -> Any:
            value = os.fspath(value) if isinstance(value, os.PathLike) else value
            if not isinstance(value, str):
                return value
            if ":" not in value:  # a bare name, as a notebook names its own function
                unimported.append(f"{where} {value!r}: name it 'module:function' or 'path/to/file.py:function'; a function "
                                  "defined in a notebook has no name a run YAML can import: move it into a .py file beside "
                                  "the YAML")
                return None
            try:
                return import_reference(value, what=where)
            except UserError as error:
                unimported.append(str(error))
                return None

        imports = map_rollout_options(self.rollout_references(), imported)
        given = {name: value for name, value in imports.items() if value is not None}
        if unimported:
            raise ConfigError("\n".join(unimported))
        refuse_lacking_options(given)
        return given

    def rollout_references(self) -> dict[str, Any]:
        """The run's tools, environment_factory and rollout_func as given: references or the things themselves."""
        return {name: getattr(self, name) for name in ROLLOUT_OPTIONS}

    def validate(self, where: str = "the run", *, model_loaded: bool = False, resume: bool = False) -> RunSettings:
        """Raise :class:`ConfigError` listing every problem (:meth:`problems`), one per line; else return self."""
        found = self.problems(model_loaded=model_loaded, resume=resume)
        if found:
            raise ConfigError("\n".join(f"{where}: {problem}" for problem in found))
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain values, in field order, leaving out what is unset (a dataset and output_dir a record has none of)."""
        document = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        document["load"] = self.load.to_dict() if self.load is not None else None
        document["heldout"] = self.heldout.to_dict() if self.heldout is not None else None
        return {key: value for key, value in document.items()
                if not (value is None and key in ("dataset", "output_dir", "load", "reward_weights", "heldout",
                                                  "chat_template_kwargs", *ROLLOUT_OPTIONS))}

    def with_setting(self, setting: str) -> RunSettings:
        """This run with one ``KEY=VALUE`` (the value read as YAML) applied: ``load.X``, ``dataset.X``,
        ``heldout.X``, a run setting (``preset=t4-16gb``, ``dataset=train.jsonl``) or else a GRPOConfig field
        (``max_steps=50``), read and checked as a run YAML's are."""
        key, sep, raw = setting.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {setting!r}: write KEY=VALUE, e.g. --set max_steps=50")
        try:
            value = yaml.load(raw, Loader=RecipeLoader)
        except yaml.YAMLError as error:
            raise ConfigError(f"--set {key}: {raw!r} is not a YAML value ({getattr(error, 'problem', None) or error}); "
                              "quote text that holds ': ', '[' or '{'") from None
        document = self.to_dict()
        section, dot, name = key.partition(".")
        if dot and section in ("load", *DATA_SECTIONS):
            current = document.get(section)
            current = {"path": current} if isinstance(current, str) else dict(current or {})
            if section in DATA_SECTIONS and name in ("path", "builtin"):
                current.pop("builtin" if name == "path" else "path", None)  # a new source replaces the old one
            document[section] = {**current, name: value}
        elif dot:
            raise ConfigError(f"--set {key}: unknown section {section!r}{did_you_mean(section, ['load', *DATA_SECTIONS])}; "
                              "dotted settings are load.*, dataset.* and heldout.*, GRPOConfig fields have no dot")
        elif key in declared(type(self)):
            document[key] = value
        else:
            document["overrides"] = {**document.get("overrides", {}), key: value}
        return RunSettings.from_dict(document, f"--set {key}", section_where=f"--set {key}")


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")


def model_problems(model: str | os.PathLike) -> list[str]:
    """A local model folder that is not there, or a name that is neither a folder nor a hub id."""
    if not isinstance(model, (str, os.PathLike)):
        return [f"model={shown(model)}: give a hub id, a local model folder (text or a path), or 'tiny'"]
    model = os.fspath(model)
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


def output_problems(output_dir: str | os.PathLike | None, *, resume: bool = False, overwrite: bool = False,
                    owner: str = "run") -> list[str]:
    """An output folder that cannot be made or written (a file in its place or above it, a folder without write
    access), or that this writer does not own (:func:`~grpo_lite.run.files.folder_kind`): ``owner`` (a ``"run"``, or a
    ``train_stages`` ``"plan"``) writes into a new folder, or into one of its own kind that it continues (``resume``,
    which needs a whole checkpoint there) or replaces (``overwrite``), and into nothing else."""
    if resume and overwrite:
        return ["resume=True and overwrite=True together: resume continues the run in output_dir, overwrite replaces it; "
                "pick one"]
    if output_dir is None:
        if resume:
            return ["resume=True needs the run to continue: give its output_dir (--output-dir)"]
        processes = int(os.environ.get("WORLD_SIZE", "1"))
        return [f"output_dir: a run on {processes} processes needs one folder they all write to; give output_dir "
                "(--output-dir)"] if processes > 1 else []
    output_dir = Path(output_dir)
    existing = next(p for p in (output_dir, *output_dir.parents) if p.exists() or p == Path(p.anchor) or p == Path("."))
    if not existing.is_dir():
        where = "is a file" if existing == output_dir else f"cannot be made: {existing} is a file"
        return [f"output_dir {str(output_dir)!r} {where}; pick a folder for the run's files"]
    if not os.access(existing, os.W_OK | os.X_OK):
        return [f"output_dir {str(output_dir)!r} cannot be written ({existing} is read-only for this user); pick a folder "
                "you can write to"]
    kind = folder_kind(output_dir)
    if kind == "new":
        return []
    named = f"output_dir {str(output_dir)!r}"
    if kind.removeprefix("edited ") != owner:
        what = {"plan": "a train_stages plan", "other": "files no grpo-lite run wrote"}.get(kind, "a grpo-lite run")
        asked = (f" (resume=True finds no grpo-lite {owner} to continue there)" if resume else
                 f" (overwrite=True replaces only a grpo-lite {owner})" if overwrite else "")
        return [f"{named} holds {what} ({held(output_dir)}), and a {owner} writes only into a new or empty folder or one of "
                f"its own, so that nothing there is replaced{asked}: pick another output_dir (--output-dir), e.g. "
                f"{str(output_dir / owner)!r}"]
    if kind == "edited run" and resume:
        change = record_change(output_dir)
        return [f"{named}: its {RUN_FILE} was changed after the run wrote it{f': {change}' if change else ''}, so it no "
                "longer says what the checkpoint was trained with, and resuming would write over the change: undo the "
                "edit to resume, start the run over with overwrite=True, or pick another output_dir (--output-dir)"]
    if kind != "plan" and resume and whole_checkpoint(output_dir) is None:
        partial = sorted(path.name for path in output_dir.glob("checkpoint-*"))
        found = f"{', '.join(partial)} {'is' if len(partial) == 1 else 'are'} not whole" if partial else "it saved none"
        return [f"{named} holds a run with no complete checkpoint to resume from ({found}); resuming is refused rather "
                "than starting over on the run's files: start the run over with overwrite=True (its record, logs and "
                "weights are replaced), or pick another output_dir (--output-dir)"]
    if not resume and not overwrite:
        names = earlier_run(output_dir)
        listing = held(output_dir) if kind == "plan" else ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        return [f"{named} holds another {owner} ({listing}): continue it with resume=True (--resume), pick another "
                "output_dir (--output-dir), or replace it with overwrite=True (overwrite: true)"]
    return []


def data_problems(spec: dict[str, Any]) -> list[str]:
    """What stops a recipe's data section from giving rows: an unknown built-in, a missing, unreadable or empty file,
    a missing column, an empty prompt among prepared rows. The file is read here, before any model loads."""
    from ..data.prepare import (
        DatasetError,
        builtin_names,
        check_prompts,
        image_column,
        load_builtin,
        load_rows,
        prepare_dataset,
        unread_image_columns,
    )

    if "builtin" in spec and "path" in spec:
        return [f"both builtin: {spec['builtin']} and path: {spec['path']} given; keep the one the rows come from"]
    if spec.get("prepared") and set(spec) - {"path", "prepared"}:
        return [f"prepared: true rows are trained as they are from their file (path:), so "
                f"{', '.join(sorted(set(spec) - {'path', 'prepared'}))} cannot apply: drop them, or prepared: false to build "
                "the prompts from the question"]
    if "builtin" in spec:
        if spec["builtin"] not in builtin_names():
            return [f"no built-in dataset {spec['builtin']!r}{did_you_mean(str(spec['builtin']), builtin_names())}; "
                    f"available: {', '.join(builtin_names())}"]
        rows, where = load_builtin(spec["builtin"]), f"built-in {spec['builtin']}"
        columns = set(rows[0])
    elif "path" not in spec:
        return ["give path: <a .jsonl, .json or .csv file> or builtin: <name>"]
    else:
        try:
            rows = load_rows(spec["path"])
        except DatasetError as error:
            return [str(error)]
        where = spec["path"]
        columns = set(rows.column_names)
    if spec.get("prepared"):
        if "prompt" not in columns:
            return [f"{where}: no column 'prompt' (columns: {', '.join(sorted(columns))}); prepared rows carry their "
                    "prompts: give prepared: false and question: <column> to build them"]
        try:
            check_prompts(rows, source=spec["path"])
        except DatasetError as error:
            return [str(error)]
        return []
    wanted = {"question": spec.get("question", "question"), "answer": spec.get("answer", "answer")}
    missing = [f"{where}: no column {column!r} (columns: {', '.join(sorted(columns))}); name the right one ({role}: <column>)"
               for role, column in wanted.items() if column is not None and column not in columns]
    image_options = {key: spec[key] for key in ("image_column", "image_resize", "image_convert") if key in spec}
    images = image_options or image_column(list(columns)) or unread_image_columns(rows, sorted(columns - set(wanted.values())))
    if missing or not images:
        return missing
    try:  # every image is read and shaped as training will read it, so a bad one is named before the model loads
        prepare_dataset(spec.get("path", rows), question=wanted["question"], answer=wanted["answer"], **image_options)
    except DatasetError as error:
        return [str(error)]
    return []


def numbers_from_text(overrides: dict[str, Any]) -> dict[str, Any]:
    """GRPOConfig values given as text read as the numbers their fields hold, as transformers' argument parser
    reads them: YAML 1.1 reads ``1e-5`` as text, and ``--set learning_rate=1e-5`` comes as text. Text that is no
    finite number (``fast``, ``nan``) stays text, for the check to refuse."""
    return _from_text(overrides, grpo_config_shapes())


class RecipeLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping, which PyYAML would read as the last one."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *defaults" may be overridden, as YAML means it
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    given = key in seen
                except TypeError:  # a list as a key: PyYAML's own error names it below
                    continue
                if given:
                    raise DuplicateKey(None, None, f"{key!r} is given twice (first on line {seen[key] + 1}); keep one",
                                       key_node.start_mark)
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


class DuplicateKey(yaml.constructor.ConstructorError):
    """A mapping's key given a second time."""


def read_yaml(path: Path) -> dict[str, Any]:
    """The mapping in a run YAML or ``run.yaml``; a file that is not one, or gives a key twice, is a :class:`ConfigError`
    naming the file, and the line and column where YAML stopped reading it."""
    try:
        text = path.read_text(encoding="utf-8")
        document = yaml.load(text, Loader=RecipeLoader)
    except DuplicateKey as error:
        raise ConfigError(f"{path}, line {error.problem_mark.line + 1}: {error.problem}") from None
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


# The settings a run's command line also takes as flags (--reward-timeout, ...): the time limits of user code
TIME_LIMIT_SETTINGS = ("reward_timeout", "tool_timeout", "rollout_timeout")


def check_time_limit(setting: str, timeout: Any) -> None:
    """One of :data:`TIME_LIMIT_SETTINGS` alone, as a command-line flag gives it: a positive number of seconds, or None."""
    found = problems(declared(RunSettings)[setting], timeout, setting)
    if found:
        raise ConfigError(found[0])


def shape_of(annotation: Any) -> Shape:
    """The shape a field's type annotation declares: ``int`` a whole number, ``float`` a finite number, ``bool`` true or
    false, ``str`` text, an enum one of its values, unions, lists, mappings and literals of those; anything else any
    value."""
    if annotation is bool:
        return Flag()
    if annotation is int:
        return Whole()
    if annotation is float:
        return Number()
    if annotation is str:
        return Text(blank=True)
    if annotation is type(None):
        return Exactly(None)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return Text(among=tuple(str(member.value) for member in annotation))
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if any(isinstance(a, type) and issubclass(a, enum.Enum) for a in args):
            args = tuple(a for a in args if a is not str)  # an enum's values as text: TrainingArguments refuses the rest
        return AnyOf(tuple(shape_of(a) for a in args))
    if origin is typing.Literal:
        return AnyOf(tuple(Exactly(a) for a in args))
    if origin is list or annotation is list:
        return ListOf(shape_of(args[0]) if args else Anything())
    if origin is dict or annotation is dict:
        return Mapping()
    if isinstance(annotation, type) and annotation is not typing.Any:  # a class of its own: an instance of it
        return Kind((annotation,), said=f"a {annotation.__name__}")
    return Anything()


# What GRPOConfig's types allow but cannot train, declared beside them: a field -> its shape and the fix its message gives.
OPTION_RANGES: dict[str, Declared] = {
    "num_generations": Declared(Whole(low=2), "GRPO compares completions within a group, so use 2 or more (4-16 is usual)"),
    "max_steps": Declared(AnyOf((Exactly(-1), Whole(low=1))), "give a positive number of steps, or -1 to train for "
                          "num_train_epochs"),
    "per_device_train_batch_size": Declared(Whole(low=1), "give the completions per device per step, 1 or more"),
    "gradient_accumulation_steps": Declared(Whole(low=1), "give the steps to accumulate, 1 or more"),
    "save_steps": Declared(Number(low=0, low_open=True), "give the steps between saves, more than 0"),
    "logging_steps": Declared(Number(low=0, low_open=True), "give the steps between log lines, more than 0"),
    "num_train_epochs": Declared(Number(low=0, low_open=True), "give the epochs, more than 0"),
    "temperature": Declared(Number(low=0, low_open=True), "GRPO samples its groups, so give a temperature above 0 (1.0 is "
                            "usual)"),
    "top_k": Declared(Whole(low=0), "give how many of the likeliest tokens to sample from, or 0 (or -1) for all"),
    "min_p": Declared(optional(Number(low=0, high=1)), "give a probability from 0 to 1 (0.1 is usual), or null for none"),
    "top_p": Declared(Number(low=0, high=1, low_open=True), "give a probability mass in (0, 1]"),
    "beta": Declared(Number(low=0), "the KL coefficient must be >= 0 (0.04 is this toolkit's default, 0 disables KL)"),
    "learning_rate": Declared(Number(low=0, low_open=True), "the learning rate must be positive (5e-6 is a safe start)"),
    "max_completion_length": Declared(Whole(low=1), "give a positive number of tokens (e.g. 256)"),
}


def grpo_config_shapes() -> dict[str, Shape]:
    """Each GRPOConfig field's shape, read from its type annotation."""
    from trl import GRPOConfig

    return _config_shapes(GRPOConfig)


@functools.cache
def _config_shapes(config_class: type) -> dict[str, Shape]:
    """Shapes from the fields' types with their names resolved where each was declared: transformers 4.56 declares
    ``parallelism_config: Optional["ParallelismConfig"]``, a name that read as itself would allow any value, and
    ``TrainingArguments.to_dict`` then fails on a ``false`` (transformers/training_args.py)."""
    types_of = typing.get_type_hints(config_class)
    return {f.name: shape_of(types_of[f.name]) for f in dataclasses.fields(config_class) if f.init}


def _field_problems(overrides: dict[str, Any]) -> list[str]:
    """Each override that is no GRPOConfig field, or does not fit its type, then its range (:data:`OPTION_RANGES`)."""
    shapes = grpo_config_shapes()
    found = []
    for key, value in overrides.items():
        if key in REMOVED_FIELDS and not still_a_field(key):
            found.append(f"{key}: {REMOVED_FIELDS[key]}")
        elif key == "output_dir":  # the run's own setting, which it hands GRPOConfig itself
            found.append(f"output_dir={shown(value)} among the GRPOConfig fields: it is the run's own setting; give it at the "
                         "run's top level (output_dir: in a run YAML, --output-dir, train(output_dir=...))")
        elif key not in shapes and key in stack.CHANGED_FIELDS:
            found.append(f"{key!r} is not a GRPOConfig option here: {stack.missing_field_reason(key)}")
        elif key not in shapes:
            found.append(f"{key!r} is not a GRPOConfig option{did_you_mean(key, shapes)}")
        elif not shapes[key].fits(value):  # its type; a None it refuses is said by the range, which says what belongs
            found += problems(OPTION_RANGES[key] if value is None and key in OPTION_RANGES else shapes[key], value, key)
        elif key in OPTION_RANGES:  # a None its type allows too, where grpo-lite and TRL cannot train with one
            found += problems(OPTION_RANGES[key], value, key)
    return found


def _option_problems(o: dict[str, Any]) -> list[str]:
    """Options that cannot go together, or that this machine cannot train with, once each fits its shape."""
    found = []
    if o.get("bf16") and o.get("fp16"):
        found.append("bf16=True and fp16=True together: pick one (fp16 on a T4, bf16 on Ampere or newer)")
    if o.get("use_cpu") and (o.get("bf16") or o.get("fp16")):
        found.append("use_cpu=True with bf16/fp16: mixed precision needs a GPU; set bf16=False, fp16=False")
    g = o.get("num_generations", 8)
    per_device = o.get("per_device_train_batch_size", 8)
    accumulation = o.get("gradient_accumulation_steps", 1)
    processes = int(os.environ.get("WORLD_SIZE", "1"))  # TRL counts every process's batch
    generation_batch = o.get("generation_batch_size") or per_device * processes * (o.get("steps_per_generation") or accumulation)
    if generation_batch % g:
        steps = ("steps_per_generation", o["steps_per_generation"]) if o.get("steps_per_generation") else (
            "gradient_accumulation_steps", accumulation)
        made_of = (f"generation_batch_size={o['generation_batch_size']}" if o.get("generation_batch_size") else
                   f"per_device_train_batch_size={per_device}, {steps[0]}={steps[1]}"
                   f"{f', {processes} processes' if processes > 1 else ''}")
        found.append(
            f"the generation batch ({generation_batch} completions: {made_of}) must be divisible by num_generations={g}: "
            f"e.g. set {'generation_batch_size' if o.get('generation_batch_size') else 'per_device_train_batch_size'}={g} "
            f"or num_generations to a divisor of {generation_batch}"
        )
    optim = str(o.get("optim", ""))
    if "8bit" in optim and importlib.util.find_spec("bitsandbytes") is None:
        found.append(f"optim={optim!r} needs bitsandbytes: pip install bitsandbytes, or set optim='adamw_torch'")
    import torch

    if not o.get("use_cpu") and not torch.cuda.is_available() and (o.get("bf16") or o.get("fp16")):
        cpu_presets = [name for name, values in TRAINING_PRESETS.items() if values.get("use_cpu")] + [TRL_PRESET]
        found.append(f"this preset uses bf16/fp16, which needs a GPU, and none is available: use preset='{cpu_presets[0]}' "
                     f"(or 'auto', or '{TRL_PRESET}' for TRL's defaults)")
    return found


def _config_problems(preset: str, overrides: dict[str, Any]) -> list[str]:
    found = [] if preset_name(preset) in TRAINING_PRESETS else [
        f"unknown preset {preset!r}{did_you_mean(preset, TRAINING_PRESETS)}; choose one of {_presets()}"]
    ported = port_overrides(preset, overrides)
    found += ported.problems + _field_problems(ported.overrides)
    return found or _option_problems(preset_options(preset, ported.overrides))


def resolve_options(preset: str = "auto", **overrides: Any) -> dict[str, Any]:
    """The GRPOConfig keyword arguments for ``preset`` (its values, then ``overrides`` as :func:`port_overrides`
    translates them), checked as :meth:`RunSettings.validate` checks them: raises :class:`ConfigError` naming each
    option to change. ``max_prompt_length`` is no GRPOConfig field: train() cuts the long prompts itself."""
    found = _config_problems(preset, overrides)
    if found:
        raise ConfigError("\n".join(found))
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
