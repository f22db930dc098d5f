"""What TRL needs of a run's tools, environments and rollout function, checked before the model loads.

TRL's GRPOTrainer (trl/trainer/grpo_trainer.py) calls a tool by its ``__name__`` (a second tool of one name silently
replaces the first) and describes it to the model with transformers' ``get_json_schema`` (its type hints and Google-style
docstring); makes one environment to read its tools, its class's public functions but ``reset`` and ``get_reward``;
calls ``reset(**row)`` with every column of the row (a dict of environments: all but ``environment``) before each
rollout; and calls ``rollout_func(prompts, trainer)``. Each of these, wrong, fails only inside the trainer, after the
model is built, or once a rollout runs. :func:`rollout_problems` finds them all at once, one line each naming the setting
and the fix: :meth:`~grpo_lite.run.settings.RunSettings.problems` reports them with a run YAML's other problems before
the model loads, and ``grpo_lite.training.rollouts`` refuses them before the trainer is built, with the dataset's
columns, which a YAML's settings do not know yet.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any


def environment_tools(environment: Any) -> list[Any]:
    """An environment's tools as TRL reads them: its class's public functions but ``reset`` and ``get_reward``, bound."""
    return [getattr(environment, name) for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
            if not name.startswith("_") and name not in ("reset", "get_reward")]


def rollout_problems(options: dict[str, Any], *, scored_by_environments: bool = False,
                     columns: Sequence[str] | None = None) -> list[str]:
    """Every problem TRL would meet with ``options`` (tools, environment_factory, rollout_func: the functions and classes
    themselves), one line each. ``scored_by_environments``: the run has no reward functions, so each environment must
    score its episodes with ``get_reward()``. ``columns``: the training rows' columns, where known, which ``reset(**row)``
    is called with and a dict of environments is picked by."""
    found: list[str] = []
    tools = options.get("tools")
    if tools is not None:
        if not isinstance(tools, (list, tuple)):
            return [f"tools={tools!r}: give a list of functions, tools=[...]"]
        for i, tool in enumerate(tools):
            found += tool_problems(tool, f"tools[{i}]")
        found += _clashes([(f"tools[{i}]", tool) for i, tool in enumerate(tools)])
    factory = options.get("environment_factory")
    if factory is not None:
        found += _environments_problems(factory, list(tools or []), scored_by_environments, columns)
    if (rollout_func := options.get("rollout_func")) is not None:
        found += _rollout_func_problems(rollout_func)
    return found


def tool_problems(tool: Any, where: str) -> list[str]:
    """A tool as TRL runs it: called by its ``__name__``, and described to the model by transformers' get_json_schema
    (its type hints and Google-style docstring), which the chat template writes into the prompt."""
    from transformers.utils import get_json_schema

    if isinstance(tool, functools.partial):
        inner = getattr(tool.func, "__name__", "the function")
        return [f"{where} is a functools.partial of {inner!r}: TRL calls a tool by its __name__ and describes it to the "
                "model from its signature and docstring, which a partial has not; define a function taking the arguments "
                f"the model gives, with type hints and a docstring, that calls {inner}"]
    if not callable(tool) or not hasattr(tool, "__name__"):
        return [f"{where}={tool!r} is not a function: a tool is a function (or an environment's method) the model calls "
                "by its name"]
    try:
        get_json_schema(tool)
    except Exception as refused:  # transformers' DocstringParsingException, TypeHintParsingException
        said = str(refused).rstrip()
        said += "" if said.endswith((".", "!")) else "."
        return [f"{where} ({tool.__name__}) cannot be described to the model: {said} Give every argument a type hint "
                "and the function a Google-style docstring with an 'Args:' line for each argument (transformers' "
                "get_json_schema reads them)"]
    return []


def _clashes(named: list[tuple[str, Any]]) -> list[str]:
    """Tools of one name among ``named`` (where, tool): TRL keeps one per name, and the model could call only the last."""
    by_name: dict[str, list[str]] = {}
    for where, tool in named:
        if callable(tool) and isinstance(getattr(tool, "__name__", None), str):
            by_name.setdefault(tool.__name__, []).append(where)
    return [f"{', '.join(wheres[:-1])} and {wheres[-1]} share the name {name!r}: TRL calls a tool by its name and keeps the "
            "last of one name, so the model could never call the others; give each tool a name of its own"
            for name, wheres in by_name.items() if len(wheres) > 1]


def _environments_problems(factory: Any, tools: list[Any], scored: bool, columns: Sequence[str] | None) -> list[str]:
    """Each factory makes an environment (one here, as TRL's trainer makes one to read its tools) that TRL can reset with
    the rows and whose tools it can describe; a dict's rows each name one of its environments in their ``environment``
    column."""
    if not isinstance(factory, dict):
        return _environment_problems(factory, "environment_factory", tools, scored, columns)
    if not factory or not all(isinstance(key, str) for key in factory):
        return ["environment_factory as a dict maps each environment's name (a string, as the rows' 'environment' column "
                f"gives it) to its factory; got the keys {list(factory)}"]
    found = []
    if columns is not None and "environment" not in columns:
        found.append(f"environment_factory is a dict of {', '.join(map(repr, factory))}, and the dataset has no "
                     "'environment' column: give each row the name of the environment it is played in")
    row_columns = None if columns is None else [c for c in columns if c != "environment"]  # TRL keeps it from reset
    for key, each in factory.items():
        found += _environment_problems(each, f"environment_factory[{key!r}]", tools, scored, row_columns)
    return found


def _environment_problems(factory: Any, where: str, tools: list[Any], scored: bool,
                          columns: Sequence[str] | None) -> list[str]:
    if not callable(factory):
        return [f"{where}={factory!r} is not callable: give a class (or function) that makes one environment"]
    try:
        environment = factory()
    except Exception as error:  # the user's constructor: named here, before TRL's trainer makes one
        return [f"{where}: making an environment raised {type(error).__name__}: {error}; TRL makes one per rollout with "
                "no arguments, factory(): fix the constructor (or the function) so that it can"]
    kind = type(environment)
    # TRL reads the methods on the class (a property is not a tool), reset and get_reward apart
    methods = dict(inspect.getmembers(kind, predicate=inspect.isfunction))
    made = f"{where} makes a {kind.__name__}"
    if "reset" not in methods:
        return [f"{made}, which has no reset method: TRL calls reset(**row) on each environment before its rollout "
                "(returning None, or text added to the prompt); define def reset(self, **row)"]
    found = []
    if scored and "get_reward" not in methods:
        found.append(f"{made}, which has no get_reward method, and the run has no reward functions: its episodes would "
                     "earn nothing. Define def get_reward(self) -> float, or give rewards")
    own = environment_tools(environment)
    if not own and not tools:
        found.append(f"{made}, which has no public method for the model to call: an environment's tools are its public "
                     "methods (reset and get_reward apart); define one, with type hints and a docstring, or give tools=[...]")
    for tool in own:
        found += tool_problems(tool, f"{where}: {kind.__name__}.{tool.__name__}")
    found += _clashes([*((f"tools[{i}]", tool) for i, tool in enumerate(tools)),
                       *((f"{kind.__name__}.{tool.__name__}", tool) for tool in own)])
    if columns is not None:
        found += _reset_problems(methods["reset"], made, columns)
    return found


def _reset_problems(reset, made: str, columns: Sequence[str]) -> list[str]:
    """``reset(**row)`` as TRL calls it, with every column of a row: a parameter no column gives (and no default), or
    columns it cannot take (no ``**row``), fail each rollout with a TypeError inside the trainer."""
    try:
        signature = inspect.signature(reset)
    except (TypeError, ValueError):  # a builtin or C callable: nothing to read
        return []
    try:
        signature.bind(None, **dict.fromkeys(columns))
        return []
    except TypeError:
        pass
    parameters = list(signature.parameters.values())[1:]  # after self
    given = set(columns)
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    missing = [p.name for p in parameters if p.kind in keyword and p.default is inspect.Parameter.empty and p.name not in given]
    shown = f"reset({', '.join(map(str, parameters))})"
    listed = ", ".join(columns)
    if missing:
        return [f"{made}, whose {shown} needs column{'s' * (len(missing) > 1)} {', '.join(map(repr, missing))}, which the "
                f"dataset lacks (its columns: {listed}): TRL calls reset(**row) with each row's columns; add the column to "
                "the rows, or give the parameter a default"]
    return [f"{made}, whose {shown} cannot take every column of a row (its columns: {listed}): TRL calls reset(**row) "
            "with all of them; add **row to its parameters"]


def _rollout_func_problems(rollout_func: Any) -> list[str]:
    name = getattr(rollout_func, "__name__", repr(rollout_func))
    try:
        inspect.signature(rollout_func).bind(["prompt"], "trainer")
    except (TypeError, ValueError):
        return [f"rollout_func ({name}) must take (prompts, trainer): TRL calls rollout_func(prompts, trainer) and reads "
                "'prompt_ids', 'completion_ids' and 'logprobs' from the dict it returns"]
    return []
