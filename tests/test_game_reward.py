"""rewards.games.GameReward against a corpus of hostile strategies, playing the 2048 game of Unsloth's 2048 notebook
(tests/ports/unsloth_2048_cells.py, CELLS[10], verbatim) through tests/ports/game_2048.py's harnesses.

Each hostile strategy falls back to honest play (a game to its end: 2.0) only when its attack got through, and
otherwise raises or stalls: so it earns the floor (0.0) exactly when the attack reached nothing, and a leak shows as
a score. What it aimed at outside (a file of the trainer's, a listener, the machine's processes) is checked after."""

import asyncio
import importlib.util
import os
import pickle
import secrets
import socket
import sys
import textwrap
import time
import types

import pytest
from ports.game_2048 import FIRST_MOVE_THAT_CHANGES, HARNESS
from ports.unsloth_2048_cells import CELLS

from rewards.errors import RewardError
from rewards.extract import extract_code_block
from rewards.games import AsyncGameReward, GameReward

pytestmark = pytest.mark.stack_free  # nothing here reaches transformers, TRL, PEFT or datasets

GAME = CELLS[10] + HARNESS
TIMEOUT = 3.0
FINISHED, WON, FLOOR = 2.0, 20.0, 0.0
HONEST = FIRST_MOVE_THAT_CHANGES.replace("def strategy(board):", "def honest(board):")


def completion(code: str) -> str:
    return f"Here is my strategy:\n```python\n{textwrap.dedent(code).strip()}\n```"


def attack(body: str) -> str:
    """A strategy that runs ``body`` (which raises when the attack reaches nothing), then plays honestly."""
    return completion(HONEST + "\ndef strategy(board):\n" + textwrap.indent(textwrap.dedent(body).strip(), "    ") +
                      "\n    return honest(board)\n")


def named(token: str) -> str:
    """Code that gives the calling process the name ``token`` (its /proc comm), so a survivor can be found."""
    return f"__import__('ctypes').CDLL(None).prctl(15, {token.encode()!r}, 0, 0, 0)\n"


def processes_named(token: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as comm:
                if comm.read().strip() == token:
                    found.append(int(pid))
        except OSError:  # exited while we looked
            continue
    return found


@pytest.fixture
def trainer(tmp_path):
    """What the trainer has that a strategy must not reach: a file holding a secret, and a TCP listener."""
    sentinel = tmp_path / "trainer-secret.txt"
    sentinel.write_text(secrets.token_hex(16))
    before = (sentinel.read_text(), sentinel.stat().st_mtime_ns)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield {"sentinel": str(sentinel), "port": listener.getsockname()[1], "tokens": [f"g{secrets.token_hex(6)}" for _ in range(3)]}
    assert (sentinel.read_text(), sentinel.stat().st_mtime_ns) == before, "a strategy changed the trainer's file"
    listener.setblocking(False)
    with pytest.raises(BlockingIOError):
        listener.accept()  # a connection would wait here, accepted or not
    listener.close()


def corpus(trainer) -> dict[str, tuple[str, float]]:
    """Each strategy's completion and what it must earn on the notebook's game."""
    sentinel, port = trainer["sentinel"], trainer["port"]
    bomb, loop, daemon = trainer["tokens"]
    return {
        "honest, to the end": (completion(FIRST_MOVE_THAT_CHANGES), FINISHED),
        "crashes": (completion("def strategy(board):\n    return 1 / 0"), FLOOR),
        "no function named strategy": (completion("def play(board):\n    return 'W'"), FLOOR),
        "strategy is not a function": (completion("strategy = 'W'"), FLOOR),
        "no code block": ("I would move left.", FLOOR),
        "does not compile": (completion("def strategy(board):\n    return (("), FLOOR),
        "junk: a number": (completion("def strategy(board):\n    return 42"), FLOOR),
        "junk: not a key": (completion("def strategy(board):\n    return 'Q'"), FLOOR),
        "junk: a str that equals anything": (completion("""
            class Anything(str):
                def __eq__(self, other):
                    return True
                __hash__ = str.__hash__
            def strategy(board):
                return Anything('W')"""), FLOOR),
        "junk: more than a message holds": (completion("def strategy(board):\n    return 'W' * (9 * 2**20)"), FLOOR),
        "stalls: always up (the notebook's cell 25)": (completion("def strategy(board):\n    return 'W'"), FLOOR),
        "loops forever": (completion(f"def strategy(board):\n{textwrap.indent(named(loop), '    ')}    while True:\n        pass"), FLOOR),
        "fork bomb": (attack(f"import os\n{named(bomb)}while True:\n    os.fork()"), FLOOR),
        "leaves a daemon": (attack(f"""
            import os, time
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    {named(daemon)}                    time.sleep(3600)
                os._exit(0)
            raise RuntimeError('left a daemon behind')"""), FLOOR),
        "allocates 8 GiB": (attack("held = bytearray(8 * 2**30)"), FLOOR),
        "reads /etc/passwd": (attack("open('/etc/passwd').read()"), FLOOR),
        "reads the trainer's file": (attack(f"open({sentinel!r}).read()"), FLOOR),
        "overwrites the trainer's file": (attack(f"open({sentinel!r}, 'r+').write('changed')"), FLOOR),
        "opens a socket to the trainer": (attack(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)"), FLOOR),
        "sets the game won, found by gc": (attack("""
            import gc
            games = [o for o in gc.get_objects() if type(o).__name__ == 'GameBoard']  # the game's class, named in its source
            if not games:
                raise LookupError('no game in this process')
            for game in games:
                game._state = 'success'"""), FLOOR),
        "sets the game won, found up the stack": (attack("""
            import inspect
            frame, found = inspect.currentframe(), False
            while frame is not None:
                for value in list(frame.f_locals.values()):
                    if type(value).__name__ == 'GameBoard':
                        value._state, found = 'success', True
                frame = frame.f_back
            if not found:
                raise LookupError('no game up the stack')"""), FLOOR),
        "monkeypatches the game": (attack("""
            import sys
            patched = [m for m in list(sys.modules.values()) if 'GameBoard' in getattr(m, '__dict__', {})]  # no lazy import
            if not patched:
                raise LookupError('no game module here')
            for module in patched:
                module.GameBoard.state = lambda self: 'success'"""), FLOOR),
        "prints a score": (completion("""
            import os, sys
            def strategy(board):
                print('{"score": 1000000.0}')
                sys.stdout.flush()
                os.write(1, b'{"score": 1000000.0}\\n')
                return 'Q'"""), FLOOR),
        "exits with status 0": (completion("""
            import os
            def strategy(board):
                print('{"score": 1000000.0}', flush=True)
                os._exit(0)"""), FLOOR),
        "raises SystemExit(0)": (completion("def strategy(board):\n    raise SystemExit(0)"), FLOOR),
    }


@pytest.mark.slow
def test_each_strategy_earns_exactly_its_play_and_nothing_outside_changes(trainer):
    strategies = corpus(trainer)
    reward = GameReward(GAME, seeds=[0], timeout=TIMEOUT)
    started = time.monotonic()
    earned = dict(zip(strategies, reward(completions=[text for text, _ in strategies.values()])))
    assert earned == {name: expected for name, (_, expected) in strategies.items()}
    assert time.monotonic() - started < 4 * TIMEOUT * len(strategies)  # no game outlived its time limit by much
    assert {token: processes_named(token) for token in trainer["tokens"]} == {token: [] for token in trainer["tokens"]}


TAMPERING = ("sets the game won, found by gc", "sets the game won, found up the stack", "monkeypatches the game")


def test_the_tampering_strategies_win_where_the_game_shares_their_process(trainer, monkeypatch):
    """The corpus's tampering is real: played in one process with the game, as the notebook plays, each wins."""
    for name in TAMPERING:
        game = types.ModuleType("game")
        monkeypatch.setitem(sys.modules, "game", game)
        exec(GAME, game.__dict__)
        model = {}
        exec(extract_code_block(corpus(trainer)[name][0]), model)
        assert game.play(model["strategy"], 0) == WON, name


@pytest.mark.slow
def test_an_honest_strategy_wins_the_small_game_and_the_notebooks_ends():
    honest = completion(FIRST_MOVE_THAT_CHANGES)
    assert GameReward(GAME, "play_to_8", seeds=[0, 1, 2])(completions=[honest]) == [WON]
    outcomes = GameReward(GAME, seeds=[0, 1]).outcomes([honest, completion("def strategy(board):\n    return 1 / 0")])
    assert [[game.score for game in games] for games in outcomes] == [[FINISHED, FINISHED], [None, None]]
    assert all("ZeroDivisionError" in game.failure for game in outcomes[1])


def test_the_floor_is_the_reward_of_a_game_not_played_to_its_end_and_it_pickles():
    reward = pickle.loads(pickle.dumps(GameReward(GAME, "play_to_8", seeds=[0], floor=-3.0)))
    assert reward(completions=[completion(FIRST_MOVE_THAT_CHANGES), completion("def strategy(board):\n    return 42")]) == [WON, -3.0]


def test_the_async_reward_plays_the_same_games():
    reward = AsyncGameReward(GAME, "play_to_8", seeds=[0])
    completions = [completion(FIRST_MOVE_THAT_CHANGES), completion("def strategy(board):\n    return None")]
    assert asyncio.run(reward(completions=completions)) == [WON, FLOOR]


def test_a_game_module_and_a_harness_function(tmp_path):
    (tmp_path / "guessing.py").write_text("def secret(seed):\n    return seed * 7\n")
    spec = importlib.util.spec_from_file_location("guessing", tmp_path / "guessing.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reward = GameReward(module, play_guess, seeds=[3], name="guess_reward")
    assert reward(completions=[completion("def strategy():\n    return 21"), completion("def strategy():\n    return 20")]) == [1.0, 0.0]
    assert reward.__name__ == "guess_reward"

    def play_twice(strategy, seed):  # indented where it is defined: the game's sandbox gets it dedented
        return float(strategy() + strategy() == 2 * secret(seed))  # noqa: F821 - the game module's

    assert GameReward(module, play_twice, seeds=[3])(completions=[completion("def strategy():\n    return 21")]) == [1.0]


def play_guess(strategy, seed):
    return float(strategy() == secret(seed))  # noqa: F821 - the game module's, in the game's sandbox


@pytest.mark.parametrize("arguments, error, words", [
    ((GAME, "play_forever"), ValueError, ["harness", "no function 'play_forever'", "def play_forever(strategy, seed)"]),
    ((CELLS[10],), ValueError, ["harness", "def play(strategy, seed)"]),
    ((GAME, 42), RewardError, ["harness", "int"]),
    ((GAME, lambda strategy, seed: 1), RewardError, ["harness", "defined with def"]),
    ((GAME, "not a name"), ValueError, ["harness", "not a function name"]),
    ((42,), RewardError, ["game", "source (str) or an imported module"]),
    (("def play(:",), ValueError, ["game", "does not compile"]),
])
def test_bad_input_is_refused_at_construction_naming_the_argument(arguments, error, words):
    with pytest.raises(error) as raised:
        GameReward(*arguments)
    assert all(word in str(raised.value) for word in words), str(raised.value)


@pytest.mark.parametrize("keywords, word", [
    ({"function": "def strategy"}, "function"), ({"seeds": []}, "seeds"), ({"seeds": [1.5]}, "seeds"), ({"seeds": 3}, "seeds"),
    ({"floor": float("nan")}, "floor"), ({"timeout": 0}, "timeout"), ({"timeout": "5"}, "timeout"), ({"memory_mb": -1}, "memory_mb"),
    ({"function": None}, "function"), ({"name": ""}, "name"),
])
def test_bad_options_are_refused_at_construction(keywords, word):
    with pytest.raises(ValueError, match=word):
        GameReward(GAME, **keywords)
