"""Save a trained model for use elsewhere: the LoRA adapter, a merged 16-bit model, or GGUF for llama.cpp/Ollama.

Adapter and merged 16-bit go through PEFT and transformers, so they work with any backend. Merged 4-bit and
GGUF need Unsloth's exporters (``save_pretrained_merged`` / ``save_pretrained_gguf``, which Unsloth adds to the
models it loads); without them the error says what to install or which format to use instead.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from ..data.prompts import is_processor
from ..errors import UserError
from ..log import logger
from .lora import targets_as_named

HOWS = ("adapter", "merged_16bit", "merged_4bit", "gguf")
HOW_ALIASES = {"lora": "adapter"}  # Unsloth's save_method name for the adapter alone
# unsloth/save.py (2026.10.9), ALLOWED_QUANTS: the GGUF methods save_to_gguf takes without an importance matrix
GGUF_QUANTIZATIONS = ("not_quantized", "fast_quantized", "quantized", "f32", "bf16", "f16", "q8_0", "q4_k_m", "q5_k_m", "q2_k",
                      "q2_k_l", "q3_k_l", "q3_k_m", "q3_k_s", "q4_0", "q4_1", "q4_k_s", "q4_k", "q5_k", "q5_0", "q5_1", "q5_k_s",
                      "q6_k", "q3_k_xs")
# and IMATRIX_QUANTS: the IQ methods, which it takes only with an importance matrix (imatrix_file), which export does not pass
GGUF_IMATRIX_QUANTIZATIONS = ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq2_m", "iq3_xxs", "iq3_s", "iq3_m", "iq4_nl",
                              "iq4_xs")
# unsloth_save_pretrained_gguf: a method of None is q8_0, and these three name others
GGUF_ALIASES = {None: "q8_0", "not_quantized": "f16", "fast_quantized": "q8_0", "quantized": "q4_k_m"}


class ExportError(UserError, RuntimeError):
    """The model cannot be exported in the asked format; the message says what is missing."""


def _needs_unsloth(model, how: str, exporter: str) -> None:
    if not hasattr(model, exporter):
        raise ExportError(
            f"export(how={how!r}) needs Unsloth's {exporter}, and this {type(model).__name__} was not loaded "
            "through Unsloth. Load the model with grpo_lite.load_model(..., backend='unsloth') on a CUDA GPU "
            "(pip install 'grpo-lite[unsloth]'), or export how='merged_16bit' and convert that folder with "
            "llama.cpp's convert_hf_to_gguf.py"
        )


def _is_4bit(model) -> bool:
    return bool(getattr(model, "is_loaded_in_4bit", False)) or getattr(model.config, "quantization_config", None) is not None


def _merged(model, dtype: torch.dtype | None):
    """A plain transformers model with the LoRA weights folded in; ``model`` stays trainable.

    PEFT's ``merge_and_unload`` works in place, so it runs on a copy; that copy costs one model's memory.
    """
    merged = copy.deepcopy(model)
    if hasattr(merged, "merge_and_unload"):
        merged = merged.merge_and_unload()
    return merged.to(dtype) if dtype is not None else merged


def _merged_into_16bit_base(model, dtype: torch.dtype | None):
    """The adapter of a 4-bit model merged into its base weights reloaded in 16-bit.

    Merging into the 4-bit layers would re-quantize the sum (peft/tuners/lora/bnb.py, Linear4bit.merge:
    dequantize, add, quantize again), so the "16-bit" folder would hold a lossy 4-bit model.
    """
    from peft import PeftModel
    from transformers import AutoConfig, AutoModelForCausalLM

    from ..machine.device import cuda_available, half_dtype

    base_path = model.peft_config[model.active_adapter].base_model_name_or_path
    if getattr(AutoConfig.from_pretrained(base_path), "quantization_config", None) is not None:
        raise ExportError(
            f"export(how='merged_16bit'): the base checkpoint {base_path!r} is itself quantized, so there are no 16-bit "
            "weights to merge into; load the 16-bit base model (not a -bnb-4bit one), or load through Unsloth, whose "
            "save_pretrained_merged fetches them"
        )
    dtype = dtype or (half_dtype() if cuda_available() else torch.bfloat16)
    with tempfile.TemporaryDirectory() as adapter_dir:
        model.save_pretrained(adapter_dir, selected_adapters=[model.active_adapter])
        base = AutoModelForCausalLM.from_pretrained(base_path, dtype=dtype)
        with targets_as_named():  # the adapter as it was attached, its experts' targets not rewritten by PEFT
            return PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()


def _how(how: str) -> str:
    """``how`` read as Unsloth reads a save_method (unsloth/save.py, e.g. ``_is_lora_save_method``:
    ``save_method.lower().strip().replace("-", "_").replace(" ", "_")``): ``"Merged-16bit"`` is merged_16bit."""
    key = how.lower().strip().replace("-", "_").replace(" ", "_") if isinstance(how, str) else how
    key = HOW_ALIASES.get(key, key)
    if key not in HOWS:
        raise ExportError(f"export: how={how!r}; use one of {', '.join(HOWS)}")
    return key


def _gguf_method(method: str | None) -> str | None:
    """One GGUF method as Unsloth reads it (unsloth/save.py, unsloth_save_pretrained_gguf: ``quant_method.lower()``,
    then its aliases), or None where Unsloth would refuse it."""
    if method is not None and not isinstance(method, str):
        return None
    key = method.lower() if method is not None else None
    key = GGUF_ALIASES.get(key, key)
    return key if key in GGUF_QUANTIZATIONS else None


def _gguf_methods(quantization: str | Sequence[str] | None) -> list[str]:
    asked = list(quantization) if isinstance(quantization, (list, tuple)) else [quantization]
    methods = [_gguf_method(method) for method in asked]
    if methods and None not in methods:
        return methods
    imatrix = [method for method in asked if isinstance(method, str) and method.lower() in GGUF_IMATRIX_QUANTIZATIONS]
    if imatrix:
        raise ExportError(f"export: quantization={quantization!r}; {', '.join(imatrix)} need an importance matrix (Unsloth's "
                          "imatrix_file), which export does not pass: call the model's save_pretrained_gguf(..., "
                          "imatrix_file=...) yourself, or use another method")
    raise ExportError(f"export: quantization={quantization!r}; for GGUF use one of {', '.join(GGUF_QUANTIZATIONS)} (in any "
                      "case, as Unsloth reads them), or a list of them")


def _processor_of_vision_model(model, tokenizer) -> None:
    """Refuse a vision-language model (its config has a ``vision_config``) with a text tokenizer: the folder would hold
    no image processor, so ``AutoProcessor.from_pretrained`` could not load it and the model could not read an image."""
    if getattr(getattr(model, "config", None), "vision_config", None) is not None and not is_processor(tokenizer):
        raise ExportError(f"export: this {type(model).__name__} is a vision-language model and the {type(tokenizer).__name__} "
                          "given is a text tokenizer (processor.tokenizer?): the folder would have no image processor, and "
                          "AutoProcessor.from_pretrained could not load it. Pass the processor load_model returned with the "
                          "model: export(model, processor, ...)")


def _hub_repo(push_to_hub: str | None) -> None:
    if push_to_hub is not None and (not isinstance(push_to_hub, str) or push_to_hub.count("/") != 1 or "" in push_to_hub.split("/")):
        raise ExportError(f"export: push_to_hub={push_to_hub!r}; give the Hub repository as 'user/name'")


def _upload(out_dir: Path, repo_id: str, token: str | None, allow_patterns: list[str] | None = None) -> None:
    """Upload what the export wrote to the Hub repository ``repo_id``, created first where it does not exist."""
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo_id=repo_id, token=token, exist_ok=True)
    api.upload_folder(repo_id=repo_id, folder_path=str(out_dir), token=token, allow_patterns=allow_patterns,
                      commit_message="Upload model trained with grpo-lite")
    logger.info(f"uploaded {out_dir} to https://huggingface.co/{repo_id}")


def export(
    model,
    tokenizer,
    out_dir: str | Path,
    how: str = "adapter",
    quantization: str | Sequence[str] | None = "q8_0",
    dtype: torch.dtype | None = None,
    overwrite: bool = False,
    push_to_hub: str | None = None,
    token: str | None = None,
) -> Path:
    """Write ``model`` and ``tokenizer`` to ``out_dir`` and return it. A vision-language model is written with its
    processor (``tokenizer`` is the processor load_model returned), so that ``AutoProcessor`` loads the folder: its
    text tokenizer alone is refused.

    how:
        ``"adapter"``: the trained LoRA weights only (a few MB); load with ``peft.AutoPeftModelForCausalLM``.
        ``"merged_16bit"``: base + LoRA as one model in the weights' dtype (16-bit on a GPU; ``dtype=torch.bfloat16``
        casts, e.g. from the CPU backend's fp32); load with ``AutoModelForCausalLM.from_pretrained``. From a
        4-bit model, the base weights are reloaded in 16-bit (``dtype``, else the GPU's half dtype) and the
        adapter merged into them: no quantization survives in the folder.
        ``"merged_4bit"``: the same, quantized to 4 bits (Unsloth only).
        ``"gguf"``: a GGUF file for llama.cpp / Ollama at ``quantization`` (Unsloth only); a list
        (``["q4_k_m", "q8_0"]``) writes one file per method from one conversion, as Unsloth's
        ``save_pretrained_gguf`` does. Unsloth writes the GGUF files beside ``out_dir``, in ``<out_dir>_gguf``.

    ``how`` and ``quantization`` are read as Unsloth reads its save_method and quantization_method: in any case
    (``"Q8_0"``, ``"Merged-16bit"``; ``"lora"`` is the adapter), a GGUF method any of Unsloth's ALLOWED_QUANTS.

    ``push_to_hub="user/repo"`` then uploads what was written to that Hub repository (created if missing), with
    ``token`` (else the one ``huggingface-cli login`` saved): the folder for the adapter and merged models, the
    GGUF files (and Ollama's Modelfile) for GGUF.

    A folder that already holds files (an earlier export, a run) is refused, naming what is there, so two exports
    never mix in one folder; ``overwrite=True`` empties it first.

    Example::

        export(result.model, tokenizer, "out/merged", how="merged_16bit")
    """
    how = _how(how)
    methods = _gguf_methods(quantization) if how == "gguf" else None
    _processor_of_vision_model(model, tokenizer)
    _hub_repo(push_to_hub)
    written = _write(model, tokenizer, Path(out_dir), how, methods, dtype, overwrite)
    if push_to_hub is not None:
        if how == "gguf":
            _upload(written, push_to_hub, token, allow_patterns=["*.gguf", "Modelfile"])
        else:
            _upload(written, push_to_hub, token)
    return Path(out_dir)


def _write(model, tokenizer, out_dir: Path, how: str, methods: list[str] | None, dtype, overwrite: bool) -> Path:
    """Write the export into ``out_dir``; returns the folder that holds what to upload (for GGUF, Unsloth's)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"export: {out_dir} is a file; give a folder")
    held = sorted(p.name for p in out_dir.iterdir()) if out_dir.is_dir() else []
    if held and not overwrite:
        shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
        raise ExportError(f"export: {out_dir} already holds {shown}; export into an empty folder, or pass overwrite=True "
                          "to replace what is there")
    if held:
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if how == "gguf":
        _needs_unsloth(model, how, "save_pretrained_gguf")
        # unsloth/save.py: save_to_gguf takes "a list of options" and quantizes each from one 16-bit conversion;
        # save_pretrained_gguf writes them to the sibling folder <out_dir>_gguf and returns where ("gguf_directory")
        done = model.save_pretrained_gguf(str(out_dir), tokenizer, quantization_method=methods[0] if len(methods) == 1 else methods)
        gguf_dir = Path(done["gguf_directory"]) if isinstance(done, dict) and done.get("gguf_directory") else out_dir
        logger.info(f"GGUF ({', '.join(methods)}) written to {gguf_dir}")
        return gguf_dir
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
    if how == "adapter":
        # only the adapter the model trains: TRL 1.x adds a frozen copy, "ref", for the KL term of a beta > 0 run
        # (trl/trainer/grpo_trainer.py, GRPOTrainer.__init__: model.add_adapter("ref", ...)), which PEFT would save too
        model.save_pretrained(out_dir, selected_adapters=[model.active_adapter])
        tokenizer.save_pretrained(out_dir)
        return out_dir
    if hasattr(model, "peft_config") and _is_4bit(model):
        to_save = _merged_into_16bit_base(model, dtype)
    else:
        to_save = _merged(model, dtype)
    to_save.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
