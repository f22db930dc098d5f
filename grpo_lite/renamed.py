"""Old names of options, accepted for one release with a DeprecationWarning.

Each quantity has one name across the API: GRPOConfig's where the concept is GRPOConfig's
(``max_completion_length``, ``num_generations``), and one chosen name elsewhere (``heldout_n``,
``heldout_samples``). A renamed keyword or CLI flag still works and says what to write instead.
"""

from __future__ import annotations

import argparse
import functools
import warnings
from collections.abc import Callable
from typing import Any

OLD_NAMES = {  # old name -> the one name, for every public keyword and flag renamed in 0.2
    "max_new_tokens": "max_completion_length",
    "max_completion_tokens": "max_completion_length",
    "n_heldout": "heldout_n",
    "n": "heldout_n",
    "pass_k": "heldout_samples",
    "num_samples": "heldout_samples",
}


def _warn(old: str, new: str, where: str) -> None:
    # stacklevel 3: the line that called the renamed function, so Python shows it in __main__ and notebooks
    warnings.warn(f"{where}: {old} is renamed {new}; {old} stops working in the next release", DeprecationWarning,
                  stacklevel=3)


def accepts_old_names(*old: str) -> Callable:
    """Let ``func`` take each of ``old`` (keys of OLD_NAMES) as its new name, with a DeprecationWarning."""

    def wrap(func: Callable) -> Callable:
        @functools.wraps(func)
        def renamed(*args: Any, **kwargs: Any) -> Any:
            for name in old:
                if name in kwargs:
                    new = OLD_NAMES[name]
                    if new in kwargs:
                        raise TypeError(f"{func.__name__}: pass {new}, not both {new} and its old name {name}")
                    _warn(name, new, f"{func.__name__}()")
                    kwargs[new] = kwargs.pop(name)
            return func(*args, **kwargs)

        return renamed

    return wrap


class OldFlag(argparse.Action):
    """An argparse action for a renamed flag: stores under the new flag's dest and warns."""

    def __call__(self, parser, namespace, values, option_string=None):
        new = "--" + OLD_NAMES[option_string.lstrip("-").replace("-", "_")].replace("_", "-")
        _warn(option_string, new, parser.prog)
        setattr(namespace, self.dest, values)
