"""Code rewards: is there a code block, does it compile, and does it pass the row's own tests?

``code_execution_reward`` reads each row's ``test_cases`` column (one entry per completion, a list or its
JSON text) in two forms:

- ``{"input": "3\\n", "output": "9"}``: the program reads stdin; every output line must match (trailing
  whitespace and trailing blank lines ignored);
- ``{"assert": "solution(3) == 9"}``: the expression is checked after the program's code runs.

Programs run in :mod:`rewards.sandbox`; grading happens here in the trainer's process, from the
reports a harness around the program writes after a per-run random token (passed on stdin, so it is not
in the source file the program could read):

- an assert ``<expression> <op> <literal>`` (``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``, ``not in``,
  ``is``) is compared here: the program reports only the value of ``<expression>`` and the literal never
  enters the sandbox, so printing what the grader wants to see, exiting early with status 0 or reading
  the grader's source earns nothing. Values compare as Python literals, a tuple equal to the same list;
- any other assert (``all(f(x) == x * x for x in range(3))``, ``math.isclose(f(2), 4.0)``) is evaluated in
  the sandbox, which reports whether it held. Forging that report takes digging the token out of the
  harness's own objects; reading the source file does not find it.

Every value a check takes from the program must be plain data (exact ``int``, ``float``, ``str``, ``list``,
``dict``...): an object that "equals anything", or an ``int`` subclass, fails. Checks run with the
builtins, ``math`` and output descriptor the harness set aside before the program's code ran, so a
program that replaces ``sys.stdout``, ``print``, a builtin or a math function changes no report. A check
may use builtins and ``math``; every other name in it is the program's. Code is read after the
reasoning: a code block inside ``<think>`` is not the answer.
"""

from __future__ import annotations

import ast
import json
import operator
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .combine import Combined
from .correctness import CORRECT
from .extract import completion_text, extract_code_block, strip_reasoning
from .sandbox import run_batch, run_python_async

MAX_CODE_CHARS = 100_000


class CodeBlockFormat:
    """0.5 when the completion has a closed code block fenced as ``language``, case-insensitive:
    ``"python"`` (the default) accepts ```python, ```python3 and ```py; any other name its own fence
    (``CodeBlockFormat("javascript")``). open-r1's code format reward also asks for ``<think>`` and
    ``<answer>`` tags around the block; this one checks the fence only: pair it with a format reward.

    >>> code_block_format_reward(completions=["```python\\nprint(1)\\n```", "```bash\\nls\\n```", "```python\\nx = 1"])
    [0.5, 0.0, 0.0]
    >>> CodeBlockFormat("javascript")(completions=[[{"role": "assistant", "content": "```js\\nf()\\n```"}],
    ...                                             [{"role": "assistant", "content": "```javascript\\nf()\\n```"}]])
    [0.0, 0.5]
    """

    __name__ = "code_block_format_reward"

    def __init__(self, language: str = "python"):
        fences = ("python", "python3", "py") if language.lower() == "python" else (language,)
        self.language = language
        self.fence = re.compile(rf"```[ \t]*(?:{'|'.join(map(re.escape, fences))})[ \t]*\n.*?\n[ \t]*```", re.DOTALL | re.IGNORECASE)

    def __call__(self, prompts=None, completions=(), **kwargs) -> list[float]:
        return [0.5 if self.fence.search(completion_text(c)) else 0.0 for c in completions]


code_block_format_reward = CodeBlockFormat()


def _compiles(code: str | None) -> bool:
    if not code or len(code) > MAX_CODE_CHARS:
        return False
    try:
        compile(code, "<completion>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def no_syntax_error_reward(prompts=None, completions=(), **kwargs) -> list[float]:
    """0.2 when the completion's code block compiles (nothing is run).

    >>> no_syntax_error_reward(completions=["```python\\nx = 1\\n```", "```python\\nx = (\\n```", "no code"])
    [0.2, 0.0, 0.0]
    """
    return [0.2 if _compiles(extract_code_block(strip_reasoning(completion_text(c)))) else 0.0 for c in completions]


def parse_test_cases(value: Any) -> list[dict[str, Any]] | None:
    """A row's test cases as a list of dicts, or None when there are none.

    >>> parse_test_cases('[{"assert": "f() == 1"}]'), parse_test_cases(None)
    ([{'assert': 'f() == 1'}], None)
    """
    if value is None:
        return None
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else None
    if isinstance(value, dict):
        value = [value]
    cases = [dict(case) for case in value or [] if case]
    cases = [{k: v for k, v in case.items() if v is not None} for case in cases]  # Arrow fills missing keys with None
    for case in cases:
        if "assert" not in case and "output" not in case:
            raise ValueError(f"test case {case!r} has neither 'assert' nor 'output'; see rewards.code's docstring")
    return cases or None


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in str(text).replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda item, container: item in container, ast.NotIn: lambda item, container: item not in container,
}
_GRADER_NAMES = frozenset({
    "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "filter", "float", "frozenset", "int", "isinstance",
    "len", "list", "map", "math", "max", "min", "pow", "range", "reversed", "round", "set", "sorted", "str", "sum",
    "tuple", "type", "zip",
})


class _GuardProgramValues(ast.NodeTransformer):
    """Wraps each value a check takes from the program (a name the program defines, with the calls,
    attributes and indexing chained on it: ``solution(3)``, ``Solution().f(x)[0]``) in ``_grpo_plain(...)``,
    which lets only plain data through (a bare name may also be a function, for ``map(solution, ...)``)."""

    def __init__(self, tree: ast.AST):
        nodes = list(ast.walk(tree))  # names the check binds itself: comprehension variables, lambda arguments, :=
        self.local = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.local |= {n.arg for n in nodes if isinstance(n, ast.arg)}

    def visit(self, node: ast.AST) -> ast.AST:
        root = node
        while isinstance(root, (ast.Call, ast.Attribute, ast.Subscript)):
            root = root.func if isinstance(root, ast.Call) else root.value
        from_program = (
            isinstance(node, (ast.Call, ast.Attribute, ast.Subscript, ast.Name)) and isinstance(root, ast.Name)
            and isinstance(root.ctx, ast.Load) and root.id not in _GRADER_NAMES and root.id not in self.local
        )
        if from_program:
            return ast.Call(ast.Name("_grpo_plain", ast.Load()), [node, ast.Constant(node is root)], [])
        return self.generic_visit(node)


def _guarded(expression: ast.AST) -> str:
    return ast.unparse(ast.fix_missing_locations(_GuardProgramValues(expression).visit(expression)))


def _lists(value: Any) -> Any:
    """``value`` with tuples as lists, so a function returning ``(1, 2)`` passes ``== [1, 2]`` and the reverse."""
    if isinstance(value, (list, tuple)):
        return [_lists(item) for item in value]
    if isinstance(value, dict):
        return {key: _lists(item) for key, item in value.items()}
    return value


@dataclass(frozen=True)
class _Check:
    """One assert test. With ``compare``, the program reports the value of ``source`` (one side of
    ``<expression> <op> <literal>``) and the comparison with ``expected`` happens here, so the expected
    literal never enters the sandbox; without, the program reports whether ``source`` held."""

    source: str
    compare: Callable[[Any, Any], bool] | None = None
    expected: Any = None
    literal_first: bool = False

    def passed(self, report: str) -> bool:
        if self.compare is None:
            return report == "pass"
        kind, _, value = report.partition(" ")
        if kind != "value":
            return False
        try:
            value = _lists(ast.literal_eval(value))
            return bool(self.compare(self.expected, value) if self.literal_first else self.compare(value, self.expected))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False


def _check(assertion: str) -> _Check:
    """How to grade one assert test.

    >>> _check("solution(3) == [9, 'a']")
    _Check(source='_grpo_plain(solution(3), False)', compare=<built-in function eq>, expected=[9, 'a'], literal_first=False)
    >>> _check("assert abs(f(0.5) - 0.25) < 1e-9").source, _check("all(f(x) for x in range(3))").compare is None
    ('abs(_grpo_plain(f(0.5), False) - 0.25)', True)
    """
    try:
        tree = ast.parse(assertion.strip().removeprefix("assert "), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return _Check(assertion)  # the sandbox cannot evaluate it either: it fails there
    if isinstance(tree, ast.Compare) and len(tree.ops) == 1 and type(tree.ops[0]) in _COMPARE:
        for literal_first, literal, expression in ((False, tree.comparators[0], tree.left), (True, tree.left, tree.comparators[0])):
            try:
                expected = ast.literal_eval(literal)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            return _Check(_guarded(expression), _COMPARE[type(tree.ops[0])], _lists(expected), literal_first)
    return _Check(_guarded(tree))


# Everything the grading needs is taken before the program runs (default arguments are bound then): the
# report token (from stdin, so it is not in the program's source file), the report descriptor, os.write,
# eval, repr, type, the builtins and math, so a program that replaces sys.stdout, print, a builtin or a
# math function changes nothing the grader reads.
_HARNESS = """\
import builtins as _builtins, math as _math, os as _os, sys as _sys, types as _types


def _grade(checks, stop, names, token=_sys.stdin.readline().strip(), report_fd=_os.dup(1), write=_os.write, evaluate=eval, text=repr, truth=bool,
           kind_of=type, identity=id, is_function=callable, numbered=enumerate, exit_with=SystemExit,
           builtins=dict(vars(_builtins)), math=_types.SimpleNamespace(**vars(_math)),
           plain_kinds=frozenset(map(id, (int, float, complex, str, bytes, bool, type(None), list, tuple, set, frozenset, dict)))):
    def plain(value, may_be_function=False):
        kind = kind_of(value)
        if may_be_function and is_function(value):
            return value
        if identity(kind) not in plain_kinds:
            raise TypeError("a check got something other than plain data from the program")
        if kind is dict:
            for key, item in value.items():
                plain(key), plain(item)
        elif kind is list or kind is tuple or kind is set or kind is frozenset:
            for item in value:
                plain(item)
        return value

    scope = {**names, **{name: builtins[name] for name in GRADER_NAMES if name in builtins}}
    scope.update(math=math, _grpo_plain=plain, __builtins__=builtins)
    for index, (source, reports_value) in numbered(checks):
        try:
            value = plain(evaluate(source, scope))
            verdict = "value " + text(value) if reports_value else "pass" if truth(value) else "fail"
        except BaseException:
            verdict = "fail"
        write(report_fd, ("\\n" + token + " " + text(index) + " " + verdict + "\\n").encode())
        if stop and verdict == "fail":
            raise exit_with(1)


_program = {"__name__": "__main__", "__file__": __file__, "__builtins__": _builtins}
exec(compile(CODE, "solution.py", "exec"), _program)
_grade(CHECKS, STOP, _program)
"""


def _assert_program(code: str, checks: Sequence[_Check], stop_at_first_failure: bool) -> str:
    """The harness around the program's code: it reads the report token from stdin, runs the code, then
    reports each check on a fresh line after the token."""
    filled = {
        "GRADER_NAMES": repr(sorted(_GRADER_NAMES)), "CODE": repr(code), "STOP": repr(stop_at_first_failure),
        "CHECKS": repr([(c.source, c.compare is not None) for c in checks]),
    }
    return re.sub(r"\b(GRADER_NAMES|CODE|CHECKS|STOP)\b", lambda m: filled[m.group(1)], _HARNESS)


def _passed_checks(stdout: str, checks: Sequence[_Check], token: str, stop_at_first_failure: bool) -> int:
    """How many checks passed (up to the first failure, when asked), judged here: each needs exactly one
    report, and a value report must decode to a value that compares as the test says (a check reported
    twice, e.g. by an ``atexit`` hook, fails)."""
    reports: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        if line.startswith(token + " "):
            index, _, report = line[len(token) + 1 :].partition(" ")
            reports.setdefault(index, []).append(report)
    passed = 0
    for i, check in enumerate(checks):
        only = reports.get(str(i), [])
        ok = len(only) == 1 and check.passed(only[0])
        passed += ok
        if stop_at_first_failure and not ok:
            break
    return passed


class CodeExecutionReward:
    """Up to 2.0 for passing the row's tests: all of them (default), or the passed fraction with
    ``partial_credit=True``. ``stop_at_first_failure`` skips tests after the first failure. ``None`` for
    rows without tests; 0.0 when the completion has no code block.

    >>> code_execution_reward(completions=["```python\\ndef solution(x):\\n    return x * x\\n```"],
    ...                       test_cases=[[{"assert": "solution(3) == 9"}, {"assert": "solution(0) == 0"}]])
    [2.0]
    """

    __name__ = "code_execution_reward"

    def __init__(self, *, partial_credit: bool = False, stop_at_first_failure: bool = False, timeout: float = 5.0, memory_mb: int = 512):
        self.partial_credit = partial_credit
        self.stop_at_first_failure = stop_at_first_failure
        self.limits = {"timeout": timeout, "memory_mb": memory_mb}

    def _plan(self, completions, test_cases) -> tuple[list[list[tuple]], list]:
        """Per completion, the programs to run and how to grade each; ``None`` rows have no tests."""
        if test_cases is None:
            test_cases = [None] * len(completions)
        if len(test_cases) != len(completions):
            raise ValueError(f"test_cases has {len(test_cases)} entries for {len(completions)} completions")
        plans, programs = [], []
        for completion, cases in zip(completions, test_cases):
            cases = parse_test_cases(cases)
            code = extract_code_block(strip_reasoning(completion_text(completion)))
            if cases is None or not code:
                plans.append(None if cases is None else [])
                continue
            plan = []
            checks = [_check(str(case["assert"])) for case in cases if "assert" in case]
            if checks:
                token = secrets.token_hex(16)
                plan.append(("asserts", len(programs), checks, token))
                programs.append((_assert_program(code, checks, self.stop_at_first_failure), token + "\n"))
            for case in cases:
                if "output" in case:
                    plan.append(("io", len(programs), case["output"]))
                    programs.append((code, str(case.get("input", ""))))
            plans.append(plan)
        return plans, programs

    def _grade(self, plan, results) -> float | None:
        if plan is None:
            return None
        passed = total = 0
        for step in plan:
            result = results[step[1]]
            if step[0] == "asserts":
                _, _, checks, token = step
                passed += _passed_checks(result.stdout, checks, token, self.stop_at_first_failure)
                total += len(checks)
            else:
                passed += result.killed_reason is None and _lines(result.stdout) == _lines(step[2])
                total += 1
            if self.stop_at_first_failure and passed < total:
                break
        if total == 0:
            return 0.0
        return round(CORRECT * passed / total, 6) if self.partial_credit else CORRECT * (passed == total)

    def __call__(self, prompts=None, completions=(), test_cases=None, **kwargs) -> list[float | None]:
        plans, programs = self._plan(completions, test_cases)
        results = run_batch(programs, **self.limits) if programs else []
        return [self._grade(plan, results) for plan in plans]


class AsyncCodeExecutionReward(CodeExecutionReward):
    """:class:`CodeExecutionReward` as an ``async`` function: GRPOTrainer awaits it alongside the other
    async rewards instead of waiting for the programs before starting them."""

    async def __call__(self, prompts=None, completions=(), test_cases=None, **kwargs) -> list[float | None]:
        import asyncio

        plans, programs = self._plan(completions, test_cases)
        results = await asyncio.gather(*(run_python_async(code, stdin=stdin, **self.limits) for code, stdin in programs))
        return [self._grade(plan, results) for plan in plans]


code_execution_reward = CodeExecutionReward()

code_generation_reward = Combined(code_block_format_reward, code_execution_reward, no_syntax_error_reward, name="code_generation_reward")
"""Code block (0.5) + tests passed (2.0) + compiles (0.2): 2.7 at most."""

CODE_GENERATION_REWARDS = [code_block_format_reward, code_execution_reward, no_syntax_error_reward]
