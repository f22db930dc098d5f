"""The shapes of what a user gives: each setting and argument declares one, and one check reads them all.

A run's settings (``grpo_lite.run.settings``: RunSettings, LoadSettings, Heldout, the data sections and every
GRPOConfig field), ``plan``'s arguments and the data sections of a run YAML each declare a shape: text, a whole number
in a range, a finite number in a range, true or false, one of a few values, a list of a shape, a mapping of known keys.
:func:`problems` checks a value against its shape and says, for each part that does not fit, ``name=value: fix``,
naming the setting (``load.lora_rank``, ``dataset.question``); nothing else is checked field by field.

A run YAML and ``--set`` give text where a number belongs (YAML 1.1 reads ``1e-5`` as text): :meth:`Shape.from_text`
reads such text as the number its shape holds, as transformers' argument parser does, and leaves everything else
as it is, for the check to refuse.

    >>> problems(Whole(low=1), 0, "lora_rank")
    ['lora_rank=0: give a whole number of 1 or more']
    >>> problems(Mapping({"path": Text(), "samples": optional(Whole(low=1))}), {"path": 7, "sample": 2}, "heldout")
    ["heldout: unknown setting 'sample'; did you mean samples? (settings: path, samples)", 'heldout.path=7: give text']
"""

from __future__ import annotations

import math
from collections.abc import Callable as CallableType
from dataclasses import dataclass, field
from typing import Any

from rewards.registry import did_you_mean

VALUE_SHOWN = 80  # characters of a value's repr a message shows: a chat template or a long list stays one line


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= VALUE_SHOWN else text[: VALUE_SHOWN - 3] + "..."


def is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_finite(value: Any) -> bool:
    """A number (not a bool) that is neither NaN nor infinite."""
    return is_number(value) and math.isfinite(value)


class Shape:
    """What a value must be. ``fits`` says whether it is; ``wants`` says what to give, for a message."""

    def fits(self, value: Any) -> bool:
        raise NotImplementedError

    def wants(self) -> str:
        raise NotImplementedError

    def from_text(self, value: Any) -> Any:
        """``value`` as a run YAML or ``--set`` means it: text that spells a number where a number belongs becomes it."""
        return value

    def parts(self, value: Any, name: str) -> list[str]:
        """The problems inside a value of the right kind (a mapping's keys, a list's items); empty by default."""
        return []

    def choices(self) -> list[str] | None:
        """The few values this shape allows, spelled as a user writes them, or None when there are many."""
        return None

    def numeric(self) -> bool:
        """Whether a number may fit: a NaN or an infinity given here is then said to be no number a run can use."""
        return False


@dataclass(frozen=True)
class Anything(Shape):
    """Any value (an object from Python: a dataset, a SamplingParams)."""

    def fits(self, value: Any) -> bool:
        return True

    def wants(self) -> str:
        return "a value"


@dataclass(frozen=True)
class Flag(Shape):
    def fits(self, value: Any) -> bool:
        return isinstance(value, bool)

    def wants(self) -> str:
        return "true or false"

    def choices(self) -> list[str]:
        return ["true", "false"]


@dataclass(frozen=True)
class Exactly(Shape):
    """One value (``"auto"``, ``-1``, ``None``), of that very type: ``True`` is not ``1``."""

    value: Any

    def fits(self, value: Any) -> bool:
        return type(value) is type(self.value) and value == self.value

    def wants(self) -> str:
        return self.choices()[0]

    def choices(self) -> list[str]:
        return ["null" if self.value is None else str(self.value)]


def _bounds(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        if low_open:
            return f" above {low:g} and {'below' if high_open else 'at most'} {high:g}"
        return f" from {low:g} to {'below ' if high_open else ''}{high:g}"
    if low is not None:
        return f" above {low:g}" if low_open else f" of {low:g} or more"
    if high is not None:
        return f" below {high:g}" if high_open else f" of {high:g} or less"
    return ""


def _within(value: float, low, high, low_open: bool, high_open: bool) -> bool:
    if low is not None and (value <= low if low_open else value < low):
        return False
    return not (high is not None and (value >= high if high_open else value > high))


def _read_number(value: Any, kind: type) -> Any:
    """Text spelling a finite number of ``kind`` as that number; anything else as it is ("nan", "inf" stay text)."""
    if not isinstance(value, str):
        return value
    try:
        number = kind(value)
    except ValueError:
        return value
    return number if math.isfinite(number) else value


@dataclass(frozen=True)
class Number(Shape):
    """A finite number (an int or a float, not a bool), within its bounds; ``*_open``: the bound itself is out."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def fits(self, value: Any) -> bool:
        return is_finite(value) and _within(value, self.low, self.high, self.low_open, self.high_open)

    def wants(self) -> str:
        return "a number" + _bounds(self.low, self.high, self.low_open, self.high_open)

    def numeric(self) -> bool:
        return True

    def from_text(self, value: Any) -> Any:
        return _read_number(value, float)


@dataclass(frozen=True)
class Whole(Number):
    """A whole number (not a bool), from ``low`` to ``high``."""

    low: int | None = None
    high: int | None = None

    def fits(self, value: Any) -> bool:
        return is_whole(value) and super().fits(value)

    def wants(self) -> str:
        return "a whole number" + _bounds(self.low, self.high, False, False)

    def from_text(self, value: Any) -> Any:
        return _read_number(value, int)


@dataclass(frozen=True)
class Text(Shape):
    """Text; ``among``: one of these values; ``blank``: whether empty or spaces-only text is allowed."""

    among: tuple[str, ...] = ()
    blank: bool = False

    def fits(self, value: Any) -> bool:
        if not isinstance(value, str) or (not self.blank and not value.strip()):
            return False
        return not self.among or value in self.among

    def wants(self) -> str:
        return f"one of {', '.join(self.among)}" if self.among else "text"

    def choices(self) -> list[str] | None:
        return list(self.among) or None


@dataclass(frozen=True)
class Kind(Shape):
    """An instance of one of ``types`` (a section's class, a ``RewardSet``), or any callable with ``callable=True``."""

    types: tuple[type, ...] = ()
    callable: bool = False
    said: str = "an object"

    def fits(self, value: Any) -> bool:
        return isinstance(value, self.types) or (self.callable and isinstance(value, CallableType))

    def wants(self) -> str:
        return self.said


@dataclass(frozen=True)
class AnyOf(Shape):
    """One of several shapes."""

    options: tuple[Shape, ...]

    def fits(self, value: Any) -> bool:
        return any(option.fits(value) for option in self.options)

    def wants(self) -> str:
        named = self.choices() or [option.wants() for option in self.options]
        return ", ".join(named[:-1]) + f" or {named[-1]}" if len(named) > 1 else named[0]

    def choices(self) -> list[str] | None:
        named = [option.choices() for option in self.options]
        return None if any(n is None for n in named) else [c for n in named for c in n]

    def numeric(self) -> bool:
        return any(option.numeric() for option in self.options)

    def from_text(self, value: Any) -> Any:
        if isinstance(value, str) and any(option.fits(value) for option in self.options):
            return value  # text where text fits ("auto")
        for option in self.options:
            read = option.from_text(value)
            if read is not value and option.fits(read):
                return read
        return value

    def parts(self, value: Any, name: str) -> list[str]:
        fitting = next(option for option in self.options if option.fits(value))
        return fitting.parts(value, name)


def optional(shape: Shape) -> AnyOf:
    """``shape``, or null (None)."""
    return AnyOf((Exactly(None), shape))


@dataclass(frozen=True)
class ListOf(Shape):
    """A list whose every item has ``item``'s shape; ``empty``: whether an empty list is allowed."""

    item: Shape
    empty: bool = True

    def fits(self, value: Any) -> bool:
        return isinstance(value, list) and (self.empty or bool(value)) and all(self.item.fits(v) for v in value)

    def wants(self) -> str:
        return f"a list of {self.item.wants()}" + ("" if self.empty else " (one or more)")

    def from_text(self, value: Any) -> Any:
        return [self.item.from_text(v) for v in value] if isinstance(value, list) else value


@dataclass(frozen=True)
class Mapping(Shape):
    """A mapping. ``keys``: the keys it may hold and each value's shape (None: any text key, any value)."""

    keys: dict[str, Shape] | None = field(default=None, hash=False)

    def fits(self, value: Any) -> bool:
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)

    def wants(self) -> str:
        return "a mapping of " + (", ".join(self.keys) if self.keys else "keyword -> value")

    def from_text(self, value: Any) -> Any:
        if not isinstance(value, dict) or self.keys is None:
            return value
        return {k: self.keys[k].from_text(v) if k in self.keys else v for k, v in value.items()}

    def parts(self, value: Any, name: str) -> list[str]:
        if self.keys is None:
            return []
        found = [f"{name}: unknown setting {key!r}{did_you_mean(key, self.keys)} (settings: {', '.join(self.keys)})"
                 for key in value if key not in self.keys]
        for key, shape in self.keys.items():
            if key in value:
                found += problems(shape, value[key], f"{name}.{key}")
        return found


@dataclass(frozen=True)
class Declared(Shape):
    """A setting's declared shape, and the fix its message gives when a value does not fit."""

    shape: Shape
    fix: str | None = None

    def fits(self, value: Any) -> bool:
        return self.shape.fits(value)

    def wants(self) -> str:
        return self.shape.wants()

    def from_text(self, value: Any) -> Any:
        return self.shape.from_text(value)

    def parts(self, value: Any, name: str) -> list[str]:
        return self.shape.parts(value, name)

    def choices(self) -> list[str] | None:
        return self.shape.choices()

    def numeric(self) -> bool:
        return self.shape.numeric()


def problems(shape: Shape, value: Any, name: str, fix: str | None = None) -> list[str]:
    """``name=value: fix`` when ``value`` does not fit ``shape`` (``fix`` by default: the declared one, else give what the
    shape wants), else the problems inside it (a mapping's unknown keys and values, each named ``name.key``)."""
    if not shape.fits(value):
        said = fix or getattr(shape, "fix", None) or (f"use {shape.wants()}" if shape.choices() else f"give {shape.wants()}")
        if isinstance(value, float) and not math.isfinite(value) and shape.numeric():
            said += " (NaN and infinity are not numbers a run can use)"
        if isinstance(value, str) and shape.choices():
            said += did_you_mean(value, shape.choices())
        return [f"{name}={shown(value)}: {said}"]
    return shape.parts(value, name)


def check(arguments: dict[str, Any], declared: dict[str, Shape], error: CallableType[[str], Exception], where: str) -> None:
    """Raise ``error`` naming every argument that does not fit its declared shape, each on its own line."""
    found = [problem for name, value in arguments.items() if name in declared
             for problem in problems(declared[name], value, name)]
    if found:
        raise error("\n".join(f"{where}: {problem}" for problem in found))
