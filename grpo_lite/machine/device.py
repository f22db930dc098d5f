"""What this machine offers a run: a CUDA GPU, bf16 in hardware, Unsloth, vLLM.

The one place that reads the GPU's properties from torch. Nothing here imports transformers, trl or peft:
:func:`import_unsloth_first` must be able to run before them.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass

GB = 1024**3  # memory is counted in GiB throughout, as torch and Unsloth report a card's (14.74 on a T4)

# The vLLM releases TRL 1.15 accepts: trl/import_utils.py, is_vllm_available, warns outside 0.21.0-0.31.0.
TRL_VLLM_RANGE = ("0.21.0", "0.31.0")


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@dataclass(frozen=True)
class GPU:
    """The CUDA GPU this process trains on."""

    name: str
    memory_gb: float


def this_gpu() -> GPU | None:
    """The GPU this process trains on (its current device once CUDA has started, else GPU 0), or None."""
    import torch

    if not torch.cuda.is_available():
        return None
    index = torch.cuda.current_device() if torch.cuda.is_initialized() else 0
    properties = torch.cuda.get_device_properties(index)
    return GPU(properties.name, properties.total_memory / GB)


def supports_bf16() -> bool:
    """Whether the GPU computes in bf16 in hardware: compute capability 8.0 or newer (Ampere, Ada, Hopper).

    Not ``torch.cuda.is_bf16_supported()``: it counts emulation by default and says True on a T4 (7.5).
    Unsloth decides the same way (unsloth/models/_utils.py: ``SUPPORTS_BFLOAT16 = capability[0] >= 8``)
    and loads a T4's model in fp16, so a bf16 config would then be refused by its trainer.
    """
    import torch

    return torch.cuda.is_available() and torch.cuda.get_device_capability(0)[0] >= 8


def half_dtype():
    """The 16-bit dtype to compute in on this GPU: bf16 where the hardware has it, else fp16."""
    import torch

    return torch.bfloat16 if supports_bf16() else torch.float16


def vllm_version() -> str | None:
    """The installed vLLM's version, or None (read from its metadata: importing vLLM is slow)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vllm")
    except PackageNotFoundError:
        return None


def unsloth_disabled_vllm() -> str | None:
    """Why Unsloth disabled vLLM as it was imported, or None when it did not (or is not imported).

    Unsloth imports vLLM when it is imported itself and, when vLLM's compiled extensions are broken or it refuses
    the installed transformers, blocks it for the process and keeps the reason (unsloth/import_fixes.py,
    ``disable_broken_vllm``, ``VLLM_DISABLED_REASON``); ``from_pretrained(fast_inference=True)`` then raises
    ImportError (unsloth/models/loader.py). vLLM's version metadata still looks fine.
    """
    fixes = sys.modules.get("unsloth.import_fixes")
    reason = getattr(fixes, "VLLM_DISABLED_REASON", None)
    return " ".join(str(reason).split()) if reason else None


def vllm_usable() -> tuple[bool, str]:
    """Whether vLLM can serve generation for TRL 1.15 here, and why (or why not)."""
    from packaging.version import Version

    disabled = unsloth_disabled_vllm()
    if disabled:
        return False, f"Unsloth disabled vLLM when it was imported: {disabled}"
    found = vllm_version()
    if found is None:
        return False, "vLLM is not installed (pip install 'grpo-lite[vllm]')"
    low, high = TRL_VLLM_RANGE
    if not Version(low) <= Version(Version(found).base_version) <= Version(high):
        return False, f"vLLM {found} is outside the {low}-{high} that TRL 1.15 supports"
    if cuda_available() and not supports_bf16():
        # vLLM releases after 0.11 do not run on a T4 (compute capability 7.5), and 0.11 is outside TRL 1.15's range
        return False, f"vLLM {found} does not run on this GPU (compute capability below 8.0, e.g. a T4)"
    return True, f"vLLM {found}"


def import_unsloth_first() -> bool:
    """Import Unsloth now when it is installed and a CUDA GPU is present; True when it is imported.

    Unsloth patches transformers, TRL and PEFT as it is imported and warns that a late import runs slower
    or uses more memory, so ``grpo_lite`` calls this before anything of its own imports them. Never on a
    machine without a GPU: there Unsloth would load a CPU fallback that cannot train GRPO.
    """
    if "unsloth" in sys.modules:
        return True
    if not installed("unsloth") or not cuda_available():
        return False
    import unsloth  # noqa: F401

    return True
