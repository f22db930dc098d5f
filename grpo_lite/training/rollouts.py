"""A rollout beyond one reply: GRPOTrainer's ``tools``, ``environment_factory`` and ``rollout_func``, checked before the
trainer is built and handed to it.

TRL runs them (trl/trainer/grpo_trainer.py): a tool call the model writes is read out of its reply, run, and its result
appended as a ``tool`` message before the model goes on, up to ``max_tool_calling_iterations`` times; an environment is
one object per rollout, ``reset(**row)`` before it, its public methods the tools and its ``get_reward()`` a reward (a dict
of factories: each row picks one by its ``environment`` column); a rollout function replaces generation, called as
``rollout_func(prompts, trainer)``. Each needs releases the T4 stack lacks (``OPTION_NEEDS`` in
grpo_lite/machine/stack.py). What TRL would refuse only inside its trainer, or meet only once a rollout runs (a tool the
model cannot be told about, an environment without ``reset``, a chat template that cannot show a tool call), is refused
here, by name, with the fix.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from ..evaluation.played import environment_tools
from ..machine import stack
from ..model.inference import tool_call_parser, tool_template_advice
from ..run.settings import ROLLOUT_OPTIONS, ConfigError, refuse_lacking_options


def rollout_options(tokenizer, dataset, *, tools=None, environment_factory=None, rollout_func=None,
                    scored_by_environments: bool = False) -> dict[str, Any]:
    """The keywords for GRPOTrainer: the options given, each checked against the installed stack and for what TRL needs
    of it; none where none is given, so a TRL without them is called as before. ``scored_by_environments``: the run has
    no reward functions, so each environment must score its episodes with ``get_reward()``."""
    given = {name: value for name, value in zip(ROLLOUT_OPTIONS, (tools, environment_factory, rollout_func)) if value is not None}
    refuse_lacking_options(given)
    if tools is not None:
        if not isinstance(tools, (list, tuple)):
            raise ConfigError(f"tools={tools!r}: give a list of functions, tools=[...]")
        for i, tool in enumerate(tools):
            _check_tool(tool, f"tools[{i}]")
    if environment_factory is not None:
        _check_environments(environment_factory, dataset, scored_by_environments)
    if rollout_func is not None:
        _check_rollout_func(rollout_func)
    if tools or environment_factory is not None:
        _check_chat_prompts(dataset)
        _check_template(tokenizer)
    return {name: list(value) if name == "tools" else value for name, value in given.items()}


def rendered_tools(options: dict[str, Any], dataset) -> list[list[Any]] | None:
    """The tools each row's prompt is rendered with, as TRL renders them (trl/trainer/grpo_trainer.py,
    ``_tokenize_prompts``): the run's ``tools``, then the methods of the environment the row plays (one made here of each
    kind, as TRL makes one to read them); None where the run has neither."""
    tools = list(options.get("tools") or [])
    factory = options.get("environment_factory")
    if factory is None:
        return [tools] * len(dataset) if tools else None
    if not isinstance(factory, dict):
        return [tools + environment_tools(factory())] * len(dataset)
    methods = {name: environment_tools(factory[name]()) for name in set(map(str, dataset["environment"]))}
    return [tools + methods[str(name)] for name in dataset["environment"]]


def reward_arguments(options: dict[str, Any]) -> list[str]:
    """What the rewards get beside the dataset's columns in a run with ``options``: each rollout's environment, as
    ``environments`` (trl/trainer/grpo_trainer.py, _calculate_rewards)."""
    return ["environments"] if options.get("environment_factory") is not None else []


def _check_tool(tool: Any, where: str) -> None:
    """A tool as TRL runs it: called by its ``__name__``, and described to the model by transformers' get_json_schema
    (its type hints and Google-style docstring), which the chat template writes into the prompt."""
    from transformers.utils import get_json_schema

    if isinstance(tool, functools.partial):
        inner = getattr(tool.func, "__name__", "the function")
        raise ConfigError(f"{where} is a functools.partial of {inner!r}: TRL calls a tool by its __name__ and describes it "
                          "to the model from its signature and docstring, which a partial has not; define a function taking "
                          f"the arguments the model gives, with type hints and a docstring, that calls {inner}")
    if not callable(tool) or not hasattr(tool, "__name__"):
        raise ConfigError(f"{where}={tool!r} is not a function: a tool is a function (or an environment's method) the model "
                          "calls by its name")
    try:
        get_json_schema(tool)
    except Exception as refused:  # transformers' DocstringParsingException, TypeHintParsingException
        raise ConfigError(f"{where} ({tool.__name__}) cannot be described to the model: {refused}. Give every argument a "
                          "type hint and the function a Google-style docstring with an 'Args:' line for each argument "
                          "(transformers' get_json_schema reads them)") from None


def _check_environments(factory: Any, dataset, scored: bool) -> None:
    """Each factory makes an environment (one here, as TRL's trainer makes one to read its tools) with ``reset`` and
    tools TRL can describe; a dict's rows each name one of its environments in their ``environment`` column."""
    if isinstance(factory, dict):
        if not factory or not all(isinstance(key, str) for key in factory):
            raise ConfigError("environment_factory as a dict maps each environment's name (a string, as the rows' "
                              f"'environment' column gives it) to its factory; got the keys {list(factory)}")
        if "environment" not in dataset.column_names:
            raise ConfigError(f"environment_factory is a dict of {', '.join(map(repr, factory))}, and the dataset has no "
                              "'environment' column: give each row the name of the environment it is played in")
        if unknown := sorted(set(map(str, dataset["environment"])) - set(factory)):
            raise ConfigError(f"the dataset's 'environment' column names {', '.join(map(repr, unknown))}, which "
                              f"environment_factory has not (it has {', '.join(map(repr, factory))})")
        for key, each in factory.items():
            _check_environment(each, f"environment_factory[{key!r}]", scored)
    else:
        _check_environment(factory, "environment_factory", scored)


def _check_environment(factory: Any, where: str, scored: bool) -> None:
    if not callable(factory):
        raise ConfigError(f"{where}={factory!r} is not callable: give a class (or function) that makes one environment")
    environment = factory()
    kind = type(environment)
    # TRL reads the methods on the class (a property is not a tool), reset and get_reward apart
    methods = dict(inspect.getmembers(kind, predicate=inspect.isfunction))
    if "reset" not in methods:
        raise ConfigError(f"{where} makes a {kind.__name__}, which has no reset method: TRL calls reset(**row) on each "
                          "environment before its rollout (returning None, or text added to the prompt); define "
                          "def reset(self, **row)")
    if scored and "get_reward" not in methods:
        raise ConfigError(f"{where} makes a {kind.__name__}, which has no get_reward method, and the run has no reward "
                          "functions: its episodes would earn nothing. Define def get_reward(self) -> float, or give rewards")
    for tool in environment_tools(environment):
        _check_tool(tool, f"{where}: {kind.__name__}.{tool.__name__}")


def _check_rollout_func(rollout_func: Any) -> None:
    name = getattr(rollout_func, "__name__", repr(rollout_func))
    try:
        inspect.signature(rollout_func).bind(["prompt"], "trainer")
    except (TypeError, ValueError):
        raise ConfigError(f"rollout_func ({name}) must take (prompts, trainer): TRL calls rollout_func(prompts, trainer) "
                          "and reads 'prompt_ids', 'completion_ids' and 'logprobs' from the dict it returns") from None


def _check_chat_prompts(dataset) -> None:
    if isinstance(dataset[0]["prompt"], str):
        raise ConfigError("tools and environments need chat prompts (lists of messages), which the chat template renders "
                          "with the tools; the rows' prompts are text: build them with "
                          "grpo_lite.prepare_dataset(rows, question=...)")


def _check_template(tokenizer) -> None:
    """The chat template must show the model a tool call and its result, and TRL must read a tool call out of a reply:
    it knows the templates it bundles (trl/chat_template_utils.py, add_response_schema) or takes the tokenizer's own
    ``response_template``/``response_schema``. Checked with TRL's own functions where it has them (``tool_template_check``)."""
    if not stack.newer("tool_template_check"):
        return
    from trl.chat_template_utils import supports_tool_calling

    if not supports_tool_calling(tokenizer):
        raise ConfigError("the tokenizer's chat template cannot render a tool call and its result (TRL's "
                          "supports_tool_calling: user -> assistant with tool_calls -> tool), so the model would never see "
                          f"its tools or what they return. {tool_template_advice(tokenizer)}")
    try:
        tool_call_parser(tokenizer)
    except ValueError:
        raise ConfigError(f"TRL cannot read a tool call out of this chat template's replies. {tool_template_advice(tokenizer)}"
                          ) from None
