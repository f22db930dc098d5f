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
from .presets import TRAINING_PRESETS, TRL_PRESET, preset_name, preset_values

REWARD_TIMEOUT = 600.0  # seconds per reward call: far more than scoring a batch takes, short of losing a night
LORA_TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
BACKEND_CHOICES = ("auto", "unsloth", "transformers", "cpu")
RECORD_ONLY = ("chosen", "grpo_config")  # what run.yaml holds beyond the settings: never part of a recipe

# Fields a user's script still passes (TRL 0.x, transformers 4.x) whose meaning survives in TRL 1.15 / transformers 5.17:
# carried over, each with one line naming the new form. old name -> (new name or None when it is dropped, value map, why).
TRANSLATED_FIELDS: dict[str, tuple[str | None, Any, str]] = {
    "warmup_ratio": ("warmup_steps", None, "transformers 5 reads a warmup_steps float below 1 as a ratio of the steps"),
    "evaluation_strategy": ("eval_strategy", None, "transformers renamed it"),
    "no_cuda": ("use_cpu", None, "transformers renamed it"),
    "per_gpu_train_batch_size": ("per_device_train_batch_size", None, "transformers renamed it"),
    "per_gpu_eval_batch_size": ("per_device_eval_batch_size", None, "transformers renamed it"),
    "push_to_hub_token": ("hub_token", None, "transformers renamed it"),
    "include_inputs_for_metrics": ("include_for_metrics", lambda v: ["inputs"] if v else [], "transformers renamed it"),
    "max_new_tokens": ("max_completion_length", None, "GRPOConfig calls the tokens generated per completion so"),
    "max_prompt_length": ("max_prompt_tokens", None, "TRL removed it; long prompts are dropped before training instead"),
    "overwrite_output_dir": (None, None, "dropped: transformers 5 removed it and always writes into output_dir"),
    "use_mps_device": (None, None, "dropped: transformers 5 removed it and uses an Apple GPU (mps) by itself when there is one"),
}
# Removed fields whose meaning does not carry over for certain: refused, with the fix.
REMOVED_FIELDS = {
    "logging_dir": "transformers 5 removed it; TensorBoard writes under output_dir unless the TENSORBOARD_LOGGING_DIR "
                   "environment variable names another folder",
    "fp16_backend": "transformers removed it (and half_precision_backend); drop it: fp16=True uses torch's autocast",
    "half_precision_backend": "transformers 5 removed it; drop it: fp16=True or bf16=True uses torch's autocast",
    "vllm_device": "TRL removed it; vLLM runs in the training process (vllm_mode='colocate') or as a server "
                   "(vllm_mode='server', started with `trl vllm-serve`)",
    "use_liger_loss": "TRL removed it; drop it: TRL computes the GRPO loss through its own fused LM head, with no Liger loss",
    "vllm_guided_decoding_regex": "TRL removed it; vllm_structured_outputs_regex takes the regex that constrains generation",
    "wandb_log_unique_prompts": "TRL removed it; drop it (log_completions=True logs the completions)",
}


# vLLM's SamplingParams (Unsloth's GRPOConfig(vllm_sampling_params=...)) -> TRL's GRPOConfig generation settings.
# Unsloth 2026.10.9 lays the user's SamplingParams over TRL's, except seed, n, temperature, max_tokens and logprobs,
# which it never takes from it (unsloth/models/rl_replacements.py, grpo_update_SamplingParams): those are not carried.
SAMPLING_CARRIED = ("min_p", "top_p", "top_k", "repetition_penalty", "stop", "include_stop_str_in_output")
SAMPLING_UNUSED = ("seed", "n", "temperature", "max_tokens", "logprobs")
# vLLM's defaults: a setting at its default says nothing (top_k was -1 for off before vLLM 0.8, 0 since)
SAMPLING_DEFAULTS: dict[str, Any] = {
    "n": 1, "presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0, "temperature": 1.0, "top_p": 1.0,
    "top_k": 0, "min_p": 0.0, "seed": None, "stop": None, "stop_token_ids": None, "bad_words": None,
    "include_stop_str_in_output": False, "ignore_eos": False, "max_tokens": 16, "min_tokens": 0, "logprobs": None,
    "prompt_logprobs": None, "detokenize": True, "skip_special_tokens": True, "spaces_between_special_tokens": True,
    "logits_processors": None, "truncate_prompt_tokens": None, "output_text_buffer_length": 0, "output_kind": None,
    "guided_decoding": None, "structured_outputs": None, "logit_bias": None, "allowed_token_ids": None, "extra_args": None,
}


def sampling_values(params: Any) -> dict[str, Any]:
    """The settings a ``vllm_sampling_params`` holds beyond vLLM's defaults: a mapping (a run YAML) as it is; an object
    (``vllm.SamplingParams``, Unsloth's ``vLLMSamplingParams``) by the keywords it was made with where it kept them
    (``_set_kwargs``), else by its attributes that differ from a fresh one's (as Unsloth reads it)."""
    if isinstance(params, dict):
        return dict(params)
    if isinstance(getattr(params, "_set_kwargs", None), dict):
        return dict(params._set_kwargs)
    names = list(getattr(params, "__struct_fields__", ()) or vars(params))
    try:
        fresh = type(params)()
    except Exception:  # a stand-in that needs arguments: vLLM's own defaults
        fresh = None
    values = {}
    for name in names:
        if name.startswith("_") or name == "output_text_buffer_length":  # vLLM's own, derived from stop
            continue
        value = getattr(params, name, None)
        default = getattr(fresh, name, SAMPLING_DEFAULTS.get(name)) if fresh is not None else SAMPLING_DEFAULTS.get(name)
        if name == "top_k" and value in (-1, 0):
            continue
        if value != default and not (default is None and value in ([], (), "", False)):
            values[name] = value
    return values


def _port_sampling(params: Any, overrides: dict[str, Any], ported: Ported) -> None:
    """``vllm_sampling_params`` onto GRPOConfig's own fields, said in one line; what has no GRPOConfig form is refused."""
    if params is None:
        return
    try:
        values = sampling_values(params)
    except TypeError:  # no attributes to read: a number, a text
        ported.problems.append(f"vllm_sampling_params={params!r:.60}: give a vllm.SamplingParams or a mapping of its settings "
                               "(min_p: 0.1, top_k: -1, stop: [...], ...)")
        return
    mapped: dict[str, Any] = {}
    unused, problems = [], []
    stop = values.get("stop")
    stop = [stop] if isinstance(stop, str) else stop
    for key, value in values.items():
        if key in SAMPLING_UNUSED:
            unused.append(f"{key}={value!r}")
        elif key in ("min_p", "top_p", "repetition_penalty"):
            mapped[key] = value
        elif key == "top_k":
            mapped["top_k"] = 0 if value in (-1, 0, None) else value
        elif key == "stop":
            if stop and not (isinstance(stop, (list, tuple)) and all(isinstance(s, str) and s for s in stop)):
                problems.append(f"vllm_sampling_params stop={value!r}: give the stop strings as a list of text")
            elif stop:
                mapped["generation_kwargs"] = {**(overrides.get("generation_kwargs") or {}), "stop_strings": list(stop)}
        elif key == "include_stop_str_in_output":
            pass  # with stop, below
        else:
            problems.append(f"vllm_sampling_params {key}={value!r}: TRL's GRPOConfig has no setting it carries over to; drop it "
                            f"from the SamplingParams (carried over: {', '.join(SAMPLING_CARRIED)})")
    if stop and values.get("include_stop_str_in_output", False) is not True:
        problems.append(f"vllm_sampling_params stop={stop!r} with include_stop_str_in_output="
                        f"{values.get('include_stop_str_in_output', False)!r} (vLLM's default): grpo-lite stops at text the way "
                        "transformers does, keeping the stop string in the completion, on every backend; set "
                        "include_stop_str_in_output=True, as Unsloth's notebooks do, and let the rewards see it")
    for key, value in mapped.items():
        if key != "generation_kwargs" and key in overrides and overrides[key] != value:
            problems.append(f"vllm_sampling_params {key}={values.get(key)!r} and {key}={overrides[key]!r} both given: keep one")
    if isinstance(overrides.get("generation_kwargs"), dict) and "stop_strings" in overrides["generation_kwargs"] and stop:
        problems.append("vllm_sampling_params stop and generation_kwargs stop_strings both given: keep one")
    if problems:
        ported.problems += problems
        return
    ported.overrides.update(mapped)
    ported.translated["vllm_sampling_params"] = mapped or None
    carried = ", ".join(f"{key}={value!r}" for key, value in mapped.items())
    said = f"vllm_sampling_params -> {carried or 'nothing to carry over (every value is vLLM default)'}"
    if unused:
        said += f"; {', '.join(unused)} not carried: Unsloth's GRPOTrainer does not take seed, n, temperature, max_tokens " \
                "or logprobs from it either (GRPOConfig's temperature, seed and max_completion_length set them)"
    ported.notes.append(said)


@dataclass
class Ported:
    """A run's GRPOConfig overrides as the installed TRL and transformers read them: what the user wrote, translated
    (``TRANSLATED_FIELDS``) and with the batch raised to hold whole groups (:func:`port_overrides`)."""

    overrides: dict[str, Any]  # GRPOConfig fields only
    notes: list[str] = field(default_factory=list)  # one line per change, announced once by train()
    translated: dict[str, Any] = field(default_factory=dict)  # the user's field -> {its new form: value}, or None: dropped
    max_prompt_tokens: int | None = None  # from max_prompt_length: longer prompts are dropped before training
    adjusted: dict[str, Any] = field(default_factory=dict)  # fields grpo-lite changed from what was asked (the batch rule)
    asked: set[str] = field(default_factory=set)  # the GRPOConfig fields the user set, under their new names
    problems: list[str] = field(default_factory=list)


def _translation_problem(old: str, value: Any, overrides: dict[str, Any]) -> str | None:
    new = TRANSLATED_FIELDS[old][0]
    if new in overrides:
        return f"{old}={value!r} and {new}={overrides[new]!r} both given: {old} is the old name of {new}; keep {new}"
    if old == "warmup_ratio" and not (_number(value) and 0 <= value < 1):
        return f"warmup_ratio={value!r}: give a ratio of the steps from 0 to below 1 (it becomes warmup_steps={value!r})"
    if old == "max_prompt_length" and value is not None and (not _whole(value) or value < 1):
        return f"max_prompt_length={value!r}: give the longest prompt in tokens (e.g. 256), or null for no limit"
    return None


def port_overrides(preset: str, overrides: dict[str, Any]) -> Ported:
    """``overrides`` as TRL 1.15 reads what the user meant: renamed fields under their new names, removed ones dropped
    or carried out of the config (``max_prompt_length``), and the per-device batch raised where it cannot hold whole
    groups of ``num_generations``. Nothing is refused here except what cannot be translated; :func:`_config_problems`
    checks the rest."""
    ported = Ported(overrides={})
    for key, value in overrides.items():
        if key == "vllm_sampling_params":  # Unsloth's field: carried onto GRPOConfig's own (_port_sampling)
            continue
        if key == "top_k" and value == -1 and not isinstance(value, bool):  # vLLM's "off", which transformers refuses
            ported.overrides["top_k"] = 0
            ported.translated["top_k"] = {"top_k": 0}
            ported.notes.append("top_k=-1 -> top_k=0 (top_k: 0 in a run YAML): vLLM's -1 for no top-k filtering is 0 in "
                                "TRL's GRPOConfig")
            continue
        if key not in TRANSLATED_FIELDS:
            ported.overrides[key] = value
            continue
        new, convert, why = TRANSLATED_FIELDS[key]
        if (problem := _translation_problem(key, value, overrides)) is not None:
            ported.problems.append(problem)
            continue
        if new is None or value is None:  # a dropped field, or max_prompt_length=None: no limit, as before
            ported.translated[key] = None
            ported.notes.append(f"{key}={value!r}: {why}" if new is None else f"{key}=None: dropped (no limit, as before)")
            continue
        mapped = convert(value) if convert else value
        ported.translated[key] = {new: mapped}
        if new == "max_prompt_tokens":
            ported.max_prompt_tokens = mapped
            ported.notes.append(f"max_prompt_length={value!r} -> prompts over {mapped!r} tokens are dropped before training "
                                f"(prepare_dataset(..., tokenizer=tok, max_prompt_tokens={mapped!r}); dataset: "
                                f"{{max_prompt_tokens: {mapped!r}}} in a run YAML): TRL removed max_prompt_length")
        else:
            ported.overrides[new] = mapped
            ported.notes.append(f"{key}={value!r} -> {new}={mapped!r} ({new}: {mapped!r} in a run YAML): {why}")
    _port_sampling(overrides.get("vllm_sampling_params"), ported.overrides, ported)
    ported.asked = set(ported.overrides)
    _batch_rule(preset, ported)
    return ported


def _batch_rule(preset: str, ported: Ported) -> None:
    """Unsloth's rule, on every backend: where the generation batch cannot hold whole groups, the per-device batch
    becomes num_generations. Unsloth's generated GRPOConfig runs, before TRL's checks (unsloth 2026.10.9,
    unsloth/models/rl.py, lines 3588-3604, ``check_num_generations``):

        if steps_per_generation is None and generation_batch_size is None:
            ga = gradient_accumulation_steps
            world_size = int(os.environ.get('WORLD_SIZE', '1'))
            if (ga * world_size * per_device_train_batch_size) % num_generations != 0:
                print('Unsloth: We now expect `per_device_train_batch_size` * `gradient_accumulation_steps` * ...')
                per_device_train_batch_size = num_generations

    so Unsloth notebooks pass per_device_train_batch_size=1 with num_generations=6 or 8. A batch given with
    steps_per_generation or generation_batch_size is left as it is, and refused when it does not divide."""
    o = {**_options(preset, {}), **ported.overrides}
    g, per_device, accumulation = o.get("num_generations", 8), o.get("per_device_train_batch_size", 8), o.get("gradient_accumulation_steps", 1)
    if o.get("steps_per_generation") is not None or o.get("generation_batch_size") is not None:
        return
    if not (_whole(g) and _whole(per_device) and _whole(accumulation) and g >= 2 and per_device >= 1 and accumulation >= 1):
        return  # the validator names what is wrong
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    if (accumulation * processes * per_device) % g:
        ported.overrides["per_device_train_batch_size"] = g
        ported.adjusted["per_device_train_batch_size"] = g
        ported.notes.append(
            f"per_device_train_batch_size={per_device} -> {g}: the generation batch (per_device_train_batch_size x "
            f"gradient_accumulation_steps={accumulation} x {processes} process{'es' if processes > 1 else ''}) must hold "
            f"whole groups of num_generations={g}, so the batch is set to num_generations, as Unsloth's GRPOConfig does")


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
        if not _whole(self.max_seq_length) or self.max_seq_length < 1:
            found.append(f"max_seq_length={self.max_seq_length!r}: give the longest prompt + completion in tokens (e.g. 2048)")
        if not isinstance(self.load_in_4bit, bool):
            found.append(f"load_in_4bit={self.load_in_4bit!r}: use true or false")
        if self.fast_inference not in (True, False, "auto"):
            found.append(f"fast_inference={self.fast_inference!r}: use true, false or auto")
        if self.lora_rank is not None and (not _whole(self.lora_rank) or self.lora_rank < 1):
            found.append(f"lora_rank={self.lora_rank!r}: give a LoRA rank of 1 or more (16 is usual), or null/None to train "
                         "every weight")
        if self.lora_alpha is not None and (not _number(self.lora_alpha) or self.lora_alpha <= 0):
            found.append(f"lora_alpha={self.lora_alpha!r}: give a positive number, or null/None for 2 * lora_rank")
        modules = self.target_modules
        if not (isinstance(modules, str) or (isinstance(modules, list) and modules and all(isinstance(m, str) for m in modules))):
            found.append(f"target_modules={modules!r}: give module names (e.g. [q_proj, v_proj]) or 'all-linear'")
        share = self.gpu_memory_utilization
        if share != "auto" and (not _number(share) or not 0 < share < 1):
            found.append(f"gpu_memory_utilization={share!r}: give vLLM's share of the GPU between 0 and 1 (e.g. 0.5), or auto")
        if not _whole(self.seed):
            found.append(f"seed={self.seed!r}: give a whole number")
        if not _number(self.lora_dropout) or not 0 <= self.lora_dropout < 1:
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
        layers = [self.layers_to_transform] if _whole(self.layers_to_transform) else self.layers_to_transform
        if layers is not None and not (isinstance(layers, list) and layers and all(_whole(n) and n >= 0 for n in layers)):
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
            if self.load.bias != "none" and _number(beta) and beta > 0:
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


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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
        if key in REMOVED_FIELDS:
            problems.append(f"{key}: {REMOVED_FIELDS[key]}")
        elif key not in fields:
            problems.append(f"{key!r} is not a GRPOConfig option{did_you_mean(key, fields)}")
        elif value is not None and key in kinds and not _of_kind(value, kinds[key]):
            wanted = {int: "a whole number", float: "a number", bool: "true or false"}[kinds[key]]
            problems.append(f"{key}={value!r}: give {wanted}")
    return problems


def _of_kind(value: Any, kind: type) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    return _whole(value) if kind is int else _number(value)


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
    if steps is None or (_whole(steps) and steps != -1 and steps < 1):
        problems.append(f"max_steps={steps!r}: give a positive number of steps, or -1 to train for num_train_epochs")
    for key, low, fix in (("per_device_train_batch_size", 1, "completions per device per step"),
                          ("gradient_accumulation_steps", 1, "steps to accumulate"), ("save_steps", 0, "steps between saves"),
                          ("logging_steps", 0, "steps between log lines"), ("num_train_epochs", 0, "epochs")):
        if _number(o.get(key)) and not (o[key] >= low if low else o[key] > 0):
            problems.append(f"{key}={o[key]!r}: give the {fix}, {'1 or more' if low else 'more than 0'}")
    if _number(o.get("temperature")) and o["temperature"] <= 0:
        problems.append(f"temperature={o['temperature']!r}: GRPO samples its groups, so give a temperature above 0 (1.0 is usual)")
    if _whole(o.get("top_k")) and o["top_k"] < 0:
        problems.append(f"top_k={o['top_k']!r}: give how many of the likeliest tokens to sample from, or 0 (or -1) for all")
    if _number(o.get("min_p")) and not 0 <= o["min_p"] <= 1:
        problems.append(f"min_p={o['min_p']!r}: give a probability from 0 to 1 (0.1 is usual), or null for none")
    if _number(o.get("top_p")) and not 0 < o["top_p"] <= 1:
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


def trl_defaults() -> dict[str, Any]:
    """TRL's own GRPOConfig defaults, read from TRL's class even where Unsloth's generated subclass replaced
    ``trl.GRPOConfig`` (its defaults differ: docs/architecture.md)."""
    from trl import GRPOConfig

    cls = next(c for c in GRPOConfig.__mro__ if c.__module__.startswith("trl."))
    defaults = {}
    for f in dataclasses.fields(cls):
        if f.init:
            defaults[f.name] = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
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


def _options(preset: str, overrides: dict[str, Any]) -> dict[str, Any]:
    name = preset_name(preset)
    return {**preset_values(name), **machine_values(name), **overrides}


def _config_problems(preset: str, overrides: dict[str, Any]) -> list[str]:
    problems = [] if preset_name(preset) in TRAINING_PRESETS else [
        f"unknown preset {preset!r}{did_you_mean(preset, TRAINING_PRESETS)}; choose one of {_presets()}"]
    ported = port_overrides(preset, overrides)
    problems += ported.problems + _field_problems(ported.overrides)
    return problems or _option_problems(_options(preset, ported.overrides))


def resolve_options(preset: str = "auto", **overrides: Any) -> dict[str, Any]:
    """The GRPOConfig keyword arguments for ``preset`` (its values, then ``overrides`` as :func:`port_overrides`
    translates them), checked as :meth:`RunSettings.validate` checks them: raises :class:`ConfigError` naming each
    option to change. ``max_prompt_length`` is no GRPOConfig field: train() drops the long prompts itself."""
    problems = _config_problems(preset, overrides)
    if problems:
        raise ConfigError("\n".join(problems))
    return _options(preset, port_overrides(preset, overrides).overrides)


def option_sources(preset: str, ported: Ported, chosen: dict[str, Any] | None = None) -> dict[str, str]:
    """Where each GRPOConfig value a run trains with came from: ``user`` (asked for, translated ones included),
    ``batch rule`` (:func:`_batch_rule`), ``machine`` (what this machine needs: vLLM's engine, a trl run on a CPU),
    ``preset`` (its values and grpo-lite's BASE), else ``trl`` (TRL's default)."""
    name = preset_name(preset)
    sources = dict.fromkeys(trl_defaults(), "trl")
    sources.update(dict.fromkeys(preset_values(name), "preset"))
    sources.update(dict.fromkeys(machine_values(name), "preset"))  # TRL's values, pinned against Unsloth's class
    sources.update(dict.fromkeys([*cpu_values(name), *(chosen or {})], "machine"))
    sources.update(dict.fromkeys(ported.overrides, "user"))
    sources.update(dict.fromkeys(ported.adjusted, "batch rule"))
    return sources


def preset_changes(preset: str, ported: Ported, options: dict[str, Any], sources: dict[str, str]) -> list[tuple[str, Any, Any, str]]:
    """(field, TRL's default, the value used, why) for each field the user did not set whose value differs from TRL's
    GRPOConfig default: what train() says first."""
    from .presets import preset_reason

    name, defaults = preset_name(preset), trl_defaults()
    rows = []
    for key, value in options.items():
        source = sources.get(key)
        if key in ported.asked or source is None or key not in defaults or value == defaults[key]:
            continue
        why = {"machine": "this machine", "batch rule": "whole groups of num_generations"}.get(source) or preset_reason(name, key)
        if key in cpu_values(name):
            why = "no GPU here: TRL's bf16=None means bf16, which needs one"
        elif source == "machine":
            why = "this machine's model carries a vLLM engine"
        rows.append((key, defaults[key], value, why))
    return rows


def changes_table(rows: list[tuple[str, Any, Any, str]], preset: str) -> str:
    """The rows of :func:`preset_changes` as one short table, or one line when the run trains with TRL's defaults."""
    name = preset_name(preset)
    if not rows:
        return f"preset {name}: every GRPOConfig value you did not set is TRL's default"
    width = [max(len(str(row[i])) for row in [("field", "TRL default", "used", "why"), *rows]) for i in range(3)]
    head = (f"preset {name}: TRL's GRPOConfig defaults, except:" if name == TRL_PRESET else
            f"preset {name} changes {len(rows)} of TRL's GRPOConfig defaults you did not set (preset='{TRL_PRESET}' keeps them):")
    lines = [head,
             f"  {'field':<{width[0]}}  {'TRL default':<{width[1]}}  {'used':<{width[2]}}  why"]
    lines += [f"  {key:<{width[0]}}  {default!s:<{width[1]}}  {value!s:<{width[2]}}  {why}" for key, default, value, why in rows]
    return "\n".join(lines)


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
