"""Options of Unsloth's ``from_pretrained`` that only Unsloth takes, and what becomes of them where Unsloth does not load.

A script written for Unsloth passes them to ``FastLanguageModel.from_pretrained`` or ``FastModel.from_pretrained``
(unsloth/models/loader.py); ``load_model`` hands its extra keywords to the backend's ``from_pretrained``, and
transformers fails on them deep in the model's constructor (``Qwen2ForCausalLM.__init__() got an unexpected keyword
argument 'offload_embedding'``, from Unsloth's gpt-oss notebook). On the Unsloth backend they go to Unsloth as written.
Elsewhere, :func:`for_backend` leaves out those that change how Unsloth runs (memory, speed, compilation, its vLLM
engine), each said in one line, and refuses, all at once and before the model loads, those that change what trains,
each with the ``load_model`` setting that asks for it. At Unsloth's own default they change nothing and are left out.
"""

from __future__ import annotations

from typing import Any

from ..log import logger
from ..run.settings import ConfigError

# option -> what it does under Unsloth; without Unsloth the run trains the same weights the same way
HOW_UNSLOTH_RUNS = {
    "offload_embedding": "keeps the input embedding in CPU memory",
    "float32_mixed_precision": "runs mixed precision in float32",
    "unsloth_tiled_mlp": "tiles the MLP for long contexts",
    "use_gradient_checkpointing": "sets Unsloth's gradient checkpointing (the run's gradient_checkpointing decides here)",
    "fix_tokenizer": "repairs known tokenizer defects",
    "use_exact_model_name": "maps a model name to Unsloth's own upload",
    "resize_model_vocab": "resizes the vocabulary",
    "device_map_planner_kwargs": "plans Unsloth's device map",
    "fullgraph": "compiles the model whole",
    "unsloth_force_compile": "forces Unsloth's compilation",
    "return_logits": "makes Unsloth's forward return logits",
    "random_state": "seeds Unsloth's loader (load_model's seed seeds the adapters)",
    "float8_kv_cache": "gives vLLM an fp8 KV cache",
    "max_lora_rank": "sizes vLLM's LoRA slots",
    "disable_log_stats": "quiets vLLM's statistics",
}
# option -> (Unsloth's default, the load_model setting that asks for the same): a value other than the default trains
# something else than a load_model run here would
WHAT_TRAINS = {
    "load_in_8bit": (False, "8-bit weights load through Unsloth only: load_in_4bit=True for 4-bit, False for full precision"),
    "load_in_16bit": (False, "pass load_in_4bit=False for 16-bit (on a CPU, fp32) weights under LoRA"),
    "load_in_fp8": (False, "fp8 weights load through Unsloth on a GPU only: load_in_4bit=True or False"),
    "full_finetuning": (False, "pass lora_rank=None (with load_in_4bit=False) to train every weight"),
    "qat_scheme": (None, "quantization-aware training runs through Unsloth on a GPU only: leave qat_scheme out"),
    "text_only": (False, "leave text_only out"),
    "auto_model": (None, "load_model picks the model class from the config (causal or image-text-to-text): leave "
                          "auto_model out"),
    "whisper_language": (None, "load_model loads causal language models: leave whisper_language out"),
    "whisper_task": (None, "load_model loads causal language models: leave whisper_task out"),
    "target_parameters": (None, "name the layers in target_modules"),
}


def for_backend(options: dict[str, Any], backend: str, *, load_in_4bit: bool) -> dict[str, Any]:
    """``options`` (``load_model``'s extra keywords) as ``backend``'s ``from_pretrained`` takes them: as they are for
    Unsloth; elsewhere without Unsloth's own options, each left out said, and a :class:`ConfigError` naming every one
    that would change what trains."""
    if backend == "unsloth":
        return dict(options)
    refused = []
    for name, value in options.items():
        if name in WHAT_TRAINS:
            default, fix = WHAT_TRAINS[name]
            same = value == default or (name == "load_in_16bit" and value is True and not load_in_4bit)
            if not same:
                refused.append(f"load_model: {name}={value!r} is an option of Unsloth's from_pretrained, and the {backend} "
                               f"backend loads without Unsloth: {fix}")
    if refused:
        raise ConfigError("\n".join(refused))
    kept = {}
    for name, value in options.items():
        if name in HOW_UNSLOTH_RUNS:
            logger.info(f"{name}={value!r}: Unsloth's from_pretrained option (it {HOW_UNSLOTH_RUNS[name]}); the {backend} "
                        "backend loads without Unsloth, so it is left out")
        elif name in WHAT_TRAINS:
            logger.info(f"{name}={value!r}: Unsloth's from_pretrained option, at its default; left out for the {backend} "
                        "backend, which loads without Unsloth")
        else:
            kept[name] = value
    return kept
