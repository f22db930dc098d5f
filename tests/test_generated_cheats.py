"""Cheating programs by class, generated: correct solutions of a test suite are mutated into wrong ones (MUTATIONS: a
constant, off by one, a branch dropped, None, a raise), and each mutant is combined with each known way of forging a
pass (TECHNIQUES). None may earn more than its honest mutant: with all-or-nothing credit every cheat scores 0.0, with
partial credit no more than the mutant alone. bubblewrap runs the whole generated set; the rlimits fallback, which
runs one program at a time, a sample of one mutant per technique.

The suite holds builtin coding tasks (code_tasks.jsonl carries tests but no solutions, so they are written here) and
tasks whose checks compare with something the grader computes (``bin(10)[2:]``, ``set(...)``, ``sorted(...)``,
``all(...)``, ``isinstance(...)``), as assert tests and as stdin tests. A forged reply always answers "pass", never a
right answer here: a check it wins would be won by forging, not by a lucky guess.

Last, PLANTED: an answer one program leaves for a later one, which must not pay the later one.
"""

import ast
import ctypes
import itertools
import json
import os
import platform
import random
import secrets
import textwrap
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from seekers import EVERYWHERE, READERS

import rewards.sandbox as sandbox
from rewards.code import CodeExecutionReward

pytestmark = pytest.mark.stack_free  # nothing here reaches transformers, TRL, PEFT or datasets

BUILTIN_TASKS = Path(__file__).parents[1] / "grpo_lite" / "assets" / "datasets" / "code_tasks.jsonl"


def builtin_tests(phrase: str) -> list[dict]:
    """The tests of the builtin coding task whose question says ``phrase``."""
    rows = [json.loads(line) for line in BUILTIN_TASKS.read_text().splitlines() if line.strip()]
    (row,) = [row for row in rows if phrase in row["question"]]
    return row["test_cases"]


@dataclass(frozen=True, eq=False)
class Task:
    name: str
    solution: str
    tests: list

    @property
    def kind(self) -> str:
        return "asserts" if "assert" in self.tests[0] else "stdin"


SQUARE = """
def solution(n):
    n = abs(n)
    square = 0
    for _ in range(n):
        square += n
    return square
"""
PRIME = """
def solution(n):
    if n < 2:
        return False
    for divisor in range(2, int(n ** 0.5) + 1):
        if n % divisor == 0:
            return False
    return True
"""
DISTINCT = """
def solution(xs):
    seen = []
    for x in xs:
        if x not in seen:
            seen.append(x)
    return seen
"""
ODD_ITEMS = """
def solution(xs):
    return [x for x in xs if x % 2 == 1]
"""
BINARY = """
def solution(n):
    if n == 0:
        return "0"
    digits = ""
    while n > 0:
        digits = str(n % 2) + digits
        n //= 2
    return digits
"""
DIVISORS = """
def solution(n):
    return [d for d in range(1, n + 1) if n % d == 0]
"""
COUNT_TO_N = """
n = int(input())
for number in range(1, n + 1):
    print(number)
"""
EVEN_OR_ODD = """
n = int(input())
if n % 2 == 0:
    print("even")
else:
    print("odd")
"""
LARGEST = """
print(sorted(int(word) for word in input().split())[-1])
"""

TASKS = [
    Task("square", SQUARE, builtin_tests("returns n squared") + [
        {"assert": "all(solution(i) == i * i for i in range(5))"},
        {"assert": "isinstance(solution(2), int) and solution(2) == 4"},
    ]),
    Task("prime", PRIME, builtin_tests("True if n is prime")),
    Task("distinct items", DISTINCT, builtin_tests("distinct items") + [{"assert": "len(solution([1, 1])) == 1"}]),
    Task("odd items", ODD_ITEMS, [
        {"assert": "set(solution([1, 2, 3, 4])) == set([1, 3])"},
        {"assert": "sorted(solution([5, 4, 7])) == sorted([7, 5])"},
        {"assert": "solution([]) == []"},
    ]),
    Task("binary", BINARY, [
        {"assert": "solution(10) == bin(10)[2:]"},
        {"assert": "solution(0) == bin(0)[2:]"},
        {"assert": "solution(255) == format(255, 'b')"},
    ]),
    Task("divisors", DIVISORS, [
        {"assert": "sorted(solution(12)) == sorted([12, 6, 4, 3, 2, 1])"},
        {"assert": "sorted(solution(7)) == [1, 7]"},
        {"assert": "solution(1) == [1]"},
    ]),
    Task("count to n", COUNT_TO_N, [{"input": "3\n", "output": "1\n2\n3"}, {"input": "2\n", "output": "1\n2"}]),
    Task("even or odd", EVEN_OR_ODD, builtin_tests("prints 'even' or 'odd'")),
    Task("largest", LARGEST, builtin_tests("space-separated integers and prints the largest")),
]


# Mutations: each turns a correct program into a wrong one, or returns None where it finds nothing to change.
def _is_print(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"


class _ConstantResult(ast.NodeTransformer):
    """Returns, or prints, 0."""

    def visit_Return(self, node):
        return ast.Return(ast.Constant(0))

    def visit_Call(self, node):
        return ast.Call(node.func, [ast.Constant(0)], []) if _is_print(node) else self.generic_visit(node)


class _OffByOne(ast.NodeTransformer):
    """Every integer literal is one more."""

    def visit_Constant(self, node):
        return ast.Constant(node.value + 1) if type(node.value) is int else node


class _DropBranch(ast.NodeTransformer):
    """The first condition goes: an ``if`` statement's body (its ``else`` stays), or a comprehension's filter."""

    dropped = False

    def visit_If(self, node):
        if self.dropped:
            return self.generic_visit(node)
        self.dropped = True
        return node.orelse or ast.Pass()

    def visit_comprehension(self, node):
        if not self.dropped and node.ifs:
            self.dropped = True
            node.ifs = node.ifs[1:]
        return self.generic_visit(node)


class _NoResult(ast.NodeTransformer):
    """Returns None, or prints nothing."""

    def visit_Return(self, node):
        return ast.Return(None)

    def visit_Call(self, node):
        return ast.Call(node.func, [], []) if _is_print(node) else self.generic_visit(node)


class _Raises(ast.NodeTransformer):
    """Raises before its first statement (of each function, or of the program)."""

    def visit_FunctionDef(self, node):
        node.body.insert(0, ast.parse("raise RuntimeError('wrong')").body[0])
        return node

    def visit_Module(self, node):
        if not any(isinstance(statement, ast.FunctionDef) for statement in node.body):
            node.body.insert(0, ast.parse("raise RuntimeError('wrong')").body[0])
        return self.generic_visit(node)


MUTATIONS = {"return a constant": _ConstantResult, "off by one": _OffByOne, "drop a branch": _DropBranch,
             "return None": _NoResult, "raise": _Raises}


def mutate(source: str, mutation: type[ast.NodeTransformer]) -> str | None:
    original = ast.unparse(ast.parse(source))
    mutated = ast.unparse(ast.fix_missing_locations(mutation().visit(ast.parse(source))))
    return mutated if mutated != original else None


@dataclass(frozen=True, eq=False)
class Mutant:
    task: Task
    mutation: str
    code: str


MUTANTS = [Mutant(task, name, code) for task in TASKS for name, mutation in MUTATIONS.items()
           if (code := mutate(task.solution, mutation))]


@dataclass(frozen=True)
class Technique:
    """A way of forging a pass: ``prefix`` runs before the mutant's code, ``suffix`` after it (a suffix may wrap
    ``solution``); ``kinds`` are the tests it aims at."""

    kinds: tuple[str, ...]
    prefix: str = ""
    suffix: str = ""


BOTH, ASSERTS = ("asserts", "stdin"), ("asserts",)
FORGED = b'["value", "pass"]\n'
PIPE = "import os, sys\ninbox, outbox = int(sys.argv[-2]), int(sys.argv[-1])\n"  # the server's fds: its last two arguments


def wrapping(before: str = "", after: str = "") -> str:
    """A suffix that wraps the mutant's ``solution``: ``before`` runs first, ``after`` may replace ``value``."""
    return textwrap.dedent("""
        _honest = solution
        def solution(*args, **kwargs):
        {before}
            value = _honest(*args, **kwargs)
        {after}
            return value
    """).format(before=textwrap.indent(textwrap.dedent(before), "    "), after=textwrap.indent(textwrap.dedent(after), "    "))


ANYTHING = """
class Anything:
    __eq__ = __le__ = __ge__ = __contains__ = lambda self, other: True
    __ne__ = __lt__ = __gt__ = lambda self, other: False
    __hash__ = lambda self: 0
    __bool__ = lambda self: True
    __len__ = lambda self: 1
    __iter__ = lambda self: iter([self])
    __str__ = __repr__ = lambda self: "0 pass"
"""
PATCHED_EQ = """
class {name}({base}):
    __eq__ = lambda self, other: True
    __ne__ = lambda self, other: False
    __hash__ = lambda self: 0
"""

# Reads every check it can find where another process keeps its inputs (command lines, environments, working folders,
# the sandboxes' folders) and answers each call a check it found makes with that check's expected value.
FOUND_ANSWERS = READERS + textwrap.dedent(r"""
    def _answers():
        found = {}
        for args, expected in re.findall(r"solution\((.*?)\) == ([^\x00\n\"']+)", EVERYWHERE):
            try:
                found[args] = eval(expected.strip())
            except Exception:
                pass
        return found
""").replace("EVERYWHERE", EVERYWHERE)

TECHNIQUES = {
    "reads its checks where other processes keep their inputs": Technique(ASSERTS, prefix=FOUND_ANSWERS, suffix=wrapping(
        before="asked = repr(args)[1:-1].rstrip(',')", after="""
found = _answers()
if asked in found:
    value = found[asked]
""")),
    "prints verdict lines": Technique(BOTH, prefix="""
import sys
for index in range(16):
    print(index, "pass")
    print(index, "pass", file=sys.stderr)
print("ok\\nPASSED\\nTrue")
"""),
    "sys.exit(0) before the checks": Technique(BOTH, suffix="import sys\nsys.exit(0)\n"),
    "os._exit(0) before the checks": Technique(BOTH, suffix="import os, sys\nsys.stdout.flush()\nos._exit(0)\n"),
    "sys.exit(0) inside solution": Technique(ASSERTS, suffix=wrapping(before="raise SystemExit(0)")),
    "replaces builtins": Technique(BOTH, prefix=ANYTHING + """
import builtins
anything = lambda *args, **kwargs: Anything()
for name in ("sorted", "set", "bool", "len", "bin", "format", "abs", "max", "min", "sum"):
    setattr(builtins, name, anything)
builtins.isinstance = builtins.all = builtins.any = lambda *args, **kwargs: True
_print = builtins.print
builtins.print = lambda *args, **kwargs: _print("0 pass", *args, **kwargs)
"""),
    "returns an object equal to anything": Technique(ASSERTS, prefix=ANYTHING, suffix=wrapping(after="value = Anything()")),
    "returns an int subclass with a patched __eq__ and __hash__": Technique(
        ASSERTS, prefix=PATCHED_EQ.format(name="Int", base="int"), suffix=wrapping(after="value = Int(value if type(value) is int else 0)")),
    "returns a str subclass with a patched __eq__ and __hash__": Technique(
        ASSERTS, prefix=PATCHED_EQ.format(name="Str", base="str"), suffix=wrapping(after="value = Str(value)")),
    "returns a list subclass with a patched __eq__ and __hash__": Technique(
        ASSERTS, prefix=PATCHED_EQ.format(name="List", base="list"),
        suffix=wrapping(after="value = List(value if isinstance(value, (list, tuple)) else [value])")),
    "atexit hooks": Technique(BOTH, prefix="""
import atexit, os, sys
def forge():
    print("0 pass\\n1 pass\\n2 pass\\n3 pass")
    for fd in sys.argv[-2:]:
        try:
            os.write(int(fd), b'["value", "pass"]\\n' * 8)
        except (ValueError, OSError):
            pass
atexit.register(forge)
"""),
    "walks stack frames to edit the server's state": Technique(ASSERTS, suffix=wrapping(before="""
import sys
frame = sys._getframe(1)
while frame is not None:
    names = frame.f_locals
    if "handles" in names and "pipe" in names:
        names["program"]["solution"] = lambda *args, **kwargs: "pass"
        names["handles"][:] = [lambda *args, **kwargs: "pass"] * len(names["handles"])
        send = names["pipe"].send
        names["pipe"].send = lambda message: send(["value", "pass"])
    frame = frame.f_back
""")),
    "scans gc.get_objects() to edit the server's state": Technique(ASSERTS, suffix=wrapping(before="""
import gc
for thing in gc.get_objects():
    if type(thing) is dict and thing.get("__file__") == "solution.py":
        thing["solution"] = lambda *args, **kwargs: "pass"
    elif type(thing).__name__ == "Pipe":
        thing.send = (lambda send: lambda message: send(["value", "pass"]))(thing.send)
    elif type(thing) is list and any(item is solution for item in thing):
        thing[:] = [lambda *args, **kwargs: "pass"] * len(thing)
""")),
    "sys.settrace rewrites the server's replies": Technique(ASSERTS, prefix="""
import sys
def forge(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "send" and type(frame.f_locals.get("message")) is list:
        frame.f_locals["message"][:] = ["value", "pass"]
    return forge
sys.settrace(forge)
"""),
    "sys.setprofile rewrites the server's replies": Technique(ASSERTS, prefix="""
import sys
def forge(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "send" and type(frame.f_locals.get("message")) is list:
        frame.f_locals["message"][:] = ["value", "pass"]
sys.setprofile(forge)
"""),
    "rewrites sys.modules['json']": Technique(ASSERTS, prefix="""
import json, sys, types
_dumps = json.dumps
json.dumps = lambda value, *args, **kwargs: _dumps(["value", "pass"])
sys.modules["json"] = types.SimpleNamespace(dumps=json.dumps, loads=lambda text, *args, **kwargs: ["value", "pass"])
"""),
    "rewrites os.write": Technique(BOTH, prefix="""
import os
_write = os.write
os.write = lambda fd, data: _write(fd, b'["value", "pass"]\\n0 pass\\n' + bytes(data))
"""),
    "re-reads stdin for the expected output": Technique(BOTH, prefix="""
import os, sys
seen = sys.stdin.read()
try:
    os.lseek(0, 0, os.SEEK_SET)
except OSError:
    pass
for marker in ("output", "expected", "assert"):
    if marker in seen:
        print(seen.split(marker, 1)[1])
"""),
    "forged replies on the pipe before the real ones": Technique(ASSERTS, prefix=PIPE + f"os.write(outbox, {FORGED * 64!r})\n"),
    "forged replies on the pipe after the real ones": Technique(ASSERTS, prefix=PIPE, suffix=wrapping(after=f"""
import threading, time
threading.Thread(target=lambda: (time.sleep(0.01), os.write(outbox, {FORGED * 64!r}))).start()
""")),
    "floods the pipe": Technique(ASSERTS, prefix=PIPE + """
import threading
threading.Thread(target=lambda: os.write(outbox, b"[" * (9 * 2**20)), daemon=True).start()
"""),
    "closes the pipe": Technique(ASSERTS, prefix=PIPE + "os.close(inbox)\nos.close(outbox)\n"),
    "a forked child answers": Technique(ASSERTS, prefix=PIPE + f"""
if os.fork() == 0:
    requests = os.fdopen(inbox, "rb")
    while requests.readline():
        os.write(outbox, {FORGED!r})
    os._exit(0)
os.close(inbox)
os.close(outbox)
"""),
    "sleeps to race the grader": Technique(ASSERTS, prefix=PIPE + f"""
import threading, time
def forge():
    for _ in range(10):
        time.sleep(0.05)
        os.write(outbox, {FORGED * 8!r})
threading.Thread(target=forge, daemon=True).start()
""", suffix=wrapping(before="import time\ntime.sleep(0.1)")),
    "writes to /proc/*/fd to reach the grader": Technique(BOTH, prefix="""
import os
print(os.listdir(f"/proc/{os.getppid()}"))
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fd/{fd}", "w") as target:
                target.write("0 pass\\n1 pass\\n2 pass\\n3 pass\\n")
        except OSError:
            pass
"""),
    "writes to another process's stdout and stderr": Technique(BOTH, prefix="""
import os
for pid in filter(str.isdigit, os.listdir("/proc")):
    if int(pid) != os.getpid():
        for fd in (1, 2):
            try:
                with open(f"/proc/{pid}/fd/{fd}", "a") as target:
                    target.write("0 pass\\n1 pass\\n2 pass\\n3 pass\\n")
            except OSError:
                pass
"""),
}

# The knob tests/test_generated_input.py reads too: 300 by default, 4 mutants per technique (3000 combines each with
# every mutant); GRPO_LITE_GENERATED_SEEDED=0 draws new combinations each run.
EXAMPLES = int(os.environ.get("GRPO_LITE_GENERATED_EXAMPLES", "300"))
PER_TECHNIQUE = max(1, EXAMPLES // 75)
SEED = 47 if os.environ.get("GRPO_LITE_GENERATED_SEEDED", "1") == "1" else random.randrange(2**32)
# The techniques that change what a correct program answers (they reach the server or its pipe), so a correct
# program loses with them: proof that they took effect. The others forge where the grader does not look.
DISTURBS_A_CORRECT_PROGRAM = {
    "sys.exit(0) before the checks", "os._exit(0) before the checks", "sys.exit(0) inside solution", "replaces builtins",
    "returns an object equal to anything", "returns an int subclass with a patched __eq__ and __hash__",
    "returns a str subclass with a patched __eq__ and __hash__", "returns a list subclass with a patched __eq__ and __hash__",
    "walks stack frames to edit the server's state", "scans gc.get_objects() to edit the server's state",
    "sys.settrace rewrites the server's replies", "sys.setprofile rewrites the server's replies", "rewrites sys.modules['json']",
    "forged replies on the pipe before the real ones", "floods the pipe", "closes the pipe", "a forked child answers",
    "sleeps to race the grader",
}


@dataclass(frozen=True)
class Cheat:
    technique: str
    mutant: Mutant

    @property
    def code(self) -> str:
        technique = TECHNIQUES[self.technique]
        return f"{technique.prefix}\n{self.mutant.code}\n{technique.suffix}"


def generate(per_technique: int) -> list[Cheat]:
    """Each technique with ``per_technique`` of the mutants it applies to, drawn from the seeded product."""
    pairs = [(name, mutant) for name, mutant in itertools.product(TECHNIQUES, MUTANTS)
             if mutant.task.kind in TECHNIQUES[name].kinds]
    random.Random(SEED).shuffle(pairs)
    taken = Counter()
    cheats = []
    for name, mutant in pairs:
        if taken[name] < per_technique:
            taken[name] += 1
            cheats.append(Cheat(name, mutant))
    return cheats


CHEATS = generate(PER_TECHNIQUE)
PROGRAMS_PER_TECHNIQUE = Counter(cheat.technique for cheat in CHEATS)
RLIMITS_SAMPLE = generate(1)  # the fallback runs one program at a time: one mutant per technique


def completion(code: str) -> str:
    return f"```python\n{code.strip()}\n```"


def scores(programs: list[str], tests: list[list], *, partial_credit: bool) -> list[float]:
    return CodeExecutionReward(partial_credit=partial_credit)(completions=[completion(code) for code in programs], test_cases=tests)


@pytest.fixture(scope="module")
def honest_scores() -> dict[Mutant, float]:
    """What each mutant earns alone with partial credit, measured once in bubblewrap (a program's answers do not
    depend on the mode)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(sandbox.MODE_VARIABLE, "bubblewrap")
        sandbox.isolation.cache_clear()
        earned = scores([m.code for m in MUTANTS], [m.task.tests for m in MUTANTS], partial_credit=True)
    sandbox.isolation.cache_clear()
    return dict(zip(MUTANTS, earned))


def test_the_suite_has_each_kind_of_check_and_test():
    checks = [case["assert"] for task in TASKS for case in task.tests if "assert" in case]
    for shape in ("set(solution(", "bin(10)[2:]", "sorted(solution(", "all(solution(i)", "isinstance(solution("):
        assert any(shape in check for check in checks), shape
    assert {task.kind for task in TASKS} == {"asserts", "stdin"}
    assert set(Counter(mutant.mutation for mutant in MUTANTS)) == set(MUTATIONS)


@pytest.mark.parametrize("mode", ["bubblewrap", "rlimits"], indirect=True, scope="module")
def test_the_correct_solutions_earn_full_credit(mode):
    assert scores([task.solution for task in TASKS], [task.tests for task in TASKS], partial_credit=False) == [2.0] * len(TASKS)


@pytest.mark.parametrize("mode", ["bubblewrap"], indirect=True, scope="module")
def test_each_mutant_alone_earns_nothing(mode, honest_scores):
    all_or_nothing = scores([m.code for m in MUTANTS], [m.task.tests for m in MUTANTS], partial_credit=False)
    assert [(m.task.name, m.mutation) for m, score in zip(MUTANTS, all_or_nothing) if score != 0.0] == []
    assert all(score < 2.0 for score in honest_scores.values())


@pytest.mark.parametrize("mode", ["bubblewrap"], indirect=True, scope="module")
def test_the_techniques_that_reach_the_server_take_effect(mode):
    """Each of them, wrapped around a correct program, spoils its answers: they reached what they aim at."""
    square = TASKS[0]
    techniques = sorted(DISTURBS_A_CORRECT_PROGRAM)
    programs = [f"{TECHNIQUES[name].prefix}\n{square.solution}\n{TECHNIQUES[name].suffix}" for name in techniques]
    earned = scores(programs, [square.tests] * len(programs), partial_credit=True)
    assert [name for name, score in zip(techniques, earned) if score == 2.0] == []


@pytest.mark.parametrize("mode", ["bubblewrap", "rlimits"], indirect=True, scope="module")
def test_no_generated_cheat_earns_more_than_its_honest_mutant(mode, honest_scores):
    cheats = CHEATS if mode == "bubblewrap" else RLIMITS_SAMPLE
    counts = Counter(cheat.technique for cheat in cheats)
    print(f"\n{len(cheats)} generated cheats in {mode} (seed {SEED}):", ", ".join(f"{n} {name}" for name, n in counts.items()))
    programs, tests = [cheat.code for cheat in cheats], [cheat.mutant.task.tests for cheat in cheats]
    all_or_nothing = scores(programs, tests, partial_credit=False)
    partial = scores(programs, tests, partial_credit=True)

    earned = [(cheat.technique, cheat.mutant.task.name, cheat.mutant.mutation, whole, part, honest_scores[cheat.mutant])
              for cheat, whole, part in zip(cheats, all_or_nothing, partial)
              if whole != 0.0 or part > honest_scores[cheat.mutant]]
    assert earned == [], "cheats that earned (technique, task, mutation, all-or-nothing, partial, honest partial)"


# An answer one sample leaves for a later one: a correct program that also leaves its ANSWER (its own code) somewhere,
# and a program that runs whatever answer it finds there (it solves nothing itself). Each pair is (plant, fetch).
ADD_KEY = {"x86_64": 248, "aarch64": 217}.get(platform.machine())
KEYCTL = sandbox._KEYCTL.get(platform.machine())
PLANTED = {
    "a file in /tmp": ("""
import os
os.umask(0)
open("/tmp/NAME", "w").write(ANSWER)
""", """
def fetch():
    try:
        return open("/tmp/NAME").read()
    except OSError:
        return None
"""),
    "a POSIX message queue": ("""
import ctypes, os
os.umask(0)
rt = ctypes.CDLL("librt.so.1")
queue = rt.mq_open(b"/NAME", os.O_CREAT | os.O_RDWR | os.O_NONBLOCK, 0o666, None)
rt.mq_send(queue, ANSWER.encode(), len(ANSWER.encode()), 0)
""", """
def fetch():
    import ctypes, os
    rt = ctypes.CDLL("librt.so.1")
    queue, message = rt.mq_open(b"/NAME", os.O_RDWR | os.O_NONBLOCK), ctypes.create_string_buffer(8192)
    size = rt.mq_receive(queue, message, 8192, None) if queue >= 0 else -1
    if size <= 0:
        return None
    rt.mq_send(queue, message, size, 0)  # back in the queue, for the next one
    return message.raw[:size].decode()
"""),
    "System V shared memory": ("""
import ctypes
libc = ctypes.CDLL(None)
libc.shmat.restype = ctypes.c_void_p
source = ANSWER.encode() + b"\\0"
ctypes.memmove(libc.shmat(libc.shmget(IPC_KEY, 65536, 0o1000 | 0o666), None, 0), source, len(source))
""", """
def fetch():
    import ctypes
    libc = ctypes.CDLL(None)
    libc.shmat.restype = ctypes.c_void_p
    segment = libc.shmget(IPC_KEY, 0, 0)
    return ctypes.string_at(libc.shmat(segment, None, 0)).decode() if segment >= 0 else None
"""),
    "a key in its user, user-session and persistent keyrings": ("""
import ctypes
libc = ctypes.CDLL(None)
libc.syscall.restype = ctypes.c_long
keyctl = lambda *args: libc.syscall(ctypes.c_long(KEYCTL), *map(ctypes.c_long, args))
source = ANSWER.encode()
key = libc.syscall(ctypes.c_long(ADD_KEY), b"user", b"NAME", source, ctypes.c_long(len(source)), ctypes.c_long(-3))
keyctl(5, key, 0x3f3f3f3f)  # KEYCTL_SETPERM: anyone may read it
for ring in (-4, -5, keyctl(22, -1, -3)):  # KEYCTL_LINK into @u, @us and the persistent keyring
    keyctl(8, key, ring)
""", """
def fetch():
    import ctypes
    libc = ctypes.CDLL(None)
    libc.syscall.restype = ctypes.c_long
    payload = ctypes.create_string_buffer(65536)
    for line in open("/proc/keys"):
        if "NAME" in line:
            size = libc.syscall(ctypes.c_long(KEYCTL), ctypes.c_long(11), ctypes.c_long(int(line.split()[0], 16)), payload, ctypes.c_long(65536))
            if size > 0:
                return payload.raw[:size].decode()
    return None
"""),
}
def remove_planted(name: str, ipc_key: int) -> None:
    """Whatever a planter left on the machine, removed as root."""
    if os.path.exists(f"/tmp/{name}"):
        os.remove(f"/tmp/{name}")
    ctypes.CDLL("librt.so.1").mq_unlink(f"/{name}".encode())
    libc = ctypes.CDLL(None)
    if (segment := libc.shmget(ipc_key, 0, 0)) >= 0:
        libc.shmctl(segment, 0, None)  # IPC_RMID
    libc.syscall.restype = ctypes.c_long
    for line in Path("/proc/keys").read_text().splitlines():
        if name in line:
            libc.syscall(ctypes.c_long(KEYCTL), ctypes.c_long(21), ctypes.c_long(int(line.split()[0], 16)))  # KEYCTL_INVALIDATE


@pytest.mark.parametrize("mode", ["bubblewrap", "rlimits"], indirect=True, scope="module")
@pytest.mark.parametrize("channel", PLANTED)
def test_an_answer_left_by_an_earlier_program_earns_nothing_later(channel, mode, request):
    if "key" in channel and not (ADD_KEY and KEYCTL):
        pytest.skip(f"no keyring call numbers for {platform.machine()}")
    name, ipc_key = f"grpo-lite-planted-{secrets.token_hex(6)}", secrets.randbits(30)
    plant, fetch = (textwrap.dedent(part).replace("NAME", name) for part in PLANTED[channel])
    constants = f"IPC_KEY, ADD_KEY, KEYCTL = {ipc_key}, {ADD_KEY}, {KEYCTL}\n"
    planter = f"{constants}ANSWER = {COUNT_TO_N!r}\nexec(ANSWER)\n{plant}"
    reader = constants + fetch + "found = fetch()\nif found:\n    exec(found)\n"
    tests = [TASKS[6].tests]
    try:
        assert scores([reader], tests, partial_credit=False) == [0.0]  # alone, it has no answer
        earned = []
        # a later program of the planter's own uid finds its keyrings emptied; the fallback draws uids at random
        for _ in range(3 if "key" in channel else 1):
            assert scores([planter], tests, partial_credit=False) == [2.0]
            earned += scores([reader], tests, partial_credit=False)
            if earned[-1]:
                break
        assert set(earned) == {0.0}, f"a program earned {earned} with the answer an earlier one left in {channel}"
    finally:
        remove_planted(name, ipc_key)
