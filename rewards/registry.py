"""Rewards by name, for YAML run files and the command line (``rewards: [gsm8k]``, ``--rewards math``).

A name is a reward function's ``__name__`` (``numeric_correctness_reward``) or a preset (``math``,
``gsm8k``, ``code``, ``summarization``, ``qa``; the ``*_REWARDS`` constant names work too).
"""

from __future__ import annotations

import difflib
from typing import Callable

from . import code, correctness, format, length, presets, style


def _collect() -> dict[str, Callable]:
    functions = {}
    for module in (correctness, format, length, style, code, presets):
        for attribute in dir(module):
            value = getattr(module, attribute)
            if attribute.endswith(("_reward", "_penalty", "_punishment")) and callable(value):
                functions[getattr(value, "__name__", attribute)] = value
    return functions


REWARDS: dict[str, Callable] = _collect()
PRESETS: dict[str, list[Callable]] = {
    **presets.PRESETS,
    **{name: getattr(presets, name) for name in presets.__all__ if name.endswith("_REWARDS")},
}


def resolve(name: str) -> list[Callable]:
    """The reward functions a name stands for: one for a reward, several for a preset.

    >>> [f.__name__ for f in resolve("gsm8k")][:2]
    ['xml_count_reward', 'soft_xml_format_reward']
    """
    if name in PRESETS:
        return list(PRESETS[name])
    if name in REWARDS:
        return [REWARDS[name]]
    close = difflib.get_close_matches(name, [*REWARDS, *PRESETS], n=3)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise ValueError(
        f"unknown reward {name!r}: {hint}presets are {sorted(presets.PRESETS)}; "
        "rewards.available() lists every reward name"
    )


def get_reward(name: str) -> Callable:
    """The single reward function named ``name``."""
    if name not in REWARDS:
        resolve(name)  # raises with suggestions when unknown
        raise ValueError(f"{name!r} is a preset of several rewards; use rewards.resolve({name!r})")
    return REWARDS[name]


def available() -> dict[str, list[str]]:
    """Every reward and preset name."""
    return {"rewards": sorted(REWARDS), "presets": sorted(presets.PRESETS)}
