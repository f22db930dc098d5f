"""The tool of the acting demo: a calculator the demo model may call on the arithmetic word problems
(:mod:`grpo_lite.data.arithmetic`), whose answers it otherwise guesses."""

from __future__ import annotations

import operator

OPERATIONS = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def calculate(a: int, op: str, b: int) -> int:
    """Work out a op b.

    Args:
        a: First number.
        op: +, - or *.
        b: Second number.
    """
    if op not in OPERATIONS:
        raise ValueError(f"op={op!r}: use +, - or *")
    return OPERATIONS[op](int(a), int(b))
