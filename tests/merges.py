"""What a 16-bit merge of a LoRA adapter is, element by element, for the export tests (CPU and GPU).

Merging adds ``delta = B @ A * scaling`` to the base weight and stores the sum in 16 bits: ``merged`` is
``bf16(base + delta)``, the sum computed in float32 and rounded once, give or take one bf16 step at each element
(PEFT rounds ``delta`` to the weight's dtype before adding it: peft/tuners/lora/layer.py, ``get_delta_weight``).
A merge into 4-bit weights (peft/tuners/lora/bnb.py: dequantize, add, quantize again; or an exporter that starts
from the dequantized 4-bit base) is off by the 4-bit rounding, many bf16 steps at most elements.

Comparing ``merged - base`` with ``delta`` instead mixes the rounding into the comparison: after a few steps with a
small learning rate, ``delta`` is smaller than one bf16 step of most base weights, and most of it rounds away.
"""

from __future__ import annotations

import torch


def format_steps(values: torch.Tensor) -> torch.Tensor:
    """The distance from each value to the next one its dtype can hold (its unit in the last place)."""
    info = torch.finfo(values.dtype)
    _, exponent = torch.frexp(values.float())  # |value| = m * 2**exponent with 0.5 <= m < 1
    steps = torch.ldexp(torch.full_like(values, info.eps, dtype=torch.float32), exponent - 1)
    return torch.where(values.abs() < info.tiny, info.tiny * info.eps, steps)  # zeros and subnormals: the smallest step


def steps_from_16bit_merge(merged: torch.Tensor, base: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """How many steps of ``merged``'s dtype each element of ``merged`` is from ``base + delta`` summed in float32 and
    rounded once to that dtype."""
    expected = (base.float() + delta.float()).to(merged.dtype)
    return (merged.float() - expected.float()).abs() / format_steps(expected)


def assert_merged_in_16bit(merged: torch.Tensor, base: torch.Tensor, delta: torch.Tensor, name: str = "the merged weight") -> None:
    """``merged`` is ``base + delta`` in its 16-bit dtype, to within one step at every element; the message says how far
    it is where it is not."""
    assert merged.dtype in (torch.bfloat16, torch.float16), f"{name} is {merged.dtype}, not a 16-bit dtype"
    assert merged.shape == base.shape == delta.shape, f"shapes: merged {tuple(merged.shape)}, base {tuple(base.shape)}, delta {tuple(delta.shape)}"
    steps = steps_from_16bit_merge(merged, base, delta)
    off = int((steps > 1).sum())
    assert off == 0, (
        f"{name} is not {merged.dtype}(base + delta): {off} of {steps.numel()} elements ({off / steps.numel():.1%}) are more "
        f"than one step away, up to {steps.max().item():.0f} steps (median {steps.median().item():.2f}); a merge into "
        "4-bit weights dequantized is off by their rounding"
    )
