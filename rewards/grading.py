"""Assert tests graded outside the program: the program's values cross to the grader as plain data, and every
check runs there.

This file is the main program of two sandboxes joined by a pair of pipes (:class:`rewards.sandbox.Connected`):

- ``serve`` runs in the program's sandbox: it runs the model's program (``solution.py``), then answers the
  grader's requests (a name the program defines, a call, an attribute, an item, an iteration) with plain data;
- ``grade`` runs in the grader's sandbox and never runs the program's code: it evaluates each check
  (in ``inputs.json``, which only its sandbox reads) as Python, with the program's names standing for remote objects, and prints one verdict line
  per check to its own stdout, which only it can write.

What crosses the pipes is JSON in the shapes :func:`to_wire` writes and :func:`from_wire` reads: ``None``, bools,
ints, floats, text, and tagged lists, tuples, sets, frozensets, dicts, bytes and complex numbers. Anything else the
program returns stays in its process as a numbered handle; the grader may call it, take its attributes and items or
iterate it, but comparing it, hashing it or asking its truth fails the check. So an object that "equals
anything", an ``int`` subclass, a replaced builtin, a patched ``sys.stdout``, a forged report, a frame walk, a
``gc`` scan or a trace function all stay in the program's process, which holds no verdict to reach.

A check's names resolve as in Python, with the grader's builtins and these standard modules before the program's
names: :data:`GRADER_MODULES`. Any other name is the program's: a helper it defines decides what it returns, so
write checks whose comparison is made by operators, builtins or those modules.

>>> to_wire({"a": (1, 2.5, None)}), from_wire(to_wire({"a": (1, 2.5, None)}))
(['dict', [['a', ['tuple', [1, 2.5, None]]]]], {'a': (1, 2.5, None)})
>>> from_wire(["list", [1, ["set", [2]]]]), from_wire(["handle", 3], remote=lambda n: f"remote {n}")
([1, {2}], 'remote 3')
>>> program_names(check_expression("assert solution(x) == sorted(y) and all(f(i) for i in range(3)), 'message'"))
['f', 'solution', 'x', 'y']
"""

from __future__ import annotations

import ast
import builtins
import importlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any

MAX_MESSAGE_BYTES = 8 * 2**20  # one value crossing the pipes; more fails the check
# What a sandbox's main program is asked to do, beside it in its folder (never on its command line: rewards.sandbox.Program)
INPUTS_FILE = "inputs.json"
GRADER_MODULES = ("math", "cmath", "re", "json", "string", "itertools", "functools", "operator", "collections", "heapq",
                  "bisect", "fractions", "decimal", "statistics")
_SEQUENCES = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


class WireError(Exception):
    """A message that is not plain data in the agreed shapes."""


class ProgramRaised(Exception):
    """The program raised while answering, or does not define a name."""


def to_wire(value: Any, handle: Callable[[Any], int] | None = None) -> Any:
    """``value`` as JSON-ready plain data; what is not plain becomes ``["handle", handle(value)]``, or fails."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    try:
        if kind in (list, tuple, set, frozenset):
            return [kind.__name__, [to_wire(item) for item in value]]
        if kind is dict:
            return ["dict", [[to_wire(key), to_wire(item)] for key, item in value.items()]]
        if kind is bytes:
            return ["bytes", value.hex()]
        if kind is complex:
            return ["complex", [value.real, value.imag]]
    except WireError:  # a container holding something that is not plain data: the whole of it stays a handle
        pass
    if handle is None:
        raise WireError(f"{kind.__name__} is not plain data")
    return ["handle", handle(value)]


def from_wire(data: Any, remote: Callable[[int], Any] | None = None) -> Any:
    """The value :func:`to_wire` wrote; handles become ``remote(number)`` where allowed. Anything else is refused."""
    kind = type(data)
    if data is None or kind in (bool, int, float, str):
        return data
    if kind is not list or len(data) != 2 or type(data[0]) is not str:
        raise WireError("not a tagged value")
    tag, body = data
    try:
        if tag in _SEQUENCES and type(body) is list:
            return _SEQUENCES[tag](from_wire(item, remote) for item in body)
        if tag == "dict" and type(body) is list and all(type(pair) is list and len(pair) == 2 for pair in body):
            return {from_wire(key, remote): from_wire(item, remote) for key, item in body}
        if tag == "bytes" and type(body) is str:
            return bytes.fromhex(body)
        if tag == "complex" and type(body) is list and len(body) == 2 and all(type(part) is float for part in body):
            return complex(*body)
        if tag == "handle" and remote is not None and type(body) is int:
            return remote(body)
    except (TypeError, ValueError) as error:  # an unhashable set member or dict key, bad hex
        raise WireError(str(error)) from None
    raise WireError(f"not a plain value tagged {tag!r:.40}")


class Pipe:
    """One JSON message a line, each way, bounded in size."""

    def __init__(self, inbox: int, outbox: int):
        self.reader = os.fdopen(inbox, "rb")
        self.writer = os.fdopen(outbox, "wb")

    def send(self, message: Any) -> None:
        self.writer.write(json.dumps(message).encode() + b"\n")
        self.writer.flush()

    def receive(self) -> Any:
        line = self.reader.readline(MAX_MESSAGE_BYTES + 1)
        if not line.endswith(b"\n"):
            raise WireError("the other side closed the pipe or sent more than a message may hold")
        return json.loads(line)


def serve(pipe: Pipe) -> None:
    """Run the program, then answer each request until the grader closes the pipe."""
    program = {"__name__": "__main__", "__file__": "solution.py", "__builtins__": builtins}
    with open("solution.py") as source:
        exec(compile(source.read(), "solution.py", "exec"), program)
    handles: list[Any] = []

    def handle(value: Any) -> int:
        handles.append(value)
        return len(handles) - 1

    def argument(data: Any) -> Any:
        return from_wire(data, remote=handles.__getitem__)

    while True:
        try:
            request = pipe.receive()
        except WireError:
            return
        try:
            op, target, *rest = request
            if op == "name":
                value = program[target]
            elif op == "call":
                value = handles[target](*argument(rest[0]), **argument(rest[1]))
            elif op == "attr":
                value = getattr(handles[target], rest[0])
            elif op == "item":
                value = handles[target][argument(rest[0])]
            elif op == "iter":
                value = iter(handles[target])
            else:
                value = next(handles[target])
            reply = ["value", to_wire(value, handle)]
        except StopIteration:
            reply = ["stop"]
        except BaseException as error:  # noqa: B036 - whatever the program raises is its answer: the check fails
            reply = ["raised", type(error).__name__]
        pipe.send(reply)


class _End(Exception):
    """The program's iterator is exhausted."""


class Remote:
    """Something of the program's that is not plain data: it can be called, indexed, iterated and have its
    attributes read, each a request to the program's process; it can't be compared, hashed or tested for truth."""

    __slots__ = ("_number", "_grader")

    def __init__(self, number: int, grader: Grader):
        self._number = number
        self._grader = grader

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._grader.ask("call", self._number, self._grader.wire(list(args)), self._grader.wire(kwargs))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._grader.ask("attr", self._number, name)

    def __getitem__(self, key: Any) -> Any:
        return self._grader.ask("item", self._number, self._grader.wire(key))

    def __iter__(self):
        iterator = self._grader.ask("iter", self._number)
        while True:
            try:
                yield self._grader.ask("next", iterator._number)
            except _End:
                return

    def _not_plain(self, *args: Any) -> Any:
        raise TypeError("a check used something other than plain data from the program")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __hash__ = __len__ = __index__ = _not_plain


class Grader:
    """Evaluates checks with the program's names as :class:`Remote` objects in the program's process."""

    def __init__(self, pipe: Pipe):
        self.pipe = pipe
        self.scope = {"__builtins__": builtins, **{name: importlib.import_module(name) for name in GRADER_MODULES}}

    def wire(self, value: Any) -> Any:
        def number(item: Any) -> int:
            if type(item) is not Remote:
                raise WireError(f"a check passed {type(item).__name__} to the program; only plain data crosses")
            return item._number

        return to_wire(value, number)

    def ask(self, op: str, target: Any, *rest: Any) -> Any:
        self.pipe.send([op, target, *rest])
        reply = self.pipe.receive()
        if reply == ["stop"]:
            raise _End()
        if type(reply) is list and len(reply) == 2 and reply[0] == "value":
            return from_wire(reply[1], remote=lambda number: Remote(number, self))
        if type(reply) is list and len(reply) == 2 and reply[0] == "raised" and type(reply[1]) is str:
            raise ProgramRaised(reply[1][:100])
        raise WireError("not a reply")

    def passed(self, source: str) -> bool:
        tree = check_expression(source)
        scope = dict(self.scope)
        for name in program_names(tree):
            try:
                scope[name] = self.ask("name", name)
            except ProgramRaised:  # not the program's either: a NameError if the check reaches it
                continue
        verdict = eval(compile(tree, "<check>", "eval"), scope)
        return type(verdict) is not Remote and bool(verdict)


def check_expression(source: str) -> ast.Expression:
    """The expression a check asserts: ``assert x == 1, "message"`` asserts ``x == 1``, as Python would."""
    text = source.strip()
    statement = ast.parse(text).body if text.startswith("assert") else None
    if statement and len(statement) == 1 and isinstance(statement[0], ast.Assert):
        return ast.fix_missing_locations(ast.Expression(statement[0].test))
    return ast.parse(text, mode="eval")


def program_names(tree: ast.AST) -> list[str]:
    """The names a check takes from the program: those it neither binds itself nor finds among the grader's."""
    nodes = list(ast.walk(tree))
    bound = {node.id for node in nodes if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)}
    bound |= {node.arg for node in nodes if isinstance(node, ast.arg)}
    used = {node.id for node in nodes if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return sorted(used - bound - set(dir(builtins)) - set(GRADER_MODULES))


def grade(pipe: Pipe, checks: list[str], stop_at_first_failure: bool) -> None:
    """One line per check, in order: ``<index> pass`` or ``<index> fail``."""
    grader = Grader(pipe)
    for index, source in enumerate(checks):
        try:
            passed = grader.passed(source)
        except BaseException:  # noqa: B036 - a check that raises, a broken pipe, a refused value: failed
            passed = False
        sys.stdout.write(f"{index} {'pass' if passed else 'fail'}\n")
        sys.stdout.flush()
        if stop_at_first_failure and not passed:
            return


def verdicts(stdout: str, checks: int) -> list[bool]:
    """Which checks passed, read from the grader's output: each needs its one ``pass`` line."""
    reports: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        index, _, verdict = line.partition(" ")
        reports.setdefault(index, []).append(verdict)
    return [reports.get(str(index)) == ["pass"] for index in range(checks)]


def inputs() -> dict[str, Any]:
    """What this sandbox's main program is asked to do (:data:`INPUTS_FILE`, written beside it by the trainer)."""
    with open(INPUTS_FILE) as inputs_file:
        return json.load(inputs_file)


if __name__ == "__main__":
    asked = inputs()
    pipe = Pipe(*map(int, sys.argv[1:3]))
    if asked["role"] == "serve":
        serve(pipe)
    else:
        grade(pipe, asked["checks"], asked["stop_at_first_failure"])
