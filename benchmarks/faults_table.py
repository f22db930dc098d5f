"""The table of injected faults: run tests/test_faults.py and publish the table its summary prints.

    python benchmarks/faults_table.py [--write-docs] [-k EXPRESSION]

Each row comes from a test that injects one fault into a real run of the tiny model through
grpo_lite.train, checks the error the run ends with, resumes from the checkpoint it kept, and measures
what was lost. The tests fail if a fault is not survived, so a published table is a passing one.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs import machine, publish  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-docs", action="store_true", help="write the section into docs/benchmarks.md")
    parser.add_argument("-k", default=None, help="only the fault tests matching this pytest expression")
    args = parser.parse_args(argv)

    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_faults.py",
               *(["-k", args.k] if args.k else [])]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    lines = run.stdout.splitlines()
    if run.returncode != 0 or "injected faults (tests/test_faults.py):" not in lines:
        print(run.stdout[-5000:], run.stderr[-3000:], sep="\n", file=sys.stderr)
        return 1
    table = [line for line in lines[lines.index("injected faults (tests/test_faults.py):") + 1:] if line.startswith("|")]
    shown = " ".join(["python benchmarks/faults_table.py", *(["-k", repr(args.k)] if args.k else []), "--write-docs"])
    publish([
        "## Fault injection",
        "",
        f"`{shown}` on {machine()}.",
        "Each fault is injected into a real run of the tiny model through `grpo_lite.train` (tests/test_faults.py); "
        "\"survived\" means the run ended with the grpo-lite error naming the fix, its last whole checkpoint loaded "
        "and resumed, and metrics.jsonl then held every step once. Out of GPU memory is raised by hand where CUDA "
        "would raise it (a CPU machine has no GPU to fill). What each fault does and what to change: docs/faults.md.",
        "",
        *table,
    ], args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
