"""User code made from the kinds of behaviour a user's code has, not from a list of cases: tools, environments (their
``reset``, tools and ``get_reward``), rollout functions, and the game servers they call on the loopback.

Each draw is built from what it does: answers (text, a number, None, NaN, a list, a dict), raises, hangs, returns what the
trainer cannot use (a number from ``reset``; NaN, None, infinity or text from ``get_reward``; a rollout's dict without a
key, with a list one short, text for token ids, a NaN log-probability, an ``env_mask`` of other values); a tool that calls
a server, and an environment played on one (``http_environment``), whose server answers, refuses the action (422), fails
(500), answers an HTML page or JSON of another shape, cuts its reply short, closes the connection unanswered, or does
not answer in time.

The contract, for every draw, called as TRL calls it through grpo-lite's guard (grpo_lite/guards/user_code.py): the call
answers what the trainer needs, or fails one of the guard's ways, said naming the callable (a server's failure its URL
too), the row where there is one, and what to do: a tool's failure is what the model is told (its own exception as it
is; a hang or a server's failure counted towards stopping the run); a failed ``reset`` leaves its episode unplayed, its
tools answering so and its reward None; a ``get_reward`` that fails scores None, as a reward does; a rollout function's
failure raises CallFailed. Nothing else comes out of a call: no http.client or urllib error, no bare ConnectionError,
no TypeError of TRL's.

Through ``train()``: on the latest stack a few draws train one real step of the session's tiny model (the run goes on, or
stops as a UserCodeFailure naming the callable, its steps saved); on the T4 stack, whose TRL has no tools, environments or
rollout functions, ``train``, ``evaluate`` and ``preview`` refuse every draw before anything runs, naming the stack.
"""

import asyncio
import contextlib
import functools
import json
import logging
import math
import re
import socket
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from families import TOOL_CALLING
from generated import TRAININGS, bounded, judge
from hypothesis import given
from hypothesis import strategies as st

from grpo_lite import evaluate, load_model, prepare_dataset, preview, read_metrics, train
from grpo_lite.environments.http_env import http_environment
from grpo_lite.guards.user_code import CallFailed, UserCodeFailure, environment_reward, guard, guarded_environment, guarded_rollout, guarded_tool
from grpo_lite.machine import stack
from grpo_lite.run.settings import ConfigError
from rewards.calling import run_coroutine

LIMIT = 0.6  # seconds a drawn call may take (tool_timeout, reward_timeout, rollout_timeout): a hang is cut at it
SERVER_TIMEOUT = 0.2  # the seconds http_environment waits on the server (a tool calling it as long): within LIMIT
NAP = 30.0  # a hang: far past every limit
# Classes of input that fail today, each with what it does now; an entry goes when its fix is in.
KNOWN_DEFECTS: dict[str, str] = {}


# --- a game server on the loopback that misbehaves as drawn ----------------------------------------------------------

SERVER_BEHAVIOURS = ("answers", "refuses the action", "fails (500)", "answers HTML", "answers other JSON", "cuts its reply",
                     "closes unanswered", "does not answer in time")
# what each is, for the guard: the server's failure (counted, said with its URL), or an answer the call reads
SERVER_FAILS = {"fails (500)", "answers HTML", "answers other JSON", "cuts its reply", "closes unanswered",
                "does not answer in time"}


class Misbehaving(ThreadingHTTPServer):
    """An OpenEnv-like game server (``/health``, ``/reset``, ``/step``) whose answers to ``/reset`` and ``/step`` are the
    draw's (:attr:`behaviour`)."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), MisbehavingHandler)
        self.behaviour = {"reset": "answers", "step": "answers"}
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class MisbehavingHandler(BaseHTTPRequestHandler):
    server: Misbehaving

    def do_GET(self):
        self._send(200, json.dumps({"status": "healthy"}))

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        how = self.server.behaviour.get(self.path.strip("/"), "answers")
        if how == "answers":
            self._send(200, json.dumps({"observation": {"text": "go on"}, "reward": 0.5, "done": False}))
        elif how == "refuses the action":
            self._send(422, json.dumps({"detail": "action must be 1 to 3"}))
        elif how == "fails (500)":
            self._send(500, "Internal Server Error")
        elif how == "answers HTML":
            self._send(200, "<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html")
        elif how == "answers other JSON":
            self._send(200, json.dumps({"status": "ok"}))
        elif how == "cuts its reply":
            self.send_response(200)
            self.send_header("Content-Length", "400")
            self.end_headers()
            self.wfile.write(b'{"observation": {"te')
            self.close_connection = True
        elif how == "closes unanswered":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        else:  # does not answer in time
            time.sleep(SERVER_TIMEOUT * 4)
            with contextlib.suppress(OSError):
                self._send(200, json.dumps({"observation": {"text": "late"}, "reward": 0.0, "done": False}))

    def _send(self, status: int, body: str, kind: str = "application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    running = Misbehaving()
    threading.Thread(target=running.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield running
    running.shutdown()
    running.server_close()


# --- what is said ------------------------------------------------------------------------------------------------------

class Said(logging.Handler):
    """grpo-lite's messages while a draw runs (caplog is one per test, and a test here runs many draws)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)

    def warnings(self) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno >= logging.WARNING]

    def lines(self) -> list[str]:
        return [r.getMessage() for r in self.records]


@contextlib.contextmanager
def said():
    handler = Said()
    logger = logging.getLogger("grpo_lite")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


# --- tools -------------------------------------------------------------------------------------------------------------

ANSWERS = {"text": "it is 4", "a number": 5, "None": None, "NaN": math.nan, "a list": [1, 2], "a dict": {"a": 1},
           "a numpy number": np.float32(0.5)}
TOOL_BEHAVIOURS = ("answers", "raises", "hangs", "calls the server")


@dataclass(frozen=True)
class ToolDraw:
    """One drawn tool: what it does, what it answers, whether it is ``async def``, and its server's behaviour."""

    behaviour: str
    answer: str = "text"
    is_async: bool = False
    server: str = "answers"

    def outcome(self) -> str:
        """``answers``, ``own`` (its own exception, the model told), ``hang`` or ``server`` (both counted)."""
        if self.behaviour == "hangs":
            return "hang"
        if self.behaviour == "raises":
            return "own"
        if self.behaviour == "calls the server":
            if self.server in ("answers", "answers other JSON"):
                return "answers"
            # 422 is the action refused, HTML the tool's own json.loads failing: the tool's exceptions, told the model
            return "own" if self.server in ("refuses the action", "answers HTML") else "server"
        return "answers"

    def expected(self):
        value = ANSWERS[self.answer] if self.behaviour == "answers" else {"observation": {"text": "go on"}, "reward": 0.5,
                                                                          "done": False}
        if self.behaviour == "calls the server" and self.server == "answers other JSON":
            value = {"status": "ok"}
        return value if isinstance(value, list) else str(value)


tool_draws = st.builds(ToolDraw, st.sampled_from(TOOL_BEHAVIOURS), st.sampled_from(list(ANSWERS)), st.booleans(),
                       st.sampled_from(SERVER_BEHAVIOURS))


def build_tool(draw: ToolDraw, url: str):
    """The tool ``draw`` describes: ``fetch(action)``, typed and documented as TRL needs."""
    def act(action: int):
        if draw.behaviour == "raises":
            raise ValueError(f"no action {action} here")
        if draw.behaviour == "hangs":
            time.sleep(NAP)
        if draw.behaviour == "calls the server":
            request = urllib.request.Request(f"{url}/step", data=json.dumps({"action": action}).encode(),
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=SERVER_TIMEOUT) as response:
                return json.loads(response.read())
        return ANSWERS[draw.answer]

    if draw.is_async:
        async def fetch(action: int):
            await asyncio.sleep(0)
            return act(action)
    else:
        def fetch(action: int):
            return act(action)
    fetch.__doc__ = "Take an action.\n\nArgs:\n    action: The action, 1 to 3.\n"
    return fetch


def _call(tool, *args, **kwargs):
    result = tool(*args, **kwargs)
    return run_coroutine(result) if asyncio.iscoroutine(result) else result


def _assert_said_once(lines: list[str], *words: str) -> None:
    matching = [line for line in lines if all(word in line for word in words)]
    assert len(matching) == 1, f"said {len(matching)} times, not once, with {words}: {lines}"


def tool_ends(draw: ToolDraw, url: str) -> str:
    """One call of the drawn tool, guarded as training guards it, as TRL calls it (``fetch(**arguments)``)."""
    tool = guarded_tool(build_tool(draw, url), LIMIT)
    outcome = draw.outcome()
    with said() as messages:
        try:
            answer = _call(tool, action=3)
        except CallFailed as failed:
            assert outcome in ("hang", "server"), f"{draw}: the guard failed the call ({failed}), which {outcome}"
            assert tool.guard.consecutive_failures == 1, f"{draw}: not counted"
            said_line = {"hang": "raise tool_timeout", "server": "Start the server"}[outcome]
            _assert_said_once(messages.warnings(), "tool 'fetch' failed (fetch(action=3)): ", said_line)
            assert (f"did not return within tool_timeout={LIMIT:g} s" in str(failed)) == (outcome == "hang"), str(failed)
            return "refused"
        except Exception as own:  # the tool's own: raised as it is, for TRL to tell the model str(error)
            assert outcome == "own", f"{draw}: {type(own).__name__}: {own} came out of the guard"
            assert tool.guard.consecutive_failures == 0, f"{draw}: a wrong call the model made was counted"
            _assert_said_once(messages.lines(), "tool 'fetch' failed (fetch(action=3)): it raised ")
            return "refused"
    assert outcome == "answers", f"{draw}: answered {answer!r}"
    assert answer == draw.expected() and not messages.warnings(), f"{draw}: {answer!r}, said {messages.lines()}"
    return "accepted"


@bounded(40)
@given(draw=tool_draws)
def test_a_tool_of_any_behaviour_answers_or_fails_as_the_guard_says(draw, server, generated_inputs):
    server.behaviour = {"step": draw.server}
    judge(generated_inputs, "tools", lambda: tool_ends(draw, server.url), known=KNOWN_DEFECTS)


# --- environments ------------------------------------------------------------------------------------------------------

RESETS = ("answers None", "answers text", "answers a number", "raises", "hangs")
REWARDS = {"a float": 0.75, "a whole number": 1, "a numpy number": np.float64(0.25), "NaN": math.nan, "infinity": math.inf,
           "None": None, "text": "1.0", "raises": None, "hangs": None}


@dataclass(frozen=True)
class EnvironmentDraw:
    """One drawn environment class: what its reset, its tool and its get_reward do, whether a function makes it, and
    whether its get_reward is ``async def``."""

    reset: str
    tool: ToolDraw
    reward: str
    by_function: bool = False
    async_reward: bool = False

    @property
    def reset_fails(self) -> bool:
        return self.reset in ("answers a number", "raises", "hangs")

    @property
    def reward_fails(self) -> bool:
        return not self.reset_fails and self.reward not in ("a float", "a whole number", "a numpy number")


environment_draws = st.builds(EnvironmentDraw, st.sampled_from(RESETS),
                              st.builds(ToolDraw, st.sampled_from(("answers", "raises", "hangs")), st.just("text")),
                              st.sampled_from(list(REWARDS)), st.booleans(), st.booleans())


def build_environment(draw: EnvironmentDraw, url: str = ""):
    """The environment class ``draw`` describes, named Game; made by a function where the draw says so."""
    tool = build_tool(draw.tool, url)

    def reward(self):
        if draw.reward == "raises":
            raise ZeroDivisionError("no moves to score")
        if draw.reward == "hangs":
            time.sleep(NAP)
        return REWARDS[draw.reward]

    class Game:
        """A game played through act."""

        def reset(self, secret: int = 3, **row):
            if draw.reset == "raises":
                raise KeyError("board")
            if draw.reset == "hangs":
                time.sleep(NAP)
            return {"answers None": None, "answers text": "\n\nYour move.", "answers a number": 7}[draw.reset]

        def act(self, action: int) -> str:
            """Take an action.

            Args:
                action: The action, 1 to 3.
            """
            return tool(action)

        if draw.async_reward:
            async def get_reward(self):
                await asyncio.sleep(0)
                return reward(self)
        else:
            def get_reward(self):
                return reward(self)

    return (lambda: Game()) if draw.by_function else Game


ROW = {"prompt": [{"role": "user", "content": "Find it."}], "secret": 3}


def environment_ends(draw: EnvironmentDraw) -> str:
    """One episode of the drawn environment as TRL plays it: made, reset with its row, its tool called, its get_reward
    scored by the reward TRL makes of it, guarded as training guards it."""
    guards = []
    factory = guarded_environment(build_environment(draw), LIMIT, guards)
    with said() as messages:
        game = factory()
        assert type(game).__name__ == "Game", f"{draw}: TRL would name its reward {type(game).__name__}"
        observation = game.reset(**ROW)
        if draw.reset_fails:
            assert observation is None, f"{draw}: reset's failure gave {observation!r}"
            _assert_said_once(messages.warnings(), "environment Game's reset failed on the row 'Find it.' (secret 3): ",
                              "this episode is not played")
        else:
            assert observation == {"answers None": None, "answers text": "\n\nYour move."}[draw.reset]
        try:
            answer = _call(game.act, action=2)
        except CallFailed as failed:
            assert draw.reset_fails or draw.tool.outcome() == "hang", f"{draw}: act failed: {failed}"
            assert str(failed).startswith("the episode could not start: reset ") or "did not return" in str(failed)
        except ValueError as own:
            assert draw.tool.outcome() == "own" and not draw.reset_fails, f"{draw}: {own}"
            assert any("tool 'act' of environment Game failed (act(action=2), the row 'Find it.' (secret 3))" in line
                       for line in messages.lines()), messages.lines()
        else:
            assert not draw.reset_fails and draw.tool.outcome() == "answers" and answer == "it is 4", f"{draw}: {answer!r}"
        scored = guard(environment_reward(type(game)), LIMIT, name="Game", label="environment Game's get_reward")
        scores = _call(scored, prompts=[ROW["prompt"]], completions=[[{"role": "assistant", "content": "2"}]],
                       completion_ids=[[1]], environments=[game])
    if draw.reset_fails:
        assert scores == [None] and scored.consecutive_failures == 0, f"{draw}: an unplayed episode scored {scores}"
        return "refused"
    if draw.reward_fails:
        assert scores == [None] and scored.consecutive_failures == 1, f"{draw}: scored {scores}"
        named = {"hangs": f"did not return within reward_timeout={LIMIT:g} s", "raises": "ZeroDivisionError: no moves to score"}
        words = named.get(draw.reward, f"get_reward returned {REWARDS[draw.reward]!r} for the episode of the row 'Find it.'")
        _assert_said_once(messages.warnings(), "environment Game's get_reward failed", "this batch scores None", words)
        return "refused"
    assert scores == [float(REWARDS[draw.reward])], f"{draw}: scored {scores}"
    return "accepted"


@bounded(40)
@given(draw=environment_draws)
def test_an_environment_of_any_behaviour_plays_or_fails_as_the_guard_says(draw, generated_inputs):
    judge(generated_inputs, "environments", lambda: environment_ends(draw), known=KNOWN_DEFECTS)


def served_ends(reset: str, step: str, server: Misbehaving) -> str:
    """An episode of ``http_environment`` on the drawn server, guarded: each failure said naming the URL."""
    server.behaviour = {"reset": reset, "step": step}
    Game = guarded_environment(http_environment(server.url, action_field="action", timeout_s=SERVER_TIMEOUT,
                                                name="Served"), LIMIT, [])
    with said() as messages:
        game = Game()
        observation = game.reset(**ROW)
        reset_fails = reset != "answers"
        if reset_fails:
            assert observation is None
            reason = f"{server.url}/reset answered 422" if reset == "refuses the action" else f"{server.url}/reset"
            _assert_said_once(messages.warnings(), "environment Served's reset failed on the row 'Find it.'", reason)
            with pytest.raises(CallFailed, match="the episode could not start: reset "):
                game.act(2)
            return "refused"
        assert observation == "\n\ngo on"
        try:
            answer = game.act(2)
        except CallFailed as failed:
            assert step in SERVER_FAILS, f"{step}: {failed}"
            assert f"{server.url}/step" in str(failed), f"the model is not told which server: {failed}"
            _assert_said_once(messages.warnings(), "tool 'act' of environment Served failed (act(2), the row 'Find it.'",
                              f"{server.url}/step", "Start the server")
            return "refused"
        except ValueError as refused:
            assert step == "refuses the action" and f"{server.url}/step answered 422" in str(refused), str(refused)
            return "refused"
        finally:
            del game  # its server back to the pool
    assert step == "answers" and answer == "go on\nReward: 0.5.", f"{step}: {answer!r}"
    return "accepted"


@bounded(24)
@given(reset=st.sampled_from(SERVER_BEHAVIOURS), step=st.sampled_from(SERVER_BEHAVIOURS))
def test_a_served_game_of_any_behaviour_plays_or_fails_naming_its_server(reset, step, server, generated_inputs):
    judge(generated_inputs, "servers", lambda: served_ends(reset, step, server), known=KNOWN_DEFECTS)


# --- rollout functions -------------------------------------------------------------------------------------------------

ROLLOUTS = {  # what is wrong with the dict -> the words naming it
    "a whole batch": None, "raises": "it raised RuntimeError: the game crashed", "hangs": "did not return within rollout_timeout",
    "not a dict": "it returned", "no logprobs": "its dict has no 'logprobs'", "one short": "is 1 values for 2 prompts",
    "text for token ids": "its completion_ids[0] is", "a NaN log-probability": "its logprobs[1] holds nan",
    "a log-probability short": "its logprobs[0] is 1 values for 2 completion tokens",
    "an env_mask of other values": "its env_mask[0] is", "its own key one short": "its 'guesses' is 1 values for 2 prompts",
}


def build_rollout(kind: str):
    def play(prompts, trainer):
        if kind == "raises":
            raise RuntimeError("the game crashed")
        if kind == "hangs":
            time.sleep(NAP)
        n = len(prompts)
        output = {"prompt_ids": [[5, 6, 7]] * n, "completion_ids": [[8, 9]] * n, "logprobs": [[-0.5, -1.0]] * n,
                  "guesses": [1] * n}
        if kind == "not a dict":
            return list(output.values())
        if kind == "no logprobs":
            del output["logprobs"]
        elif kind == "one short":
            output["completion_ids"] = output["completion_ids"][:-1]
        elif kind == "text for token ids":
            output["completion_ids"] = [["8", "9"]] * n
        elif kind == "a NaN log-probability":
            output["logprobs"] = [[-0.5, -1.0], [-0.5, math.nan]][:n]
        elif kind == "a log-probability short":
            output["logprobs"] = [[-0.5]] * n
        elif kind == "an env_mask of other values":
            output["env_mask"] = [[1, 2]] * n
        elif kind == "its own key one short":
            output["guesses"] = [1]
        return output

    return play


def rollout_ends(kind: str) -> str:
    play = guarded_rollout(build_rollout(kind), LIMIT)
    with said() as messages:
        try:
            output = play(["Find it.", "Find it."], trainer=None)
        except CallFailed as failed:
            assert ROLLOUTS[kind] is not None and ROLLOUTS[kind] in failed.said, f"{kind}: {failed.said}"
            _assert_said_once(messages.warnings(), "rollout function 'play' failed on a batch of 2 prompts (the first: "
                              "'Find it.')", ROLLOUTS[kind])
            return "refused"
    assert ROLLOUTS[kind] is None and set(output) == {"prompt_ids", "completion_ids", "logprobs", "guesses"}, kind
    return "accepted"


@bounded(len(ROLLOUTS) * 2)
@given(kind=st.sampled_from(list(ROLLOUTS)))
def test_a_rollout_function_of_any_return_gives_trl_its_batch_or_fails_naming_what_is_wrong(kind, generated_inputs):
    judge(generated_inputs, "rollout functions", lambda: rollout_ends(kind), known=KNOWN_DEFECTS)


# --- through train(), evaluate() and preview() -------------------------------------------------------------------------

STEP = dict(preset="cpu-smoke", max_steps=1, num_generations=2, per_device_train_batch_size=4, max_completion_length=6,
            dashboard=False, reward_timeout=LIMIT, tool_timeout=LIMIT, rollout_timeout=LIMIT, save_steps=1)


@pytest.fixture(scope="module")
def tiny_tools(tmp_path_factory):
    """The session's tiny model, with a chat template that renders tools (Qwen2.5's, as TRL bundles it)."""
    model, tokenizer = load_model(str(TOOL_CALLING.build(tmp_path_factory.mktemp("tools"))), lora_rank=8)
    return model, tokenizer


def rows():
    return prepare_dataset([{"question": f"Find my number {i}.", "answer": "3", "secret": 3} for i in range(2)],
                           system_prompt=None)


def constant_reward(completions, **kwargs):
    return [0.5] * len(completions)


def trains(tiny_tools, option: str, value, failing: str | None) -> str:
    """``train()`` with ``option=value`` for one step: on a stack without the option, refused naming the stack, as are
    ``evaluate`` and ``preview``; else the step trains and is logged, or, where ``failing`` names what fails on every
    call (a reset, a rollout function), the run stops as a UserCodeFailure naming it, its checkpoint saved where a step
    was done."""
    model, tokenizer = tiny_tools
    lacking = stack.lacking("environment_factory" if option == "environment_factory" else option)
    with tempfile.TemporaryDirectory() as folder:
        run = Path(folder, "run")
        if lacking is not None:
            refusal = re.escape(f"{lacking}: train on the latest stack")
            with pytest.raises(ConfigError, match=refusal):
                train(model, tokenizer, rows(), [constant_reward], output_dir=run, **{option: value}, **STEP)
            assert not run.exists()
            if option != "rollout_func":
                with pytest.raises(ConfigError, match=refusal):
                    evaluate(model, tokenizer, rows(), **{option: value}, progress=None, max_completion_length=4)
            with pytest.raises(ConfigError, match=refusal):
                preview(model, tokenizer, rows(), [constant_reward], **{option: value}, n_prompts=1, num_generations=2,
                        preset="cpu-smoke")
            return "refused"
        if failing is None:
            train(model, tokenizer, rows(), [constant_reward], output_dir=run, **{option: value}, **STEP)
            assert [record["step"] for record in read_metrics(run)] == [1]
            return "accepted"
        with pytest.raises(UserCodeFailure) as stopped:
            train(model, tokenizer, rows(), [constant_reward], output_dir=run, **{option: value}, **STEP)
        assert failing in str(stopped.value), str(stopped.value)
        saved = sorted(path.name for path in run.glob("checkpoint-*"))
        if option == "environment_factory":  # stopped at the step's end, saved; resumable from there
            assert saved == ["checkpoint-1"] and "resume" in str(stopped.value), (saved, str(stopped.value))
        else:  # a rollout function's failure ends step 1 before anything trained: nothing to save
            assert saved == [] and str(stopped.value).endswith("no step was done"), (saved, str(stopped.value))
        return "refused"


@bounded(TRAININGS)
@given(draw=st.one_of(environment_draws.map(lambda d: ("environment_factory", d)),
                      st.sampled_from(list(ROLLOUTS)).map(lambda k: ("rollout_func", k))))
def test_user_code_of_any_behaviour_trains_a_real_step_or_stops_naming_it_or_is_refused_naming_the_stack(
        draw, tiny_tools, generated_inputs):
    option, drawn = draw
    if option == "environment_factory":
        value = build_environment(drawn)
        failing = "environment Game's reset failed 3 calls in a row" if drawn.reset_fails else None
    else:
        value = build_rollout(drawn)
        failing = None if ROLLOUTS[drawn] is None else "rollout function 'play' failed on a batch of 4 prompts"
    judge(generated_inputs, f"{option} in training", functools.partial(trains, tiny_tools, option, value, failing),
          known=KNOWN_DEFECTS)
