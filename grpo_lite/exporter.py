"""Save a trained model for use elsewhere: the LoRA adapter, a merged 16-bit model, or GGUF for llama.cpp/Ollama.

Adapter and merged 16-bit go through PEFT and transformers, so they work with any backend. Merged 4-bit and
GGUF need Unsloth's exporters (``save_pretrained_merged`` / ``save_pretrained_gguf``, which Unsloth adds to the
models it loads); without them the error says what to install or which format to use instead.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

HOWS = ("adapter", "merged_16bit", "merged_4bit", "gguf")
GGUF_QUANTIZATIONS = ("q8_0", "f16", "bf16", "q4_k_m", "q5_k_m", "q2_k", "q3_k_m", "q4_0", "q6_k")


class ExportError(RuntimeError):
    """The model cannot be exported in the asked format; the message says what is missing."""


def _needs_unsloth(model, how: str, exporter: str) -> None:
    if not hasattr(model, exporter):
        raise ExportError(
            f"export(how={how!r}) needs Unsloth's {exporter}, and this {type(model).__name__} was not loaded "
            "through Unsloth. Load the model with grpo_lite.load_model(..., backend='unsloth') on a CUDA GPU "
            "(pip install 'grpo-lite[unsloth]'), or export how='merged_16bit' and convert that folder with "
            "llama.cpp's convert_hf_to_gguf.py"
        )


def _merged(model, dtype: torch.dtype | None):
    """A plain transformers model with the LoRA weights folded in; ``model`` stays trainable.

    PEFT's ``merge_and_unload`` works in place, so it runs on a copy; that copy costs one model's memory.
    """
    merged = copy.deepcopy(model)
    if hasattr(merged, "merge_and_unload"):
        merged = merged.merge_and_unload()
    return merged.to(dtype) if dtype is not None else merged


def export(
    model,
    tokenizer,
    out_dir: str | Path,
    how: str = "adapter",
    quantization: str = "q8_0",
    dtype: torch.dtype | None = None,
) -> Path:
    """Write ``model`` and ``tokenizer`` to ``out_dir`` and return it.

    how:
        ``"adapter"``: the LoRA weights only (a few MB); load with ``peft.AutoPeftModelForCausalLM``.
        ``"merged_16bit"``: base + LoRA as one model in the weights' dtype (16-bit on a GPU; ``dtype=torch.bfloat16``
        casts, e.g. from the CPU backend's fp32); load with ``AutoModelForCausalLM.from_pretrained``.
        ``"merged_4bit"``: the same, quantized to 4 bits (Unsloth only).
        ``"gguf"``: a GGUF file for llama.cpp / Ollama at ``quantization`` (Unsloth only).

    Example::

        export(result.model, tokenizer, "out/merged", how="merged_16bit")
    """
    if how not in HOWS:
        raise ValueError(f"export: how={how!r}; use one of {', '.join(HOWS)}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if how == "gguf":
        if quantization not in GGUF_QUANTIZATIONS:
            raise ValueError(f"export: quantization={quantization!r}; for GGUF use one of {', '.join(GGUF_QUANTIZATIONS)}")
        _needs_unsloth(model, how, "save_pretrained_gguf")
        model.save_pretrained_gguf(str(out_dir), tokenizer, quantization_method=quantization)
        return out_dir
    if how == "merged_4bit":
        _needs_unsloth(model, how, "save_pretrained_merged")
        model.save_pretrained_merged(str(out_dir), tokenizer, save_method="merged_4bit_forced")
        return out_dir
    if how == "merged_16bit" and dtype is None and hasattr(model, "save_pretrained_merged"):
        model.save_pretrained_merged(str(out_dir), tokenizer, save_method="merged_16bit")
        return out_dir
    if how == "adapter" and not hasattr(model, "peft_config"):
        raise ExportError(
            f"export(how='adapter'): this {type(model).__name__} has no LoRA adapter; load it with "
            "grpo_lite.load_model(..., lora_rank=...) or export how='merged_16bit'"
        )
    to_save = model if how == "adapter" else _merged(model, dtype)
    to_save.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
