"""Game rewards: the model writes a function that plays a game; the score it reaches, in the sandbox, is the reward.

The user gives the game (Python source, or an imported module) and a harness: a function of the game's,
``harness(strategy, seed) -> number``, that sets a game up from ``seed``, calls ``strategy`` for each move and
returns the score. The model's function comes from the completion's code block. Each game runs as two sandboxes
joined only by pipes (:class:`rewards.sandbox.Connected`):

- the strategy's: the model's code, answering calls (:func:`rewards.grading.serve`);
- the game's: the game and harness (:mod:`rewards.game_play`), passing boards and taking moves as plain data.

So the strategy never holds the game: it cannot patch it, find it with ``gc`` or ``inspect``, or print a score,
because the score is what the game's sandbox reports on its own stdout. Each game has ``timeout`` seconds and
``memory_mb`` per sandbox. A game that is not played to its end earns ``floor``: no code block, code that does not
compile, a strategy that raises, loops, runs out of time or memory, exits, answers with something other than plain
data, or a harness that raises on its moves (how a harness refuses a move it does not accept).
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import math
import random
import textwrap
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import game_play, grading
from .code import compiles
from .errors import RewardError
from .extract import completion_text, extract_code_block, strip_reasoning
from .sandbox import Connected, Program, SandboxResult, run_async, run_batch

MAX_SEED = 10_000  # a fresh seed per call is drawn below this, as Unsloth's 2048 notebook draws its games


@dataclass(frozen=True)
class GameOutcome:
    """One game: its score, or why it earned the floor."""

    score: float | None
    failure: str | None = None


def _source_of(game: str | types.ModuleType) -> str:
    if isinstance(game, types.ModuleType):
        try:
            return inspect.getsource(game)
        except (OSError, TypeError):
            raise RewardError(f"game: the module {game.__name__} has no source file to read; pass its source as text") from None
    if isinstance(game, str):
        return game
    raise RewardError(f"game: expected the game's Python source (str) or an imported module, got {type(game).__name__}")


def _harness(harness: str | Callable) -> tuple[str, str]:
    """The harness's name and the source to add to the game's (none when the game defines it)."""
    if isinstance(harness, str):
        if not harness.isidentifier():
            raise RewardError(f"harness: {harness!r} is not a function name; name a function of the game, or pass the function")
        return harness, ""
    if not isinstance(harness, types.FunctionType) or harness.__name__ == "<lambda>":
        raise RewardError(f"harness: expected a function harness(strategy, seed) -> score, defined with def, or its name; "
                        f"got {type(harness).__name__}")
    try:
        return harness.__name__, textwrap.dedent(inspect.getsource(harness))  # a function defined inside another is indented
    except OSError:
        raise RewardError(f"harness: the source of {harness.__name__} cannot be read; define it in a file, or in the game's source") from None


def _defines(tree: ast.Module, name: str) -> bool:
    return any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name for node in tree.body)


class GameReward:
    """The mean score of the model's ``function`` over games, each played in the sandbox against the game's
    ``harness(strategy, seed)``; ``floor`` for a game not played to its end (this module's docstring says when).
    ``seeds`` fixes the games; without it each call draws one fresh seed, the same for all its completions. ``name``
    is the name TRL logs it under (``rewards/<name>/mean``).

    >>> game = '''
    ... def play(strategy, seed):
    ...     total = 0
    ...     for number in range(seed, seed + 3):
    ...         guess = strategy(number)
    ...         if type(guess) is not int:
    ...             raise ValueError("not a number")
    ...         total += guess == number * 2
    ...     return total
    ... '''
    >>> doubling = GameReward(game, seeds=[1], floor=-1.0)
    >>> doubling(completions=["```python\\ndef strategy(n):\\n    return n * 2\\n```",
    ...                       "```python\\ndef strategy(n):\\n    return 'twice'\\n```", "no code"])
    [3.0, -1.0, -1.0]
    """

    runs_code = True  # train() and the reward lab make sure the sandbox can run it before they start

    def __init__(self, game: str | types.ModuleType, harness: str | Callable = "play", *, function: str = "strategy",
                 seeds: Sequence[int] | None = None, floor: float = 0.0, timeout: float = 5.0, memory_mb: int = 512,
                 name: str = "game_reward"):
        harness_name, harness_source = _harness(harness)
        source = _source_of(game) + ("\n\n" + harness_source if harness_source else "")
        try:
            tree = ast.parse(source)
        except SyntaxError as error:
            raise RewardError(f"game: its source does not compile ({error}); pass the game's Python source") from None
        if not _defines(tree, harness_name):
            raise RewardError(f"harness: the game defines no function {harness_name!r}; add `def {harness_name}(strategy, seed): ... return score` "
                             "to its source, or pass harness=<the function>")
        if not isinstance(function, str) or not function.isidentifier():
            raise RewardError(f"function: {function!r} is not a function name; pass the name the prompt asks the model to define")
        if seeds is not None:
            if not isinstance(seeds, (list, tuple, range)) or not seeds or any(type(seed) is not int for seed in seeds):
                raise RewardError(f"seeds: expected a non-empty list of ints, got {seeds!r:.80}; or leave it out for a fresh seed per call")
            seeds = list(seeds)
        if not isinstance(floor, (int, float)) or not math.isfinite(floor):
            raise RewardError(f"floor: expected a finite number, got {floor!r}")
        if not (isinstance(timeout, (int, float)) and timeout > 0) or not (isinstance(memory_mb, int) and memory_mb > 0):
            raise RewardError(f"timeout and memory_mb must be positive (got {timeout!r} s, {memory_mb!r} MiB)")
        if not isinstance(name, str) or not name:
            raise RewardError(f"name: expected the name TRL logs the reward under, got {name!r}")
        self.__name__ = name
        self.source, self.harness, self.function = source, harness_name, function
        self.seeds, self.floor = seeds, float(floor)
        self.limits = {"timeout": timeout, "memory_mb": memory_mb}

    def _plan(self, completions) -> tuple[list[str | None], list[int], list[Connected]]:
        """Each completion's code (None when there is none to run), the seeds, and one job per code and seed."""
        seeds = self.seeds or [random.randrange(MAX_SEED)]
        codes = []
        for completion in completions:
            code = extract_code_block(strip_reasoning(completion_text(completion)))
            codes.append(code if compiles(code) else None)
        jobs = [self._game(code, seed) for code in codes if code is not None for seed in seeds]
        return codes, seeds, jobs

    def _game(self, code: str, seed: int) -> Connected:
        """The strategy's sandbox and the game's; the seed is in a file of the game's, which the strategy's cannot read."""
        strategy = Program(_source(grading), files={"solution.py": code, grading.INPUTS_FILE: json.dumps({"role": "serve"})})
        asked = {"harness": self.harness, "function": self.function, "seed": seed}
        game = Program(_source(game_play), files={"game.py": self.source, "grading.py": _source(grading),
                                                  grading.INPUTS_FILE: json.dumps(asked)})
        return Connected(strategy, game)

    def _outcomes(self, codes, seeds, results) -> list[list[GameOutcome]]:
        played = iter(results)
        return [[_outcome(next(played)[1]) for _ in seeds] if code is not None else [GameOutcome(None, "no code block that compiles")]
                for code in codes]

    def _rewards(self, outcomes: list[list[GameOutcome]]) -> list[float]:
        return [sum(self.floor if game.score is None else game.score for game in games) / len(games) for games in outcomes]

    def outcomes(self, completions) -> list[list[GameOutcome]]:
        """Each completion's games, with the reason each that earned the floor did (for debugging a game or a prompt)."""
        codes, seeds, jobs = self._plan(completions)
        return self._outcomes(codes, seeds, run_batch(jobs, **self.limits) if jobs else [])

    def __call__(self, prompts=None, completions=(), **kwargs) -> list[float]:
        return self._rewards(self.outcomes(completions))


class AsyncGameReward(GameReward):
    """:class:`GameReward` as an ``async`` function: GRPOTrainer awaits its games alongside its other async rewards.
    The time limit is the sandbox's, a killed process, so it holds off the main thread too."""

    async def __call__(self, prompts=None, completions=(), **kwargs) -> list[float]:
        import asyncio

        codes, seeds, jobs = self._plan(completions)
        results = await asyncio.gather(*(run_async(job, **self.limits) for job in jobs))
        return self._rewards(self._outcomes(codes, seeds, results))


def _outcome(game: SandboxResult) -> GameOutcome:
    """What the game's sandbox reported: its last stdout line, which only the game's side writes."""
    if game.killed_reason is not None:
        return GameOutcome(None, f"the game was stopped: {game.killed_reason}")
    try:
        report = json.loads(game.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return GameOutcome(None, f"the game reported nothing (exit status {game.returncode}): {game.stderr[-300:]}")
    if "score" in report:
        return GameOutcome(float(report["score"]))
    return GameOutcome(None, str(report.get("failed")))


@functools.cache
def _source(module: types.ModuleType) -> str:
    return Path(module.__file__).read_text()
