"""A game served the OpenEnv way as a TRL environment: played directly against servers started here, over HTTP and in
WebSocket sessions, kept apart between rollouts running at once, refused when no healthy server answers, and played by
a tiny model through train(environment_factory=...)."""

import asyncio
import gc
import json
import re
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from stacks import newer_only

from grpo_lite.environments.http_env import http_environment
from grpo_lite.run.settings import ConfigError

SECRET = 5  # the number the game hides unless the reset names another
GUESSES = 3  # an episode ends after this many wrong guesses


class GuessServer(ThreadingHTTPServer):
    """One episode of a number game, as an OpenEnv server holds one: guess the secret from 1 to 9, told higher or
    lower; a right guess pays 1 and ends it, as does the third wrong one."""

    def __init__(self, health="healthy", port: int = 0, lives: int | None = None):
        super().__init__(("127.0.0.1", port), GuessHandler)
        self.health, self.secret, self.guesses, self.over = health, SECRET, 0, False
        self.steps = 0  # over every episode
        self.lives = lives  # resets it serves before it dies, as a server crashing mid-run; None: it lives on
        self.resets = 0
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def die(self):
        """Stop serving and close the port: a crashed server's clients are refused."""
        self.shutdown()
        self.server_close()


class GuessHandler(BaseHTTPRequestHandler):
    server: GuessServer

    def do_GET(self):
        if self.path == "/health":
            self._answer(200, {"status": self.server.health})
        else:
            self._answer(404, {"detail": "Not Found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        game = self.server
        if self.path == "/reset" and game.lives is not None and game.resets >= game.lives:
            self.close_connection = True  # the request goes unanswered, and the server is gone
            threading.Thread(target=game.die).start()
        elif self.path == "/reset":
            game.resets += 1
            game.secret, game.guesses, game.over = body.get("seed", SECRET), 0, False
            self._answer(200, {"observation": {"text": "Guess my number, from 1 to 9."}, "reward": None, "done": False})
        elif self.path == "/step":
            number = body.get("action", {}).get("number")
            if not isinstance(number, int):
                self._answer(422, {"detail": f"number must be an integer, got {number!r}"})
                return
            game.guesses += 1
            game.steps += 1
            told = "correct" if number == game.secret else "higher" if number < game.secret else "lower"
            game.over = told == "correct" or game.guesses == GUESSES
            self._answer(200, {"observation": {"text": told}, "reward": float(told == "correct"), "done": game.over})
        else:
            self._answer(404, {"detail": "Not Found"})

    def _answer(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):  # quiet: pytest shows what a failing test printed
        pass


def started(count, health="healthy", ports=None, lives=None):
    """``count`` game servers on the loopback, each on a port of its own (``ports``: those; default: free ones), each
    dying after ``lives`` resets (None: living on)."""
    servers = [GuessServer(health, port, lives) for port in (ports or [0] * count)]
    for server in servers:
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return servers


@pytest.fixture
def servers():
    """Four game servers on the loopback, one per rollout of a group of four."""
    running = started(4)
    yield running
    for server in running:
        server.shutdown()
        server.server_close()


def number_game(servers, **options):
    return http_environment([server.url for server in servers], action_field="number", action_type=int,
                            choices=list(range(1, 10)), name="NumberServer", **options)


@newer_only("environment_tools")  # transformers 4's get_json_schema takes only text choices
def test_the_act_tool_is_the_one_tool_and_its_schema_tells_the_action(servers):
    from test_environments import tools_trl_offers
    from transformers.utils import get_json_schema

    Game = number_game(servers)
    assert Game.__name__ == "NumberServer" and tools_trl_offers(Game) == ["act"]
    schema = get_json_schema(Game().act)["function"]
    assert schema["parameters"]["properties"]["action"] == {"type": "integer", "enum": list(range(1, 10)),
                                                           "description": "The action to take."}


def test_an_episode_shows_the_servers_answers_sums_its_reward_and_ends(servers):
    game = number_game(servers)()
    assert game.reset(question="Find it.") == "\n\nGuess my number, from 1 to 9."
    assert game.act(2) == "higher\nReward: 0."
    assert servers[0].guesses == 1  # the step went to the server the instance leased
    assert game.act(5) == "correct\nReward: 1. The episode is over."
    assert (game.get_reward(), game.turns, game.done) == (1.0, 2, True)
    with pytest.raises(ValueError, match="the episode is over"):
        game.act(5)
    game.reset(seed=7)  # a row's seed goes to the server's reset
    assert (game.get_reward(), game.turns, game.done, servers[0].secret) == (0.0, 0, False, 7)
    assert [game.act(number) for number in (1, 2, 3)][-1] == "higher\nReward: 0. The episode is over."
    assert game.get_reward() == 0.0


def test_what_the_server_refuses_is_a_failed_tool_call_naming_it(servers):
    game = http_environment(servers[0].url, action_field="guess", action_type=int)()  # the server reads "number"
    game.reset()
    with pytest.raises(ValueError, match=re.escape(f"{servers[0].url}/step answered 422: ") + ".*number must be an integer"):
        game.act(5)
    with pytest.raises(ValueError, match="the action is int, not 'five'"):
        game.act("five")


def test_rollouts_played_at_once_each_play_their_own_server(servers):
    Game = number_game(servers)
    first, second = Game(), Game()
    first.reset(seed=3)
    second.reset(seed=8)  # TRL resets every rollout, then plays them round by round
    assert {first.server, second.server} == {servers[0].url, servers[1].url}
    assert (first.act(4), second.act(4)) == ("lower\nReward: 0.", "higher\nReward: 0.")
    assert (first.act(3), second.act(8)) == ("correct\nReward: 1. The episode is over.",) * 2
    assert [server.guesses for server in servers] == [2, 2, 0, 0]


def test_a_rollout_beyond_the_servers_is_refused_and_a_gone_instance_frees_its_server(servers):
    Game = number_game(servers[:1])
    first = Game()
    first.reset()
    with pytest.raises(ConfigError, match="each of its 1 servers is played by another rollout"):
        Game().reset()
    del first
    Game().reset()


@pytest.mark.parametrize(("servers_given", "message"), [
    ([], "give the servers' base URLs"),
    (["localhost:8000"], "give the servers' base URLs"),
    (["http://127.0.0.1:9/"], re.escape("the server at http://127.0.0.1:9 cannot be played: no answer from "
                                        "http://127.0.0.1:9/health")),
])
def test_a_server_that_cannot_be_played_is_refused_by_its_url(servers_given, message):
    with pytest.raises(ConfigError, match=message):
        http_environment(servers_given)


def test_an_unhealthy_or_repeated_server_is_refused_by_its_url(servers):
    starting = started(1, health="starting")[0]
    try:
        with pytest.raises(ConfigError, match=re.escape(f"the server at {starting.url} is not healthy: {starting.url}"
                                                        "/health answered {'status': 'starting'}")):
            http_environment([servers[0].url, starting.url])
    finally:
        starting.shutdown()
        starting.server_close()
    with pytest.raises(ConfigError, match=re.escape(f"['{servers[0].url}'] given more than once")):
        http_environment([servers[0].url, servers[0].url + "/"])
    with pytest.raises(ConfigError, match="the model's action is one of int, float, str, bool"):
        http_environment(servers[0].url, action_type=list)


class SessionServer:
    """The same game as newer OpenEnv servers serve theirs (openenv-core 0.3.0, openenv/core/env_server/http_server.py,
    ``websocket_endpoint``): a game of its own per connection to ``/ws``, up to ``max_sessions`` at once (one more is
    answered CAPACITY_REACHED and closed, as there), and ``GET /health`` over HTTP on the same port."""

    def __init__(self, max_sessions: int = 2):
        self.max_sessions, self.active, self.sessions, self.steps = max_sessions, 0, 0, 0
        ready = threading.Event()
        self.thread = threading.Thread(target=asyncio.run, args=(self._serve(ready),), daemon=True)
        self.thread.start()
        ready.wait(10)
        self.url = f"ws://127.0.0.1:{self.port}"

    async def _serve(self, ready):
        from websockets.asyncio.server import serve

        self.loop, self.stopped = asyncio.get_running_loop(), asyncio.Event()
        async with serve(self._play, "127.0.0.1", 0, process_request=self._health) as server:
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            await self.stopped.wait()

    def stop(self):
        self.loop.call_soon_threadsafe(self.stopped.set)
        self.thread.join(10)

    @staticmethod
    def _health(connection, request):
        if request.path == "/health":
            return connection.respond(HTTPStatus.OK, json.dumps({"status": "healthy"}))
        if request.path != "/ws":
            return connection.respond(HTTPStatus.NOT_FOUND, "Not Found")
        return None

    async def _play(self, connection):
        if self.active >= self.max_sessions:
            await connection.send(json.dumps({"type": "error", "data": {
                "message": f"Server at capacity: {self.active}/{self.max_sessions} sessions active.", "code": "CAPACITY_REACHED"}}))
            await connection.close()
            return
        self.active += 1
        self.sessions += 1
        secret, guesses = SECRET, 0
        try:
            async for raw in connection:
                message = json.loads(raw)
                data = message.get("data", {})
                if message["type"] == "close":
                    break
                if message["type"] == "reset":
                    secret, guesses = data.get("seed", SECRET), 0
                    answer = {"observation": {"text": "Guess my number, from 1 to 9."}, "reward": None, "done": False}
                elif not isinstance(data.get("number"), int):
                    await connection.send(json.dumps({"type": "error", "data": {
                        "message": "Invalid message", "code": "VALIDATION_ERROR"}}))
                    continue
                else:
                    guesses += 1
                    self.steps += 1
                    told = "correct" if data["number"] == secret else "higher" if data["number"] < secret else "lower"
                    answer = {"observation": {"text": told}, "reward": float(told == "correct"),
                              "done": told == "correct" or guesses == GUESSES}
                await connection.send(json.dumps({"type": "observation", "data": answer}))
        finally:
            self.active -= 1


@pytest.fixture
def session_servers():
    """Two game servers on the loopback with room for two sessions each."""
    running = [SessionServer(max_sessions=2) for _ in range(2)]
    yield running
    for server in running:
        server.stop()


def _until(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def test_websocket_sessions_each_play_a_game_of_their_own_and_end_with_their_instance(session_servers):
    Game = number_game(session_servers)
    first, second = Game(), Game()
    assert first.reset(seed=3) == "\n\nGuess my number, from 1 to 9."
    second.reset(seed=8)
    assert {first.server, second.server} == {server.url for server in session_servers}  # spread over the servers
    assert (first.act(4), second.act(4)) == ("lower\nReward: 0.", "higher\nReward: 0.")
    assert (first.act(3), second.act(8)) == ("correct\nReward: 1. The episode is over.",) * 2
    assert (first.get_reward(), first.turns, first.done) == (1.0, 2, True)
    first.reset(seed=7)  # a new episode in the same session
    assert (first.get_reward(), first.done, first.act(7)) == (0.0, False, "correct\nReward: 1. The episode is over.")
    assert [server.sessions for server in session_servers] == [1, 1]
    del first, second
    gc.collect()
    assert _until(lambda: all(server.active == 0 for server in session_servers))  # each session closed with its instance


def test_a_full_server_passes_a_session_on_and_no_room_anywhere_is_refused(session_servers):
    Game = number_game(session_servers)
    playing = [Game() for _ in range(4)]
    assert len({game.reset() for game in playing}) == 1
    assert [server.active for server in session_servers] == [2, 2]
    with pytest.raises(ConfigError, match="every one of its 2 servers has all its sessions in play: .*max_concurrent_envs"):
        Game().reset()
    playing.pop()
    gc.collect()
    assert _until(lambda: sum(server.active for server in session_servers) == 3)
    Game().reset()  # the room a gone instance left


def test_what_a_websocket_server_refuses_is_a_failed_tool_call_naming_it(session_servers):
    game = http_environment(session_servers[0].url, action_field="guess", action_type=int)()  # the server reads "number"
    game.reset()
    with pytest.raises(ValueError, match=re.escape(f"{session_servers[0].url}/ws answered an error (VALIDATION_ERROR): "
                                                   "Invalid message")):
        game.act(5)
    with pytest.raises(ConfigError, match="played one way, all over HTTP"):
        http_environment([session_servers[0].url, "http://127.0.0.1:9"])


GUESS_FIVE = '<tool_call>\n{"name": "act", "arguments": {"action": 5}}\n</tool_call><|im_end|>'


@pytest.mark.slow
@newer_only("environment_factory")
def test_a_model_plays_a_served_game_through_trl_each_rollout_on_its_own_server(servers, tmp_path):
    from games import EPISODE_STEPS, build_tool_calling_model, called_act

    from grpo_lite import load_model, prepare_dataset, train
    from grpo_lite.monitor.samples import read_samples

    Game = number_game(servers)
    question = "Find my number."
    game = Game()  # TRL appends what reset returns to the question
    lessons = [([game.act], question + game.reset(), GUESS_FIVE)]
    folder = build_tool_calling_model(tmp_path / "model", lessons)
    del game, lessons  # its server back to the pool, for the four rollouts
    model, tokenizer = load_model(str(folder), lora_rank=8)
    rows = prepare_dataset([{"question": question, "answer": ""}] * 4, system_prompt=None)

    train(model, tokenizer, rows, [called_act], output_dir=tmp_path / "run", environment_factory=Game, **EPISODE_STEPS)
    samples = read_samples(tmp_path / "run")
    played = [row for row in samples if len(row["episode"]) >= 2]
    assert played, [row["episode"] for row in samples]
    for row in played:  # the model's guess, then the server's answer; the guess pays the game's reward
        turns = row["episode"]
        assert turns[0]["calls"] == [{"tool": "act", "arguments": {"action": 5}}] and turns[1]["tool"] == "act"
        assert turns[1]["result"] == "correct\nReward: 1. The episode is over."
        assert row["rewards"]["NumberServer"] == 1.0
    assert sum(server.steps for server in servers) >= len(played)  # each guess shown was the server's answer
    assert sum(server.steps > 0 for server in servers) > 1  # rollouts played at once, on servers of their own
