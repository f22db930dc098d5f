"""What every environment here shares as the class TRL's ``environment_factory=`` instantiates: one episode at a time,
played through one tool, ``act``, its reward the sum of its steps'.

TRL's GRPOTrainer (1.15) calls the factory with no arguments and pools the instances, one per rollout running at once;
calls ``reset(**row)`` before each rollout and appends what it returns to the prompt; offers every public function of the
class but ``reset`` and ``get_reward`` as a tool, described by its docstring and type hints (transformers'
``get_json_schema``), so what is not a tool has a private name; records a tool's exception as a failed call; and scores
each rollout with ``get_reward()``, a reward named after the class.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence


class Episode:
    """The reward, turns and end of the episode being played; subclasses take the step (``_act``) and add the tool
    (:func:`act_tool`)."""

    def __init__(self):
        self._begin()

    def _begin(self) -> None:
        self.reward = 0.0
        self.turns = 0
        self.terminated = self.truncated = False

    def get_reward(self) -> float:
        return self.reward

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    def _refuse_when_over(self) -> None:
        if self.done:
            raise ValueError("the episode is over: no more actions")

    def _stepped(self, shown: str, reward: float, terminated: bool, truncated: bool = False) -> str:
        """What the tool answers for one step: what the game shows next, the step's reward, and whether it ended."""
        self.reward += reward
        self.turns += 1
        self.terminated, self.truncated = terminated, truncated
        ended = " The episode is over." if terminated else " The episode ran out of turns." if truncated else ""
        return f"{shown}\nReward: {reward:g}.{ended}"


def act_tool(argument: type, described: str, choices: Sequence | None = None) -> Callable:
    """The ``act(action)`` tool, calling the environment's ``_act``: its argument's type and description, and its choices
    where there are some, are what the model is told."""
    def act(self, action):
        return self._act(action)

    act.__annotations__ = {"action": argument, "return": str}
    # the schema TRL renders into the prompt comes from this docstring; "(choices: [...])" becomes the argument's enum
    listed = f" (choices: {json.dumps(list(choices))})" if choices else ""
    act.__doc__ = f"Take one action in the game and see what happens next.\n\nArgs:\n    action: {described}{listed}\n"
    return act
