"""A game served over OpenEnv's HTTP protocol as a TRL environment: played directly against servers started here, kept
apart between rollouts running at once, refused when no healthy server answers, and played by a tiny model through
train(environment_factory=...)."""

import json
import re
import threading
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

    def __init__(self, health="healthy"):
        super().__init__(("127.0.0.1", 0), GuessHandler)
        self.health, self.secret, self.guesses, self.over = health, SECRET, 0, False
        self.steps = 0  # over every episode
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


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
        if self.path == "/reset":
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


def started(count, health="healthy"):
    servers = [GuessServer(health) for _ in range(count)]
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
