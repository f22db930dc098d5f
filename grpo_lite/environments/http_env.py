"""A game served over HTTP, the OpenEnv way, as a TRL environment: the model plays it through one tool, ``act``.

The server speaks OpenEnv's HTTP protocol (meta-pytorch/OpenEnv, ``register_routes`` in its env server): ``GET /health``
answers ``{"status": "healthy"}``; ``POST /reset`` and ``POST /step`` (``{"action": {...}, "timeout_s": ...}``) answer
``{"observation": {...}, "reward": float or null, "done": bool}``. Each instance is an
:class:`~grpo_lite.environments.episode.Episode`, where how TRL plays it is told: ``reset`` starts an episode (a row's
``seed`` column, where it has one, goes in the body) and shows its first observation; ``act(action)`` sends the action
as one field of the step's action, answers with the observation and the step's reward; the episode's reward is the sum
of its steps'.

Such a server holds one episode, while TRL plays one instance per rollout, interleaved (every rollout resets, then the
tool calls go round by round). So concurrent rollouts never share a server: each instance leases one of the servers
given, at its first reset, and keeps it while it lives (TRL keeps its instances for the whole run, one per rollout
running at once, ``num_generations`` times the rollouts per batch); a rollout that finds every server leased is
refused, naming how many there are. Newer OpenEnv servers keep episodes apart themselves only over their WebSocket
(``/ws``: one environment per connection, up to ``max_concurrent_envs``), and there their HTTP ``/reset`` and ``/step``
each make and close a fresh environment, so an episode does not go on over HTTP: this adapter plays servers whose HTTP
endpoints hold the episode (OpenEnv's earlier servers, as unsloth_zoo's ``launch_openenv`` starts them), one per
concurrent rollout.

    Game = http_environment([f"http://127.0.0.1:{port}" for port in ports], action_field="action_id", action_type=int)
    train(model, tokenizer, dataset, rewards, environment_factory=Game, ...)
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..run.settings import ConfigError
from .episode import Episode, act_tool

ACTION_TYPES = (int, float, str, bool)  # what a tool's JSON schema can describe as one argument
HEALTH_TIMEOUT_S = 10.0


def shown_as_text(observation: Mapping[str, Any]) -> str:
    """An observation as the model reads it: a lone field as it is, several as ``name: value`` lines.

    >>> shown_as_text({"text": "higher"})
    'higher'
    >>> print(shown_as_text({"board": "..X", "legal_actions": [0, 1]}))
    board: ..X
    legal_actions: [0, 1]
    """
    def text(value):
        return value if isinstance(value, str) else json.dumps(value)

    if len(observation) == 1:
        return text(next(iter(observation.values())))
    return "\n".join(f"{key}: {text(value)}" for key, value in observation.items())


def _exchange(url: str, body: dict | None, timeout: float) -> Any:
    """The JSON a server answers to a GET (no body) or a POST of ``body``; its refusal or silence as an error naming
    the URL."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as refused:
        raise ValueError(f"{url} answered {refused.code}: {refused.read().decode(errors='replace')[:500]}") from None
    except (urllib.error.URLError, OSError) as silent:
        raise ConnectionError(f"no answer from {url}: {getattr(silent, 'reason', silent)}") from None
    except json.JSONDecodeError:
        raise ValueError(f"{url} answered something other than JSON") from None


class HttpEnvironment(Episode):
    """One episode at a time, on a server this instance leases; subclasses made by :func:`http_environment` name the
    servers, the action and the ``act`` tool."""

    # private names: TRL offers every public function of the class as a tool, static ones included
    _servers: tuple[str, ...]
    _free: list[str]
    _lease_lock: threading.Lock
    _action_field: str
    _action_type: type
    _action_fields: dict[str, Any]
    _show: Callable[[dict], str]
    _timeout_s: float

    def __init__(self):
        super().__init__()
        self.server: str | None = None

    def reset(self, **row) -> str:
        if self.server is None:
            self.server = self._lease()
        seed = row.get("seed")
        answer = self._post("/reset", {} if seed is None else {"seed": int(seed)})
        self._begin()
        self.terminated = bool(answer.get("done"))
        return "\n\n" + self._show(answer.get("observation") or {})

    def _act(self, action) -> str:
        self._refuse_when_over()
        kind = self._action_type
        if isinstance(action, str) != (kind is str):
            raise ValueError(f"the action is {kind.__name__}, not {action!r}")
        step = {"action": {**self._action_fields, self._action_field: kind(action)}, "timeout_s": self._timeout_s}
        answer = self._post("/step", step)
        return self._stepped(self._show(answer.get("observation") or {}), float(answer.get("reward") or 0.0),
                             bool(answer.get("done")))

    def _lease(self) -> str:
        kind = type(self)
        with kind._lease_lock:
            if not kind._free:
                raise ConfigError(f"{kind.__name__}: each of its {len(kind._servers)} servers is played by another "
                                   "rollout: a server holds one episode, and TRL plays one environment per rollout at "
                                   "once (num_generations times the rollouts per batch); start that many servers and "
                                   "give them all to http_environment")
            server = kind._free.pop(0)
        weakref.finalize(self, kind._free.append, server)  # back in the pool once this instance is gone
        return server

    def _post(self, path: str, body: dict) -> dict:
        answer = _exchange(self.server + path, body, self._timeout_s)
        if not isinstance(answer, dict) or "observation" not in answer:
            raise ValueError(f"{self.server}{path} answered {answer!r}, not OpenEnv's "
                             '{"observation": {...}, "reward": ..., "done": ...}')
        return answer


def http_environment(servers: str | Sequence[str], *, action_field: str = "action_id", action_type: type = int,
                     choices: Sequence | None = None, action_fields: Mapping[str, Any] | None = None,
                     action_description: str = "The action to take.", show: Callable[[dict], str] | None = None,
                     name: str = "HttpEnvironment", timeout_s: float = 30.0) -> type[HttpEnvironment]:
    """The environment class for TRL's ``environment_factory=``: each instance plays on one of ``servers`` (base URLs,
    one per rollout running at once) over OpenEnv's HTTP protocol.

    The model's action is sent as ``{action_field: action}``, beside the constant ``action_fields`` (OpenSpiel's
    ``{"game_name": ...}``); ``action_type`` (int, float, str or bool) and ``choices`` are what the tool's schema tells
    the model, with ``action_description``. The model sees each observation as ``show(observation)`` (default:
    :func:`shown_as_text`). ``name`` is the class's, which names the environment's reward on the dashboard. Every
    server's ``/health`` is asked here, so a server that does not answer, or is not healthy, is refused by its URL
    before the model loads.
    """
    urls = [servers] if isinstance(servers, str) else list(servers)
    urls = [url.rstrip("/") if isinstance(url, str) else url for url in urls]
    if not urls or not all(isinstance(url, str) and url.startswith(("http://", "https://")) for url in urls):
        raise ConfigError(f"http_environment(servers={servers!r}): give the servers' base URLs, "
                          "http://host:port, one per rollout running at once")
    if len(set(urls)) != len(urls):
        raise ConfigError(f"http_environment: {sorted({u for u in urls if urls.count(u) > 1})} given more than once: a "
                          "server holds one episode, so each rollout running at once needs a server of its own")
    if action_type not in ACTION_TYPES:
        raise ConfigError(f"http_environment(action_type={action_type!r}): the model's action is one of "
                          f"{', '.join(kind.__name__ for kind in ACTION_TYPES)}")
    for url in urls:
        try:
            health = _exchange(url + "/health", None, min(timeout_s, HEALTH_TIMEOUT_S))
        except (ValueError, ConnectionError) as error:
            raise ConfigError(f"http_environment: the server at {url} cannot be played: {error}. Start it first "
                              "(python -m uvicorn <app> --host 127.0.0.1 --port <port>)") from None
        if not isinstance(health, dict) or health.get("status") != "healthy":
            raise ConfigError(f"http_environment: the server at {url} is not healthy: {url}/health answered "
                              f'{health!r}, not {{"status": "healthy"}}')
    return type(name, (HttpEnvironment,), {
        "_servers": tuple(urls),
        "_free": list(urls),
        "_lease_lock": threading.Lock(),
        "_action_field": action_field,
        "_action_type": action_type,
        "_action_fields": dict(action_fields or {}),
        "_show": staticmethod(show or shown_as_text),
        "_timeout_s": float(timeout_s),
        "act": act_tool(action_type, action_description, choices),
        "__doc__": f"A game served at {', '.join(urls)}, played through the act tool.",
    })
