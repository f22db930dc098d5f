"""The game's side of a game reward: the main program of the game's sandbox, beside the strategy's.

:class:`rewards.games.GameReward` runs two sandboxes joined by a pair of pipes (:class:`rewards.sandbox.Connected`):
the model's code in one, served by :func:`rewards.grading.serve`, and this program in the other, with the game
(``game.py``), ``grading.py`` and its inputs (``inputs.json``: the harness, the function, the seed) beside it, in a
folder only its sandbox reads. It plays one game: the harness named in its inputs gets a ``strategy``
callable whose every call crosses the pipes as plain data (:mod:`rewards.grading`'s wire), so the strategy never holds
a game object, and prints one JSON line to a stdout only it can write: ``{"score": number}``, or ``{"failed":
reason}`` when the strategy raised, answered with something other than plain data, or went away, or the harness
raised or returned something other than a finite number. Whatever the game itself prints goes to stderr.
"""

from __future__ import annotations

import json
import math
import os
import sys
import types

if __package__:
    from .grading import Grader, Pipe, Remote, inputs
else:  # the main program of the game's sandbox, run isolated (-I): grading.py is beside it, in the working folder
    sys.path.insert(0, os.getcwd())
    from grading import Grader, Pipe, Remote, inputs


def _strategy(grader: Grader, function: str, failures: list[str]):
    """The model's function as the harness calls it: each call is a request to the strategy's sandbox. A failure is
    recorded before it is raised, so a harness that catches it still earns nothing."""
    remote = grader.ask("name", function)
    if type(remote) is not Remote:
        raise TypeError(f"the model's {function} is plain data, not a function")

    def strategy(*args, **kwargs):
        try:
            move = remote(*args, **kwargs)
        except BaseException as error:  # noqa: B036 - the strategy raised, or left the pipe: no score
            failures.append(f"the strategy failed: {type(error).__name__}: {error}")
            raise
        if type(move) is Remote:
            failures.append("the strategy answered with something other than plain data")
            raise TypeError(failures[-1])
        return move

    return strategy


def play(harness: str, function: str, seed: int, pipe: Pipe) -> dict:
    game = types.ModuleType("game")
    sys.modules["game"] = game  # dataclasses and pickling look a class's module up here
    with open("game.py") as source:
        exec(compile(source.read(), "game.py", "exec"), game.__dict__)
    failures: list[str] = []
    try:
        score = getattr(game, harness)(_strategy(Grader(pipe), function, failures), seed)
    except BaseException as error:  # noqa: B036 - the game was not played to its end: no score
        return {"failed": failures[0] if failures else f"{type(error).__name__}: {error}"[:500]}
    if failures:
        return {"failed": failures[0]}
    if type(score) not in (int, float) or not math.isfinite(score):
        return {"failed": f"the harness {harness} returned {type(score).__name__}, not a finite number"}
    return {"score": score}


if __name__ == "__main__":
    asked = inputs()  # the harness, the model's function and the seed, in a file only this sandbox reads
    result = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the game's own prints go to stderr: this program's stdout carries the result alone
    result.write(json.dumps(play(asked["harness"], asked["function"], asked["seed"], Pipe(*map(int, sys.argv[1:3])))) + "\n")
    result.flush()
