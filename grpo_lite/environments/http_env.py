"""A game served the OpenEnv way, as a TRL environment: the model plays it through one tool, ``act``.

OpenEnv's servers (meta-pytorch/OpenEnv, openenv-core 0.3.0, ``openenv/core/env_server/http_server.py``) answer
``GET /health`` with ``{"status": "healthy"}`` and play an episode two ways:

- over HTTP, ``POST /reset`` and ``POST /step`` (``{"action": {...}, "timeout_s": ...}``) answering ``{"observation":
  {...}, "reward": float or null, "done": bool}``. A server whose HTTP endpoints hold the episode (OpenEnv's earlier
  servers, as unsloth_zoo's ``launch_openenv`` starts them) holds one: each instance leases one of the servers given, at
  its first reset, and keeps it while it lives (TRL keeps its instances for the whole run, one per rollout running at
  once, ``num_generations`` times the rollouts per batch); a rollout that finds every server leased is refused, naming
  how many there are.
- over a WebSocket, ``/ws``: each connection is an environment of its own (up to the server's ``max_concurrent_envs``),
  ``{"type": "reset", "data": {...}}`` and ``{"type": "step", "data": action}`` answered ``{"type": "observation",
  "data": {"observation", "reward", "done"}}`` or ``{"type": "error", "data": {"message", "code"}}``. Newer servers
  keep episodes apart only so (their HTTP ``/reset`` and ``/step`` each make and close a fresh environment). Servers
  given as ``ws://host:port`` are played this way: each instance opens a session on the first server with room, at its
  first reset, and closes it when it is gone.

Each instance is an :class:`~grpo_lite.environments.episode.Episode`, where how TRL plays it is told: ``reset`` starts
an episode (a row's ``seed`` column, where it has one, goes with it) and shows its first observation; ``act(action)``
sends the action as one field of the step's action, answers with the observation and the step's reward; the episode's
reward is the sum of its steps'.

    Game = http_environment([f"http://127.0.0.1:{port}" for port in ports], action_field="action_id", action_type=int)
    Game = http_environment("ws://127.0.0.1:8000", action_field="action_id")  # sessions over OpenEnv's WebSocket
    train(model, tokenizer, dataset, rewards, environment_factory=Game, ...)
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import itertools
import json
import re
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
SCHEMES = ("http://", "https://", "ws://", "wss://")


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


class ServerFailure(ConnectionError):
    """A server that did not answer as a server must: no answer, a connection cut mid-reply, an error of its own (5xx),
    or an answer that is not JSON (an HTML page of a proxy or a crashed app). Not the action's fault: the run's guard
    counts it as the server's (grpo_lite/guards/user_code.py)."""


def _shown(answer: bytes) -> str:
    return " ".join(answer.decode(errors="replace").split())[:200]


def _exchange(url: str, body: dict | None, timeout: float) -> Any:
    """The JSON a server answers to a GET (no body) or a POST of ``body``. What it refuses (4xx: the action, the reset's
    data) is a ValueError; an error of its own, silence, a reply cut short or one that is not JSON is a
    :class:`ServerFailure`; each names the URL."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = response.read()
    except urllib.error.HTTPError as refused:
        said = f"{url} answered {refused.code}: {_shown(refused.read())}"
        raise (ServerFailure(said) if refused.code >= 500 else ValueError(said)) from None
    except (urllib.error.URLError, OSError) as silent:
        raise ServerFailure(f"no answer from {url}: {getattr(silent, 'reason', silent)}") from None
    except http.client.HTTPException as cut:  # IncompleteRead, RemoteDisconnected, BadStatusLine: the exchange broke off
        raise ServerFailure(f"{url} broke off its answer ({type(cut).__name__}: {cut})") from None
    try:
        return json.loads(answer or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ServerFailure(f"{url} answered something other than JSON: {_shown(answer)!r}") from None


class _HttpSession:
    """A server whose HTTP endpoints hold its one episode."""

    def __init__(self, server: str, timeout_s: float):
        self.server, self.timeout_s = server, timeout_s

    def reset(self, data: dict) -> dict:
        return self._post("/reset", data)

    def step(self, action: dict) -> dict:
        return self._post("/step", {"action": action, "timeout_s": self.timeout_s})

    def _post(self, path: str, body: dict) -> dict:
        return _played(_exchange(self.server + path, body, self.timeout_s), self.server + path)


class ServerFull(Exception):
    """A server that has no room for another session (OpenEnv's ``CAPACITY_REACHED``)."""


class _WebSocketSession:
    """An environment of its own on a server's ``/ws``, for as long as the connection lasts."""

    def __init__(self, server: str, timeout_s: float):
        from websockets.exceptions import InvalidHandshake
        from websockets.sync.client import connect

        self.server, self.timeout_s = server, timeout_s
        self._open = contextlib.ExitStack()  # the connection stays open for the session's life, closed by close()
        try:
            self.connection = self._open.enter_context(connect(server + "/ws", open_timeout=timeout_s, proxy=None))
        except (OSError, InvalidHandshake) as silent:
            raise ServerFailure(f"no answer from {server}/ws: {silent}") from None

    def reset(self, data: dict) -> dict:
        return self._send({"type": "reset", "data": data})

    def step(self, action: dict) -> dict:
        return self._send({"type": "step", "data": action})

    def _send(self, message: dict) -> dict:
        from websockets.exceptions import ConnectionClosed

        try:
            self.connection.send(json.dumps(message))
        except ConnectionClosed:
            pass  # a server that refused the session said why before it closed: that answer is read next
        try:
            answer = json.loads(self.connection.recv(timeout=self.timeout_s))
        except (ConnectionClosed, TimeoutError) as lost:
            raise ServerFailure(f"{self.server}/ws: the session ended ({lost})") from None
        except json.JSONDecodeError:
            raise ServerFailure(f"{self.server}/ws answered something other than JSON") from None
        data = answer.get("data") if isinstance(answer, dict) else None
        if isinstance(answer, dict) and answer.get("type") == "error":
            refusal = data if isinstance(data, dict) else {}
            if refusal.get("code") == "CAPACITY_REACHED":
                raise ServerFull(str(refusal.get("message", "")))
            raise ValueError(f"{self.server}/ws answered an error ({refusal.get('code')}): {refusal.get('message')}")
        return _played(data, f"{self.server}/ws")

    def close(self) -> None:
        try:
            self.connection.send(json.dumps({"type": "close"}))
        except Exception:  # a connection the server closed already: nothing left to end
            pass
        self._open.close()


def _played(answer: Any, where: str) -> dict:
    reward = answer.get("reward") if isinstance(answer, dict) else None
    if not isinstance(answer, dict) or "observation" not in answer or not (reward is None or isinstance(reward, (int, float))):
        raise ServerFailure(f"{where} answered {str(answer)[:200]!r}, not OpenEnv's "
                            '{"observation": {...}, "reward": a number or null, "done": ...}')
    return answer


class HttpEnvironment(Episode):
    """One episode at a time, on a server this instance leases (HTTP) or in a session of its own (WebSocket);
    subclasses made by :func:`http_environment` name the servers, the action and the ``act`` tool."""

    # private names: TRL offers every public function of the class as a tool, static ones included
    _servers: tuple[str, ...]
    _over_websocket: bool
    _free: list[str]
    _openings: itertools.count
    _lease_lock: threading.Lock
    _action_field: str
    _action_type: type
    _action_fields: dict[str, Any]
    _show: Callable[[dict], str]
    _timeout_s: float

    def __init__(self):
        super().__init__()
        self.server: str | None = None
        self._session: _HttpSession | _WebSocketSession | None = None

    def reset(self, **row) -> str:
        seed = row.get("seed")
        data = {} if seed is None else {"seed": int(seed)}
        if self._session is None and self._over_websocket:
            self._session, answer = self._open_session(data)
        else:
            if self._session is None:
                self._session = _HttpSession(self._lease(), self._timeout_s)
            answer = self._session.reset(data)
        self.server = self._session.server
        self._begin()
        self.terminated = bool(answer.get("done"))
        return "\n\n" + self._show(answer.get("observation") or {})

    def _act(self, action) -> str:
        self._refuse_when_over()
        kind = self._action_type
        if isinstance(action, str) != (kind is str):
            raise ValueError(f"the action is {kind.__name__}, not {action!r}")
        answer = self._session.step({**self._action_fields, self._action_field: kind(action)})
        return self._stepped(self._show(answer.get("observation") or {}), float(answer.get("reward") or 0.0),
                             bool(answer.get("done")))

    def _lease(self) -> str:
        kind = type(self)
        with kind._lease_lock:
            if not kind._free:
                raise ConfigError(f"{kind.__name__}: each of its {len(kind._servers)} servers is played by another "
                                   "rollout: a server holds one episode, and TRL plays one environment per rollout at "
                                   "once (num_generations times the rollouts per batch); start that many servers and "
                                   "give them all to http_environment, or play newer servers' sessions (ws://host:port)")
            server = kind._free.pop(0)
        weakref.finalize(self, kind._free.append, server)  # back in the pool once this instance is gone
        return server

    def _open_session(self, data: dict) -> tuple[_WebSocketSession, dict]:
        """A session on the first server with room, and its first reset's answer; each instance starts looking one
        server further on than the last, so sessions spread over the servers."""
        kind = type(self)
        with kind._lease_lock:
            first = next(kind._openings) % len(kind._servers)
        for server in kind._servers[first:] + kind._servers[:first]:
            session = _WebSocketSession(server, self._timeout_s)
            try:
                answer = session.reset(data)  # a full server says so in answer to the first message
            except ServerFull:
                session.close()
                continue
            weakref.finalize(self, session.close)  # the server's environment ends with this instance
            return session, answer
        raise ConfigError(f"{kind.__name__}: every one of its {len(kind._servers)} servers has all its sessions in play: "
                          "TRL plays one environment per rollout at once (num_generations times the rollouts per "
                          "batch); start the servers with a higher max_concurrent_envs, or more servers")


def http_environment(servers: str | Sequence[str], *, action_field: str = "action_id", action_type: type = int,
                     choices: Sequence | None = None, action_fields: Mapping[str, Any] | None = None,
                     action_description: str = "The action to take.", show: Callable[[dict], str] | None = None,
                     name: str = "HttpEnvironment", timeout_s: float = 30.0) -> type[HttpEnvironment]:
    """The environment class for TRL's ``environment_factory=``: each instance plays on one of ``servers``, OpenEnv
    servers' base URLs: ``http://host:port`` servers over HTTP, one per rollout running at once; ``ws://host:port``
    servers in sessions of their own over ``/ws``, as many at once as the servers have room for.

    The model's action is sent as ``{action_field: action}``, beside the constant ``action_fields`` (OpenSpiel's
    ``{"game_name": ...}``); ``action_type`` (int, float, str or bool) and ``choices`` are what the tool's schema tells
    the model, with ``action_description``. The model sees each observation as ``show(observation)`` (default:
    :func:`shown_as_text`). ``name`` is the class's, which names the environment's reward on the dashboard. Every
    server's ``/health`` is asked here, so a server that does not answer, or is not healthy, is refused by its URL
    before the model loads.
    """
    urls = [servers] if isinstance(servers, str) else list(servers)
    urls = [url.rstrip("/") if isinstance(url, str) else url for url in urls]
    schemes = {url.split("://")[0] for url in urls if isinstance(url, str) and "://" in url}
    if not urls or not all(isinstance(url, str) and url.startswith(SCHEMES) for url in urls):
        raise ConfigError(f"http_environment(servers={servers!r}): give the servers' base URLs, http://host:port (one "
                          "per rollout running at once) or ws://host:port (OpenEnv's WebSocket sessions)")
    over_websocket = schemes <= {"ws", "wss"}
    if not over_websocket and schemes & {"ws", "wss"}:
        raise ConfigError(f"http_environment(servers={servers!r}): the servers are played one way, all over HTTP "
                          "(http://) or all in WebSocket sessions (ws://)")
    if over_websocket and importlib.util.find_spec("websockets") is None:
        raise ConfigError("http_environment: ws:// servers are played with the websockets package, which is not "
                          "installed: pip install 'grpo-lite[environments]'")
    if len(set(urls)) != len(urls):
        raise ConfigError(f"http_environment: {sorted({u for u in urls if urls.count(u) > 1})} given more than once: a "
                          "server is played by the instances it is given to once")
    if action_type not in ACTION_TYPES:
        raise ConfigError(f"http_environment(action_type={action_type!r}): the model's action is one of "
                          f"{', '.join(kind.__name__ for kind in ACTION_TYPES)}")
    for url in urls:
        try:  # a WebSocket server answers its health over HTTP, on the same port
            health = _exchange(re.sub("^ws", "http", url) + "/health", None, min(timeout_s, HEALTH_TIMEOUT_S))
        except (ValueError, ConnectionError) as error:
            raise ConfigError(f"http_environment: the server at {url} cannot be played: {error}. Start it first "
                              "(python -m uvicorn <app> --host 127.0.0.1 --port <port>)") from None
        if not isinstance(health, dict) or health.get("status") != "healthy":
            raise ConfigError(f"http_environment: the server at {url} is not healthy: {url}/health answered "
                              f'{health!r}, not {{"status": "healthy"}}')
    return type(name, (HttpEnvironment,), {
        "_servers": tuple(urls),
        "_over_websocket": over_websocket,
        "_free": list(urls),
        "_openings": itertools.count(),
        "_lease_lock": threading.Lock(),
        "_action_field": action_field,
        "_action_type": action_type,
        "_action_fields": dict(action_fields or {}),
        "_show": staticmethod(show or shown_as_text),
        "_timeout_s": float(timeout_s),
        "act": act_tool(action_type, action_description, choices),
        "__doc__": f"A game served at {', '.join(urls)}, played through the act tool.",
    })
