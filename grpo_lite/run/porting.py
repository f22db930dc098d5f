"""What a user's GRPO code meant, carried over to the installed TRL and transformers.

Scripts written for older TRL and transformers, Unsloth's notebooks and open-r1's recipes pass fields that were
renamed or removed, vLLM's sampling parameters, and batches Unsloth fixes by itself. :func:`port_overrides` carries
over what is unambiguous, each change in one announced line, and leaves the rest to the validator
(:meth:`grpo_lite.run.settings.RunSettings.problems`) to refuse with its fix; :func:`preset_changes` says which
values a preset changed from TRL's defaults. A field the installed TRL or transformers still has (``warmup_ratio`` on
transformers 4, ``max_prompt_length`` on TRL 0.22) keeps the meaning it has there: it is passed on as written
(grpo_lite/machine/stack.py says which release removed each).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..machine import stack
from ..shapes import is_number, is_whole
from .presets import TRL_PRESET, cpu_values, machine_values, preset_name, preset_options, preset_values, trl_defaults, unavailable_values

# Fields a user's script still passes (TRL 0.x, transformers 4.x) whose meaning survives in TRL 1.15 / transformers 5.17:
# where the installed release has removed them (still_a_field), carried over, each with one line naming the new form.
# old name -> (new name or None when it is dropped, value map, why).
TRANSLATED_FIELDS: dict[str, tuple[str | None, Any, str]] = {
    "warmup_ratio": ("warmup_steps", None, "transformers 5 reads a warmup_steps float below 1 as a ratio of the steps"),
    "evaluation_strategy": ("eval_strategy", None, "transformers renamed it"),
    "no_cuda": ("use_cpu", None, "transformers renamed it"),
    "per_gpu_train_batch_size": ("per_device_train_batch_size", None, "transformers renamed it"),
    "per_gpu_eval_batch_size": ("per_device_eval_batch_size", None, "transformers renamed it"),
    "push_to_hub_token": ("hub_token", None, "transformers renamed it"),
    "include_inputs_for_metrics": ("include_for_metrics", lambda v: ["inputs"] if v else [], "transformers renamed it"),
    "max_new_tokens": ("max_completion_length", None, "GRPOConfig calls the tokens generated per completion so"),
    "max_prompt_length": ("cut_prompts_to", None, "TRL removed it; grpo-lite cuts long prompts on the left as TRL did"),
    "overwrite_output_dir": (None, None, "dropped: transformers 5 removed it and always writes into output_dir"),
    "use_mps_device": (None, None, "dropped: transformers 5 removed it and uses an Apple GPU (mps) by itself when there is one"),
}
# Removed fields whose meaning does not carry over for certain: refused, with the fix, where the installed release lacks them.
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
    cut_prompts_to: int | None = None  # from max_prompt_length: train() cuts longer prompts to their last this many tokens
    adjusted: dict[str, Any] = field(default_factory=dict)  # fields grpo-lite changed from what was asked (the batch rule)
    asked: set[str] = field(default_factory=set)  # the GRPOConfig fields the user set, under their new names
    problems: list[str] = field(default_factory=list)


def still_a_field(name: str) -> bool:
    """Whether ``name``, an old field of TRANSLATED_FIELDS or REMOVED_FIELDS, is a field of the installed GRPOConfig."""
    return name in stack.CHANGED_FIELDS and stack.has_config_field(name)


def _value_problem(old: str, value: Any) -> str | None:
    """What is wrong with the value of an old field, whether it is carried over or the installed release still has it."""
    if old == "warmup_ratio" and not (is_number(value) and 0 <= value < 1):
        return f"warmup_ratio={value!r}: give a ratio of the steps from 0 to below 1"
    if old == "max_prompt_length" and value is not None and (not is_whole(value) or value < 1):
        return f"max_prompt_length={value!r}: give the longest prompt in tokens (e.g. 256), or null for no limit"
    return None


def _translation_problem(old: str, value: Any, overrides: dict[str, Any]) -> str | None:
    new = TRANSLATED_FIELDS[old][0]
    if new in overrides:
        return f"{old}={value!r} and {new}={overrides[new]!r} both given: {old} is the old name of {new}; keep {new}"
    return _value_problem(old, value)


def port_overrides(preset: str, overrides: dict[str, Any]) -> Ported:
    """``overrides`` as the installed TRL reads what the user meant: renamed fields under their new names, removed ones dropped
    or carried out of the config (``max_prompt_length``, which train() applies itself), and the per-device batch raised
    where it cannot hold whole groups of ``num_generations``. Nothing is refused here except what cannot be translated; :func:`_config_problems`
    checks the rest."""
    ported = Ported(overrides={})
    both = [(old, new) for old, new in stack.RENAMED_FIELDS.items() if old in overrides and new in overrides]
    ported.problems += [f"{old}={overrides[old]!r} and {new}={overrides[new]!r} both given: {old} is the old name of {new}; "
                        f"keep {new}" for old, new in both]
    for key, value in overrides.items():
        if key == "vllm_sampling_params" or any(key in pair for pair in both):  # _port_sampling; refused above
            continue
        if (read := stack.field_name(key)) != key:
            _port_renamed(key, read, value, ported)
            continue
        if key == "top_k" and value == -1 and not isinstance(value, bool):  # vLLM's "off", which transformers refuses
            ported.overrides["top_k"] = 0
            ported.translated["top_k"] = {"top_k": 0}
            ported.notes.append("top_k=-1 -> top_k=0 (top_k: 0 in a run YAML): vLLM's -1 for no top-k filtering is 0 in "
                                "TRL's GRPOConfig")
            continue
        if key not in TRANSLATED_FIELDS or still_a_field(key):
            if (problem := _value_problem(key, value)) is not None:
                ported.problems.append(problem)
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
        if new == "cut_prompts_to":
            ported.cut_prompts_to = mapped
            ported.notes.append(f"max_prompt_length={value!r} -> a prompt over {mapped!r} tokens, as the chat template renders "
                                f"it, is cut to its last {mapped!r} for generation and training, as TRL before 0.28 cut it: "
                                "TRL removed max_prompt_length")
        else:
            ported.overrides[new] = mapped
            ported.notes.append(f"{key}={value!r} -> {new}={mapped!r} ({new}: {mapped!r} in a run YAML): {why}")
    _port_sampling(overrides.get("vllm_sampling_params"), ported.overrides, ported)
    ported.asked = set(ported.overrides)
    _batch_rule(preset, ported)
    return ported


def _port_renamed(key: str, read: str, value: Any, ported: Ported) -> None:
    """A field of :data:`grpo_lite.machine.stack.RENAMED_FIELDS` under the name the installed transformers reads, said."""
    release = f"transformers {stack.installed('transformers')}"
    if read in stack.RENAMED_FIELDS.values():
        why = f"{release} reads {read}, and {key}, its old name, only where {read} is unset"
    else:
        why = f"{release} calls it {read}; {key} is its name from transformers {stack.DIFFERENCES[key].since}"
    ported.overrides[read] = value
    ported.translated[key] = {read: value}
    ported.notes.append(f"{key}={value!r} -> {read}={value!r} ({read}: {value!r} in a run YAML): {why}")


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
    o = {**preset_options(preset, {}), **ported.overrides}
    g, per_device, accumulation = o.get("num_generations", 8), o.get("per_device_train_batch_size", 8), o.get("gradient_accumulation_steps", 1)
    if o.get("steps_per_generation") is not None or o.get("generation_batch_size") is not None:
        return
    if not (is_whole(g) and is_whole(per_device) and is_whole(accumulation) and g >= 2 and per_device >= 1 and accumulation >= 1):
        return  # the validator names what is wrong
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    if (accumulation * processes * per_device) % g:
        ported.overrides["per_device_train_batch_size"] = g
        ported.adjusted["per_device_train_batch_size"] = g
        ported.notes.append(
            f"per_device_train_batch_size={per_device} -> {g}: the generation batch (per_device_train_batch_size x "
            f"gradient_accumulation_steps={accumulation} x {processes} process{'es' if processes > 1 else ''}) must hold "
            f"whole groups of num_generations={g}, so the batch is set to num_generations, as Unsloth's GRPOConfig does")


def option_sources(preset: str, ported: Ported, chosen: dict[str, Any] | None = None) -> dict[str, str]:
    """Where each GRPOConfig value a run trains with came from: ``user`` (asked for, translated ones included),
    ``batch rule`` (:func:`_batch_rule`), ``machine`` (what this machine needs: vLLM's engine, a trl run on a CPU),
    ``preset`` (its values and grpo-lite's BASE), else ``trl`` (TRL's default)."""
    name = preset_name(preset)
    sources = dict.fromkeys(trl_defaults(), "trl")
    sources.update(dict.fromkeys(preset_values(name, ported.overrides), "preset"))
    sources.update(dict.fromkeys(machine_values(name), "preset"))  # TRL's values, pinned against Unsloth's class
    sources.update(dict.fromkeys([*cpu_values(name), *(chosen or {})], "machine"))
    sources.update(dict.fromkeys(ported.overrides, "user"))
    sources.update(dict.fromkeys(ported.adjusted, "batch rule"))
    return sources


def preset_changes(preset: str, ported: Ported, options: dict[str, Any], sources: dict[str, str]) -> list[tuple[str, Any, Any, str]]:
    """(field, TRL's default, the value used, why) for each field the user did not set whose value differs from TRL's
    GRPOConfig default, and for each value the preset sets that the installed GRPOConfig has no field for: what
    train() says first."""
    from .presets import preset_reason

    name, defaults = preset_name(preset), trl_defaults()
    rows = [(key, "(no such field)", "not set", f"the preset's {value!r} cannot apply: {stack.missing_field_reason(key)}")
            for key, value in unavailable_values(name).items()]
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
