"""Sandbox throughput on this machine: programs per second with full isolation vs a plain subprocess.

    python benchmarks/sandbox_bench.py [--n 80] [--write-docs]

Both sides run the same programs with the same interpreter, as many at once as there are CPU cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs import machine, publish  # noqa: E402

TRIVIAL = "print('ok')"
SOLUTION = "```python\ndef solution(x):\n    return sorted(x)[len(x) // 2]\n```"
ASSERTS = [{"assert": f"solution({list(range(i, i + 5))}) == {i + 2}"} for i in range(5)]
STDIN_SOLUTION = "```python\nxs = sorted(map(int, input().split()))\nprint(xs[len(xs) // 2])\n```"
STDIN_TESTS = [{"input": " ".join(map(str, range(i, i + 5))), "output": str(i + 2)} for i in range(5)]
TRAINER_MIB = 2048  # the sandbox is launched from the training process, which holds the model


def rate(run, n: int, repeats: int = 3) -> float:
    """The best of ``repeats`` rates: the cores are shared, and other load only ever slows a run down."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run(n)
        best = min(best, time.perf_counter() - start)
    return n / best


def plain_subprocess(n: int) -> None:
    from rewards.sandbox import sandbox_python

    python = sandbox_python()
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        list(pool.map(lambda _: subprocess.run([python, "-I", "-c", TRIVIAL], capture_output=True, timeout=10), range(n)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=80, help="programs per measurement")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)

    from rewards.code import CodeExecutionReward
    from rewards.sandbox import isolation, run_batch

    level = isolation()
    load = os.getloadavg()[0]  # the cores may be shared: read the rates against this
    grade = CodeExecutionReward()
    run_batch([TRIVIAL] * 4)  # warm-up: interpreter pages in the file cache
    plain = rate(plain_subprocess, args.n)
    sandboxed = rate(lambda n: run_batch([TRIVIAL] * n), args.n)
    asserts = rate(lambda n: grade(completions=[SOLUTION] * n, test_cases=[ASSERTS] * n), args.n)
    stdin = rate(lambda n: grade(completions=[STDIN_SOLUTION] * n, test_cases=[STDIN_TESTS] * n), args.n // 5 or 1)
    trainer_memory = bytearray(TRAINER_MIB * 2**20)
    trainer_memory[:: 2**12] = b"x" * len(trainer_memory[:: 2**12])  # touch every page, as a loaded model does
    from_trainer = rate(lambda n: run_batch([TRIVIAL] * n), args.n)
    del trainer_memory

    lines = [
        "## Sandbox",
        "",
        f"`python benchmarks/sandbox_bench.py --n {args.n} --write-docs` on {machine()}; isolation: {level}.",
        f"{os.cpu_count()} programs at a time; {args.n} programs per row, best of 3; load average {load:.1f} when it started.",
        "",
        "| what | per second |",
        "|---|---:|",
        f"| trivial program, plain subprocess (baseline) | {plain:.1f} programs |",
        f"| trivial program, sandboxed | {sandboxed:.1f} programs |",
        f"| 5-assert solution graded by `code_execution_reward` (the program and its grader, 2 sandboxes) | {asserts:.1f} solutions |",
        f"| 5-test stdin/stdout solution graded (5 programs) | {stdin:.1f} solutions |",
        f"| trivial program, sandboxed, from a process holding {TRAINER_MIB} MiB (a trainer) | {from_trainer:.1f} programs |",
        "",
        f"Sandboxed / plain throughput ratio: **{sandboxed / plain:.2f}** (aim: >= 40 trivial programs/s sandboxed).",
    ]
    publish(lines, args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
