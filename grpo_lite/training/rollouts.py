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

from typing import Any

from ..machine import stack
from ..model.inference import tool_call_parser, tool_template_advice
from ..run.rollout_checks import environment_tools, rollout_problems
from ..run.settings import ROLLOUT_OPTIONS, ConfigError, refuse_lacking_options


def rollout_options(tokenizer, dataset, *, tools=None, environment_factory=None, rollout_func=None,
                    scored_by_environments: bool = False) -> dict[str, Any]:
    """The keywords for GRPOTrainer: the options given, each checked against the installed stack and for what TRL needs
    of it; none where none is given, so a TRL without them is called as before. ``scored_by_environments``: the run has
    no reward functions, so each environment must score its episodes with ``get_reward()``."""
    given = {name: value for name, value in zip(ROLLOUT_OPTIONS, (tools, environment_factory, rollout_func)) if value is not None}
    refuse_lacking_options(given)
    found = rollout_problems(given, scored_by_environments=scored_by_environments, columns=dataset.column_names)
    if isinstance(environment_factory, dict) and environment_factory and "environment" in dataset.column_names:
        if unknown := sorted(set(map(str, dataset["environment"])) - set(environment_factory)):
            found.append(f"the dataset's 'environment' column names {', '.join(map(repr, unknown))}, which "
                         f"environment_factory has not (it has {', '.join(map(repr, environment_factory))})")
    if found:
        raise ConfigError("\n".join(found))
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
