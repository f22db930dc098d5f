"""Code rewards: is there a code block, does it compile, and does it pass the row's own tests?

``code_execution_reward`` reads each row's ``test_cases`` column (one entry per completion, a list or its
JSON text) in two forms:

- ``{"input": "3\\n", "output": "9"}``: the program reads stdin; every output line must match (trailing
  whitespace and trailing blank lines ignored);
- ``{"assert": "solution(3) == 9"}``: the expression is checked after the program's code runs.

Programs run in :mod:`rewards.sandbox`. A stdin test is judged here, in the trainer's process: the expected
output never enters the sandbox, so printing what the grader wants to see or exiting early earns nothing. An
assert test is judged by :mod:`rewards.grading` in a sandbox of its own, beside the program's: the check runs
there, as Python, and takes from the program only plain data (exact ``int``, ``float``, ``str``, ``list``,
``dict``...) over a pipe, so nothing the program does in its own process (replacing a builtin, an object that
equals anything, walking frames, forging output) reaches the verdict. A check's builtins and a few standard
modules (``math``, ``re``, ``collections``...: ``rewards.grading.GRADER_MODULES``) are the grader's; every other
name in it is the program's. Code is read after the reasoning: a code block inside ``<think>`` is not the answer.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from . import grading
from .combine import Combined
from .correctness import CORRECT
from .extract import completion_text, extract_code_block, strip_reasoning
from .grading import verdicts
from .sandbox import Connected, Program, run_async, run_batch

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


def compiles(code: str | None) -> bool:
    """Whether there is code, at most MAX_CODE_CHARS of it, and it compiles (nothing is run)."""
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
    return [0.2 if compiles(extract_code_block(strip_reasoning(completion_text(c)))) else 0.0 for c in completions]


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

    runs_code = True  # train() and the reward lab make sure the sandbox can run it before they start

    def _plan(self, completions, test_cases) -> tuple[list[list[tuple] | None], list[Program | Connected]]:
        """Per completion, the sandbox jobs to run and how to grade each; ``None`` rows have no tests."""
        if test_cases is None:
            test_cases = [None] * len(completions)
        if len(test_cases) != len(completions):
            raise ValueError(f"test_cases has {len(test_cases)} entries for {len(completions)} completions")
        plans: list[list[tuple] | None] = []
        jobs: list[Program | Connected] = []
        for completion, cases in zip(completions, test_cases):
            cases = parse_test_cases(cases)
            code = extract_code_block(strip_reasoning(completion_text(completion)))
            if cases is None or not code:
                plans.append(None if cases is None else [])
                continue
            plan = []
            checks = [str(case["assert"]) for case in cases if "assert" in case]
            if checks:
                plan.append(("asserts", len(jobs), len(checks)))
                jobs.append(_graded(code, checks, self.stop_at_first_failure))
            for case in cases:
                if "output" in case:
                    plan.append(("io", len(jobs), case["output"]))
                    jobs.append(Program(code, str(case.get("input", ""))))
            plans.append(plan)
        return plans, jobs

    def _grade(self, plan, results) -> float | None:
        if plan is None:
            return None
        passed = total = 0
        for kind, job, expected in plan:
            if kind == "asserts":
                _, grader = results[job]
                held = verdicts(grader.stdout, expected)
                if self.stop_at_first_failure and not all(held):
                    held = held[: held.index(False) + 1]
                passed += sum(held)
                total += expected
            else:
                result = results[job]
                passed += result.killed_reason is None and _lines(result.stdout) == _lines(expected)
                total += 1
            if self.stop_at_first_failure and passed < total:
                break
        if total == 0:
            return 0.0
        return round(CORRECT * passed / total, 6) if self.partial_credit else CORRECT * (passed == total)

    def __call__(self, prompts=None, completions=(), test_cases=None, **kwargs) -> list[float | None]:
        plans, jobs = self._plan(completions, test_cases)
        results = run_batch(jobs, **self.limits) if jobs else []
        return [self._grade(plan, results) for plan in plans]


@functools.cache
def _grading_source() -> str:
    return Path(grading.__file__).read_text()


def _graded(code: str, checks: list[str], stop_at_first_failure: bool) -> Connected:
    """The program in one sandbox serving its values, the checks in another judging them (rewards.grading): the checks
    in a file of the grader's sandbox, which the program's cannot read."""
    program = Program(_grading_source(), files={"solution.py": code, grading.INPUTS_FILE: json.dumps({"role": "serve"})})
    asked = {"role": "grade", "checks": checks, "stop_at_first_failure": stop_at_first_failure}
    return Connected(program, Program(_grading_source(), files={grading.INPUTS_FILE: json.dumps(asked)}))


class AsyncCodeExecutionReward(CodeExecutionReward):
    """:class:`CodeExecutionReward` as an ``async`` function: GRPOTrainer awaits it alongside the other
    async rewards instead of waiting for the programs before starting them."""

    async def __call__(self, prompts=None, completions=(), test_cases=None, **kwargs) -> list[float | None]:
        import asyncio

        plans, jobs = self._plan(completions, test_cases)
        results = await asyncio.gather(*(run_async(job, **self.limits) for job in jobs))
        return [self._grade(plan, results) for plan in plans]


code_execution_reward = CodeExecutionReward()

code_generation_reward = Combined(code_block_format_reward, code_execution_reward, no_syntax_error_reward, name="code_generation_reward")
"""Code block (0.5) + tests passed (2.0) + compiles (0.2): 2.7 at most."""

CODE_GENERATION_REWARDS = [code_block_format_reward, code_execution_reward, no_syntax_error_reward]
