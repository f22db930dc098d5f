"""load_model(): pick the backend that can work here, load the model, attach LoRA.

Backends, best first:
- ``unsloth``: a CUDA GPU and Unsloth installed. 4-bit weights, Unsloth's gradient checkpointing, vLLM
  generation with ``fast_inference=True``.
- ``transformers``: a CUDA GPU. transformers + PEFT LoRA, 4-bit through bitsandbytes when installed.
- ``cpu``: no GPU. fp32, no quantization (bitsandbytes 4-bit needs CUDA); for tiny models and tests.

Unsloth patches transformers, TRL and PEFT when it is imported, so it must come first: this module
imports it (only when it is chosen) before anything imports trl.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, replace
from typing import Any

from .log import logger

LORA_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
BACKENDS = ("auto", "unsloth", "transformers", "cpu")


class BackendError(RuntimeError):
    """The requested backend cannot work on this machine; the message names what is missing."""


@dataclass(frozen=True)
class Backend:
    """Which backend loaded the model, and why. Read it as ``model.grpo_lite_backend``."""

    name: str
    reason: str
    load_in_4bit: bool
    fast_inference: bool
    gpu_memory_utilization: float | None = None  # vLLM's share of the GPU, with fast_inference

    def __str__(self) -> str:
        return f"{self.name} ({self.reason})"


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def choose_backend(backend: str = "auto", *, load_in_4bit: bool = True, fast_inference: bool = False) -> Backend:
    """Decide the backend without loading anything; raises :class:`BackendError` for one that cannot work."""
    if backend not in BACKENDS:
        raise BackendError(f"backend={backend!r} is not one of {BACKENDS}")
    cuda = _cuda_available()
    has_unsloth, has_bnb, has_vllm = _installed("unsloth"), _installed("bitsandbytes"), _installed("vllm")

    if backend == "unsloth":
        if not cuda:
            raise BackendError(
                "backend='unsloth' needs a CUDA GPU, and torch.cuda.is_available() is False here. "
                "Use backend='auto' (CPU on this machine) or run on a GPU runtime."
            )
        if not has_unsloth:
            raise BackendError("backend='unsloth' needs Unsloth: pip install 'grpo-lite[unsloth]'")
    if backend == "transformers" and fast_inference:
        raise BackendError("fast_inference=True (vLLM generation) works through backend='unsloth' only")
    if fast_inference and not has_vllm and backend in ("unsloth", "auto") and cuda and has_unsloth:
        raise BackendError("fast_inference=True needs vLLM: pip install 'grpo-lite[vllm]'")

    if backend == "cpu" or (backend == "auto" and not cuda):
        why = "requested" if backend == "cpu" else "no CUDA GPU found (torch.cuda.is_available() is False)"
        return Backend("cpu", f"{why}; fp32 weights, no 4-bit quantization", False, False)
    if backend == "unsloth" or (backend == "auto" and has_unsloth):
        why = "requested" if backend == "unsloth" else "CUDA GPU and Unsloth installed"
        return Backend("unsloth", why, load_in_4bit, fast_inference)
    if backend == "transformers" and not cuda:
        return Backend("transformers", "requested; no CUDA GPU, so fp32 on CPU without 4-bit", False, False)
    quantized = load_in_4bit and has_bnb
    why = "requested" if backend == "transformers" else "CUDA GPU, Unsloth not installed"
    if load_in_4bit and not has_bnb:
        why += "; bitsandbytes not installed, so 16-bit weights (pip install bitsandbytes for 4-bit)"
    return Backend("transformers", why, quantized, False)


def load_model(
    model_name: str,
    *,
    max_seq_length: int = 2048,
    load_in_4bit: bool = True,
    fast_inference: bool = False,
    lora_rank: int | None = 16,
    lora_alpha: int | None = None,
    target_modules: str | tuple[str, ...] | list[str] = LORA_TARGET_MODULES,
    gpu_memory_utilization: float = 0.5,
    backend: str = "auto",
    seed: int = 3407,
    **model_kwargs: Any,
):
    """Load ``model_name`` (hub id or local folder) with LoRA adapters ready for GRPO.

    Returns ``(model, tokenizer)``; ``model.grpo_lite_backend`` says which backend was used and why.
    ``lora_rank=None`` trains all weights (no LoRA). ``lora_alpha`` defaults to ``2 * lora_rank``.
    Extra keyword arguments go to the backend's ``from_pretrained``.
    """
    choice = choose_backend(backend, load_in_4bit=load_in_4bit, fast_inference=fast_inference)
    if choice.fast_inference:
        choice = replace(choice, gpu_memory_utilization=gpu_memory_utilization)
    logger.info(f"backend={choice}")
    alpha = lora_alpha if lora_alpha is not None else 2 * (lora_rank or 0)
    if choice.name == "unsloth":
        model, tokenizer = _load_unsloth(
            model_name, choice, max_seq_length, lora_rank, alpha, target_modules, gpu_memory_utilization, seed, model_kwargs
        )
    else:
        model, tokenizer = _load_transformers(model_name, choice, lora_rank, alpha, target_modules, model_kwargs)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.grpo_lite_backend = choice
    return model, tokenizer


def _load_unsloth(model_name, choice, max_seq_length, lora_rank, alpha, target_modules, gpu_memory_utilization, seed, kwargs):
    import unsloth  # noqa: F401  (must be imported before trl / transformers / peft are used)
    from unsloth import FastLanguageModel

    model, tokenizer = FastLanguageModel.from_pretrained(
        model_name,
        max_seq_length=max_seq_length,
        load_in_4bit=choice.load_in_4bit,
        fast_inference=choice.fast_inference,
        max_lora_rank=lora_rank or 16,
        gpu_memory_utilization=gpu_memory_utilization,
        **kwargs,
    )
    if lora_rank:
        model = FastLanguageModel.get_peft_model(
            model,
            r=lora_rank,
            lora_alpha=alpha,
            target_modules=target_modules if isinstance(target_modules, str) else list(target_modules),
            use_gradient_checkpointing="unsloth",
            random_state=seed,
        )
    return model, tokenizer


def _load_transformers(model_name, choice, lora_rank, alpha, target_modules, kwargs):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_name)
    options: dict[str, Any] = {}
    if choice.name == "cpu" or not _cuda_available():
        options["dtype"] = torch.float32
    else:
        options["dtype"] = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        if os.environ.get("ACCELERATE_USE_DEEPSPEED", "false") != "true":  # DeepSpeed places weights itself
            # each rank of a multi-GPU launch holds its own copy on its own GPU
            options["device_map"] = {"": int(os.environ.get("LOCAL_RANK", "0"))}
        if choice.load_in_4bit:
            from transformers import BitsAndBytesConfig

            options["quantization_config"] = BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_quant_type="nf4",
                bnb_4bit_use_double_quant=True,
                bnb_4bit_compute_dtype=options["dtype"],
            )
    options.update(kwargs)
    model = AutoModelForCausalLM.from_pretrained(model_name, **options)
    if not lora_rank:
        return model, tokenizer
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    if choice.load_in_4bit:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)
    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    targets = target_modules if isinstance(target_modules, str) else [m for m in target_modules if m in present]
    if not targets:
        raise BackendError(
            f"none of the LoRA target modules {list(target_modules)} exist in {model_name}; "
            f"pass target_modules=... (e.g. 'all-linear')"
        )
    lora = LoraConfig(r=lora_rank, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, task_type="CAUSAL_LM")
    return get_peft_model(model, lora), tokenizer
