"""Rewards by name, and the one place that turns what a user passes as rewards into reward functions.

A name is a reward function's ``__name__`` (``numeric_correctness_reward``) or a preset (``math``,
``gsm8k``, ``code``, ``summarization``, ``qa``; the ``*_REWARDS`` constant names work too). Anywhere a
reward is expected (``grpo_lite.train``, ``evaluate``, ``check_rewards``, a run YAML, ``grpo-lite score``)
it may also be a function, a ``RewardSet`` / ``weighted`` item, a ``"module:function"`` import path, or a
``"path/to/file.py:function"`` file path (from the working folder).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from . import code, correctness, format, length, presets, sandbox, style
from .combine import RewardSet, Weighted, reward_name
from .errors import RewardError


def _collect() -> dict[str, Callable]:
    functions = {}
    for module in (correctness, format, length, style, code, presets):
        for attribute in dir(module):
            value = getattr(module, attribute)
            if attribute.endswith(("_reward", "_penalty", "_punishment")) and callable(value):
                functions[getattr(value, "__name__", attribute)] = value
    return functions


REWARDS: dict[str, Callable] = _collect()
_PRESETS: dict[str, list[Callable]] = {
    **presets.REWARD_PRESETS,
    **{name: getattr(presets, name) for name in presets.__all__ if name.endswith("_REWARDS")},
}


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"; did you mean x, y?"`` for the known names closest to ``name``, or ``""``: the one hint for a misspelt
    reward, preset or setting.

    >>> did_you_mean("numeric_corectness_reward", REWARDS)
    '; did you mean numeric_correctness_reward?'
    >>> did_you_mean("t4", ["cpu-smoke", "t4-16gb", "l4-24gb"])
    '; did you mean t4-16gb?'
    """
    choices = sorted(choices)  # a set's order changes from run to run; the hint should not
    starting = [choice for choice in choices if name and choice.startswith(name)]  # "t4" for "t4-16gb"
    close = list(dict.fromkeys(starting + difflib.get_close_matches(name, choices, n=3)))[:3]
    return f"; did you mean {', '.join(close)}?" if close else ""


def resolve(name: str) -> list[Callable]:
    """The reward functions a name stands for: one for a reward, several for a preset.

    >>> [f.__name__ for f in resolve("gsm8k")][:2]
    ['xml_count_reward', 'soft_xml_format_reward']
    """
    if name in _PRESETS:
        return list(_PRESETS[name])
    if name in REWARDS:
        return [REWARDS[name]]
    if name.endswith(".py"):
        raise RewardError(f"reward {name!r}: name the function in the file too: '{name}:<function>'")
    raise RewardError(
        f"unknown reward {name!r}{did_you_mean(name, [*REWARDS, *_PRESETS])}; presets are {sorted(presets.REWARD_PRESETS)}; "
        "rewards.registry.REWARDS names every reward, and 'module:function' imports your own"
    )


_FILE_MODULES: dict[Path, ModuleType] = {}  # each .py file a reward was imported from, once per process


def is_file_reference(source: str) -> bool:
    """Whether the part of a reward reference before its colon names a file (``path/to/file.py``), not a module."""
    return source.endswith(".py") or "/" in source or "\\" in source


def split_file_reference(reference: Any) -> tuple[str, str] | None:
    """``(file, function)`` of a reference to a reward in a file (``"path/to/file.py:function"``), split at its last
    colon as :func:`import_reference` splits it; None for any other reference.

    >>> split_file_reference("rewards/mine.py:tidy_reward"), split_file_reference("my_rewards:tidy_reward")
    (('rewards/mine.py', 'tidy_reward'), None)
    """
    if not isinstance(reference, str):
        return None
    source, _, function = reference.rpartition(":")
    return (source, function) if source and is_file_reference(source) else None


def _import_file(source: str, reference: str, what: str) -> ModuleType:
    """The module in the file ``source`` (a path from the working folder), run once per process."""
    path = Path(source).expanduser()
    if not path.is_file():
        folder = path.parent
        hint = did_you_mean(path.name, [p.name for p in folder.glob("*.py")]) if folder.is_dir() else ""
        raise RewardError(f"{what} {reference!r}: no file {source!r}{hint}; give the path of your .py file from the "
                          f"working folder ({Path.cwd()}), or 'module:function' for a module on the Python path")
    key = path.resolve()
    if key in _FILE_MODULES:
        return _FILE_MODULES[key]
    name = f"reward_file_{path.stem}"
    while name in sys.modules:  # another file of the same name
        name += "_"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    module.__reward_file__ = source
    sys.modules[name] = module  # what dataclasses and pickle look a class's module up in
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # the file's own code failed as it ran: a missing key, a syntax error
        del sys.modules[name]
        raise RewardError(f"{what} {reference!r}: running {source!r} raised {type(error).__name__}: {error}; fix the file "
                          "(it runs when it is imported)") from error
    _FILE_MODULES[key] = module
    return module


SESSION_MODULE = "__main__"  # a notebook's or a script's own names: only the session that made them can import them


def is_session_reference(reference: Any) -> bool:
    """Whether ``reference`` names something a notebook or script holds (``"__main__:function"``), which no other
    process can import."""
    return isinstance(reference, str) and reference.partition(":")[0] == SESSION_MODULE


def reference_of(func: Any) -> str | None:
    """The reference :func:`import_reference` reads back as ``func`` itself, from where it lives: ``"path/to/file.py:name"``
    where a file imported by a reference holds it, ``"module:name"`` where a module holds it, ``"__main__:name"`` where
    the notebook or script holds it (:func:`is_session_reference`); None where no module holds it (a function made
    inside another, a ``functools.partial`` made in a call). The module ``func`` names as its own (``__module__``) is
    asked first, then every loaded module: what a helper makes names the helper's module and lives in the module that
    called it (a class made by ``grpo_lite.gymnasium_environment`` in the user's ``games.py``)."""
    claimed = getattr(func, "__module__", None)
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None)
    modules = dict(sys.modules)
    session = modules.get(SESSION_MODULE)
    aliases = {name for name, module in modules.items() if module is session}  # multiprocessing's __mp_main__
    order = [claimed] if claimed in modules and claimed not in aliases else []
    order += sorted(set(modules) - aliases - {claimed}) + [SESSION_MODULE]
    for module_name in order:
        module = modules.get(module_name)
        if (attribute := _held_as(module, func, name)) is not None:
            source = getattr(module, "__reward_file__", None)
            return f"{source}:{attribute}" if source else f"{module_name}:{attribute}"
    return None


def _held_as(module: Any, func: Any, name: str | None) -> str | None:
    """The name ``module`` holds ``func`` under (``name`` first), or None."""
    namespace = getattr(module, "__dict__", None)
    if not isinstance(namespace, dict):
        return None
    if name and namespace.get(name) is func:
        return name
    return next((attribute for attribute, value in list(namespace.items()) if value is func and attribute.isidentifier()),
                None)


def import_reference(path: str, what: str = "reward") -> Callable:
    """The function (or class) at ``"module:function"`` (your own module on the Python path) or at
    ``"path/to/file.py:function"`` (a file, from the working folder); ``what`` it is names it in errors."""
    module_name, _, attribute = path.rpartition(":")  # the last colon: a Windows path has one of its own
    if not module_name or not attribute:
        raise RewardError(f"{what} {path!r}: write 'module:function' or 'path/to/file.py:function', e.g. "
                          "'my_rewards:correctness_reward'")
    if module_name.startswith("<") or "<locals>" in attribute:
        raise RewardError(f"{what} {path!r} was made inside a function or a call, where no module holds it, and cannot "
                          "be imported: define it at the top level of a .py file and name it 'path/to/file.py:function'")
    if is_file_reference(module_name):
        module = _import_file(module_name, path, what)
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise RewardError(f"{what} {path!r}: cannot import module {module_name!r} ({error}); is it on the Python path "
                              "(the working folder, or PYTHONPATH)? A file is named by its path: 'path/to/file.py:function'"
                              ) from error
        except Exception as error:  # the module's own code failed as it was imported: a missing key, a syntax error
            raise RewardError(f"{what} {path!r}: importing module {module_name!r} raised {type(error).__name__}: {error}; "
                              "fix the module (it runs when it is imported)") from error
    func = getattr(module, attribute, None)
    if func is None and module_name == SESSION_MODULE:
        raise RewardError(f"{what} {path!r} was defined in a notebook or script, which only the session that defined it "
                          f"can import: move it into a .py file and name it 'path/to/file.py:{attribute}'")
    if func is None:
        where = f"file {module_name!r}" if is_file_reference(module_name) else f"module {module_name!r}"
        raise RewardError(f"{what} {path!r}: {where} has no {attribute!r}"
                          f"{did_you_mean(attribute, [n for n in dir(module) if not n.startswith('_')])}")
    if not callable(func):
        raise RewardError(f"{what} {path!r} is not callable")
    return func


def _check_signature(func: Callable) -> None:
    """TRL passes every dataset column and extras (trainer_state, log_metric, ...) as keywords."""
    target = func if inspect.isfunction(func) or inspect.ismethod(func) else func.__call__
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):  # builtins and C callables: nothing to check
        return
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        raise RewardError(
            f"reward function {reward_name(func)!r} must accept **kwargs: TRL passes every dataset column "
            "and extra arguments (trainer_state, log_metric, ...) as keywords"
        )


def _items(rewards: Any) -> list[Any]:
    """Names, import paths and presets replaced by functions; ``RewardSet`` and ``Weighted`` kept whole."""
    if isinstance(rewards, dict):
        raise RewardError(f"rewards={rewards!r:.80}: give a list of reward functions or names; weights go in reward_weights "
                          "(or RewardSet(weighted(func, 2.0), ...))")
    single = isinstance(rewards, (str, os.PathLike, RewardSet)) or callable(rewards)
    items = [rewards] if single else list(rewards or [])
    items = [os.fspath(item) if isinstance(item, os.PathLike) else item for item in items]  # Path("mine.py:tidy_reward")
    if not items:
        raise RewardError("rewards is empty: pass at least one reward function (see the rewards package)")
    resolved: list[Any] = []
    for item in items:
        if isinstance(item, str):
            resolved.extend([import_reference(item)] if ":" in item else resolve(item))
        elif callable(item) or isinstance(item, RewardSet):
            resolved.append(item)
        else:
            raise RewardError(f"reward {item!r:.80} is neither a function nor a reward name")
    return resolved


def resolve_rewards(rewards: Any) -> tuple[list[Callable], list[float] | None]:
    """Reward functions and their weights from whatever names them, checked for TRL's calling convention.

    ``rewards`` is one or a list of: functions, registry or preset names, ``"module:function"`` paths,
    ``weighted(f, w)`` items and ``RewardSet`` objects. The weights are ``None`` unless some reward was weighted
    (TRL then weighs all equally), else one per function, ready for ``GRPOConfig(reward_weights=...)``.

    >>> from rewards import numeric_correctness_reward, weighted
    >>> funcs, weights = resolve_rewards([weighted(numeric_correctness_reward, 2.0), "soft_xml_format_reward"])
    >>> [reward_name(f) for f in funcs], weights
    (['numeric_correctness_reward', 'soft_xml_format_reward'], [2.0, 1.0])
    """
    funcs: list[Callable] = []
    weights: list[float] = []
    for item in _items(rewards):
        for part in item.items if isinstance(item, RewardSet) else [item]:
            weighted = isinstance(part, Weighted)
            funcs.append(part.func if weighted else part)
            weights.append(part.weight if weighted else 1.0)
    for func in funcs:
        _check_signature(func)
    if any(_runs_code(func) for func in funcs):
        sandbox.isolation()  # refused here, before a model loads, when programs could not be run safely
    return funcs, (weights if any(w != 1.0 for w in weights) else None)


def _runs_code(func: Callable) -> bool:
    """Whether a reward runs the model's programs: it says so, or wraps one that does (partials, adaptive weights)."""
    while func is not None:
        if getattr(func, "runs_code", False):
            return True
        func = getattr(func, "func", None)
    return False
