"""A gymnasium environment as a TRL environment: the model plays it through one tool, ``act``.

Each instance is an :class:`~grpo_lite.environments.episode.Episode`, where how TRL plays it is told.
``gymnasium_environment`` makes that class for one gymnasium environment with a discrete action space: ``act(action)``
takes one of the named actions (the tool's schema lists them as an enum), answers with what the game shows next and the
step's reward, and the episode's reward is the sum of its steps'. A row's ``seed`` column, where it has one, seeds the episode.

    FrozenLake = gymnasium_environment("FrozenLake-v1", actions=["left", "down", "right", "up"], is_slippery=False)
    train(model, tokenizer, dataset, rewards, environment_factory=FrozenLake, ...)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..run.settings import ConfigError
from .episode import Episode, act_tool

# toy-text games mark the player's cell by colouring it; a text model sees it in brackets instead
_HIGHLIGHT = re.compile(r"\x1b\[[0-9;]*m(.*?)\x1b\[0m", re.DOTALL)
_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def plain_text(ansi: str) -> str:
    """A toy-text frame without terminal colours, each highlighted span in brackets.

    >>> plain_text("\\x1b[41mS\\x1b[0mFF\\nFHG")
    '[S]FF\\nFHG'
    """
    return _ESCAPE.sub("", _HIGHLIGHT.sub(r"[\1]", ansi)).strip("\n")


class GymnasiumEnvironment(Episode):
    """One episode of a gymnasium environment at a time; subclasses made by :func:`gymnasium_environment` name the
    environment, its actions and the ``act`` tool."""

    # private names: TRL offers every public function of the class as a tool, static ones included
    _make: Callable[[], Any]
    _action_names: dict[str, int]
    _show: Callable[[Any, Any], str] | None

    def __init__(self):
        super().__init__()
        self._env = type(self)._make()

    def reset(self, **row) -> str:
        seed = row.get("seed")
        observation, _ = self._env.reset(seed=int(seed) if seed is not None else None)
        self._begin()
        return "\n\n" + self._observed(observation)

    def _act(self, action: str) -> str:
        self._refuse_when_over()
        if action not in self._action_names:
            raise ValueError(f"unknown action {action!r}: take one of {', '.join(self._action_names)}")
        observation, reward, terminated, truncated, _ = self._env.step(self._action_names[action])
        return self._stepped(self._observed(observation), float(reward), terminated, truncated)

    def _observed(self, observation) -> str:
        if self._show is not None:
            return self._show(self._env, observation)
        if self._env.render_mode == "ansi":
            return plain_text(self._env.render())
        return str(observation)


def gymnasium_environment(env_id: str, *, actions: Sequence[str] | Mapping[str, int] | None = None,
                          show: Callable[[Any, Any], str] | None = None, name: str | None = None,
                          **make_kwargs: Any) -> type[GymnasiumEnvironment]:
    """The environment class for TRL's ``environment_factory=``: each instance plays ``gymnasium.make(env_id,
    **make_kwargs)``, shown as text (its ``ansi`` rendering where it has one, else ``show(env, observation)``, else the
    observation itself).

    ``actions`` names the discrete actions, in order (``["left", "down", "right", "up"]``) or as ``{name: action}``;
    without it the actions are called by their numbers. ``name`` is the class's, which names the environment's reward
    on the dashboard (default: from ``env_id``). The environment is made once here, so a wrong id, a missing
    gymnasium or an action space without discrete actions is refused before the model loads.
    """
    try:
        import gymnasium
    except ImportError:
        raise ConfigError("gymnasium_environment needs gymnasium: pip install gymnasium") from None
    try:
        probe = gymnasium.make(env_id, **make_kwargs)
    except Exception as error:
        raise ConfigError(f"gymnasium_environment({env_id!r}): gymnasium cannot make it: {error}") from None
    if not isinstance(probe.action_space, gymnasium.spaces.Discrete):
        raise ConfigError(f"gymnasium_environment({env_id!r}): its action space is {probe.action_space}, and the model "
                          "names its actions: use an environment with discrete actions (gymnasium.spaces.Discrete)")
    count, start = int(probe.action_space.n), int(probe.action_space.start)
    render = "ansi" if "ansi" in probe.metadata.get("render_modes", ()) and show is None else None
    probe.close()
    if actions is None:
        actions = [str(start + i) for i in range(count)]
    if isinstance(actions, Mapping):
        action_names = {str(k): int(v) for k, v in actions.items()}
    else:
        action_names = {str(a): start + i for i, a in enumerate(actions)}
    outside = sorted(set(action_names.values()) - set(range(start, start + count)))
    if len(action_names) != len(set(action_names.values())) or outside or (not isinstance(actions, Mapping) and len(actions) != count):
        raise ConfigError(f"gymnasium_environment({env_id!r}, actions={list(actions)!r}): name each of its {count} actions "
                          f"({start} to {start + count - 1}) once, in order, or map names to them")
    options = {**make_kwargs, **({"render_mode": render} if render else {})}
    class_name = name or re.sub(r"\W", "", env_id.split("/")[-1].rsplit("-v", 1)[0])
    return type(class_name, (GymnasiumEnvironment,), {
        "_make": staticmethod(lambda: gymnasium.make(env_id, **options)),
        "_action_names": action_names,
        "_show": staticmethod(show) if show else None,
        "act": act_tool(str, "The action to take.", list(action_names)),
        "__doc__": f"{env_id}, played through the act tool.",
    })
