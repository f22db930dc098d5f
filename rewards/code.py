"""Code rewards: is there a code block, does it compile, and does it pass the row's own tests?

``code_execution_reward`` reads each row's ``test_cases`` column (one entry per completion, a list or its
JSON text) in two forms:

- ``{"input": "3\\n", "output": "9"}``: the program reads stdin; every output line must match (trailing
  whitespace and trailing blank lines ignored);
- ``{"assert": "solution(3) == 9"}``: the expression is checked after the program's code runs.

Programs run in :mod:`rewards.sandbox`, and grading happens here in the trainer's process. For an
assert of the form ``<expression> == <literal>`` the program only reports the value of ``<expression>``
(as JSON, once, after a per-run random token) and the expected literal never enters the sandbox, so
printing what the grader wants to see, exiting early with status 0, reading the grader's source or
returning an object that "equals" anything earns nothing (values compare as JSON: a tuple equals the same
list). Other asserts count when the program reports them passed right after running them, a report a
program that reads its own source could forge.
"""

from __future__ import annotations

import ast
import json
import re
import secrets
from typing import Any, Sequence

from .combine import Combined
from .extract import completion_text, extract_code_block
from .sandbox import run_batch, run_python_async

CORRECT = 2.0
MAX_CODE_CHARS = 100_000


_PYTHON_FENCE = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n.*?\n[ \t]*```", re.DOTALL | re.IGNORECASE)


def code_block_format_reward(prompts=None, completions=(), **kwargs) -> list[float]:
    """0.5 when the completion has a closed code block fenced as ```python (or ```py).

    >>> code_block_format_reward(completions=["```python\\nprint(1)\\n```", "```bash\\nls\\n```", "```python\\nx = 1"])
    [0.5, 0.0, 0.0]
    """
    return [0.5 if _PYTHON_FENCE.search(completion_text(c)) else 0.0 for c in completions]


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
    return [0.2 if _compiles(extract_code_block(completion_text(c))) else 0.0 for c in completions]


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


_IN_PROCESS = object()  # an assert that is not ``<expression> == <literal>``: the program reports its verdict


def _expected_value(assertion: str) -> tuple[str, Any]:
    """``(expression, expected)`` for ``<expression> == <literal>`` with a JSON-able literal, else
    ``(assertion, _IN_PROCESS)``.

    >>> _expected_value("solution(3) == [9, 'a']"), _expected_value("solution(3) > 2")[1] is _IN_PROCESS
    (('solution(3)', [9, 'a']), True)
    """
    try:
        tree = ast.parse(assertion.strip(), mode="eval").body
        if isinstance(tree, ast.Compare) and len(tree.ops) == 1 and isinstance(tree.ops[0], ast.Eq):
            expected = ast.literal_eval(tree.comparators[0])
            return ast.unparse(tree.left), json.loads(json.dumps(expected))  # tuples read back as lists
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        pass
    return assertion, _IN_PROCESS


def _assert_program(code: str, checks: Sequence[tuple[str, Any]], token: str, stop_at_first_failure: bool) -> str:
    """The program's code followed by one report line per check (on a fresh line, after ``token``)."""
    marker = "'\\n' + " + repr(token)
    lines = [code, "", "import json as _json"]
    for i, (expression, expected) in enumerate(checks):
        report = f"'{i} pass'" if expected is _IN_PROCESS else f"'{i} value ' + _json.dumps({expression})"
        lines += [
            "try:",
            *([f"    assert ({expression})"] if expected is _IN_PROCESS else []),
            f"    print({marker} + ' ' + {report}, flush=True)",
            "except BaseException:",
            f"    print({marker} + ' {i} fail', flush=True)",
            *(["    raise SystemExit(1)"] if stop_at_first_failure else []),
        ]
    return "\n".join(lines) + "\n"


def _passed_checks(stdout: str, checks: Sequence[tuple[str, Any]], token: str, stop_at_first_failure: bool) -> int:
    """How many checks passed (up to the first failure, when asked), judged here: each needs exactly one
    report, and a value report must decode to the expected value (a check reported twice, e.g. by an
    ``atexit`` hook, fails)."""
    reports: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        if line.startswith(token + " "):
            index, _, report = line[len(token) + 1 :].partition(" ")
            reports.setdefault(index, []).append(report)
    passed = 0
    for i, (_, expected) in enumerate(checks):
        only = reports.get(str(i), [])
        ok = len(only) == 1 and (only[0] == "pass" if expected is _IN_PROCESS else _reports_value(only[0], expected))
        passed += ok
        if stop_at_first_failure and not ok:
            break
    return passed


def _reports_value(report: str, expected: Any) -> bool:
    kind, _, value = report.partition(" ")
    try:
        return kind == "value" and json.loads(value) == expected
    except ValueError:
        return False


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
            code = extract_code_block(completion_text(completion))
            if cases is None or not code:
                plans.append(None if cases is None else [])
                continue
            plan = []
            checks = [_expected_value(str(case["assert"]).strip().removeprefix("assert ")) for case in cases if "assert" in case]
            if checks:
                token = secrets.token_hex(16)
                plan.append(("asserts", len(programs), checks, token))
                programs.append((_assert_program(code, checks, token, self.stop_at_first_failure), ""))
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
