"""What this machine offers a run: a CUDA GPU, its compute capability, bf16 in hardware, Unsloth.

The one place that reads the GPU's properties from torch. Nothing here imports transformers, trl or peft:
:func:`import_unsloth_first` must be able to run before them.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass

GB = 1024**3  # memory is counted in GiB throughout, as torch and Unsloth report a card's (14.74 on a T4)


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


def compute_capability() -> tuple[int, int] | None:
    """The compute capability of the GPU this process trains on (7.5 on a T4, 8.9 on an L4), or None without one."""
    import torch

    if not torch.cuda.is_available():
        return None
    return tuple(torch.cuda.get_device_capability(0))


def supports_bf16() -> bool:
    """Whether the GPU computes in bf16 in hardware: compute capability 8.0 or newer (Ampere, Ada, Hopper).

    Not ``torch.cuda.is_bf16_supported()``: it counts emulation by default and says True on a T4 (7.5).
    Unsloth decides the same way (unsloth/models/_utils.py: ``SUPPORTS_BFLOAT16 = capability[0] >= 8``)
    and loads a T4's model in fp16, so a bf16 config would then be refused by its trainer.
    """
    capability = compute_capability()
    return capability is not None and capability[0] >= 8


def half_dtype():
    """The 16-bit dtype to compute in on this GPU: bf16 where the hardware has it, else fp16."""
    import torch

    return torch.bfloat16 if supports_bf16() else torch.float16


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
