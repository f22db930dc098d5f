"""Run every benchmark and write its section of docs/benchmarks.md.

    python benchmarks/run_all.py [--only rewards,sandbox] [--no-docs]

CPU benchmarks run everywhere; the GPU comparison runs only where CUDA is available (on CPU it is skipped
with the reason printed). The learning demo is measured with ``grpo-lite demo`` (see docs/benchmarks.md).
Each script runs in its own process, so one failure does not hide the others; the exit status is non-zero
if any failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

BENCHMARKS = {
    "rewards": ["rewards_bench.py"],
    "sandbox": ["sandbox_bench.py"],
    "dashboard": ["dashboard_overhead.py"],
    "long_run": ["long_run.py"],
    "overhead": ["overhead.py"],
    "plan": ["plan_vs_measured.py"],
    "plan_gpu_path": ["plan_vs_allocated.py"],
    "gpu": ["gpu_compare.py"],
    "faults": ["faults_table.py"],
}


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(BENCHMARKS), help=f"comma-separated subset of {list(BENCHMARKS)}")
    parser.add_argument("--no-docs", action="store_true", help="print results without writing docs/benchmarks.md")
    args = parser.parse_args(argv)

    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmarks {unknown}; choose from {list(BENCHMARKS)}")
    failed = []
    for name in chosen:
        script, *options = BENCHMARKS[name]
        if name == "gpu" and not cuda_available():
            print(f"== {name}: skipped (no CUDA GPU on this machine; run it on a GPU machine)")
            continue
        if not (HERE / script).exists():
            print(f"== {name}: {script} is missing")
            failed.append(name)
            continue
        command = [sys.executable, str(HERE / script), *options, *([] if args.no_docs else ["--write-docs"])]
        print(f"== {name}: {' '.join(command[1:])}", flush=True)
        start = time.perf_counter()
        code = subprocess.call(command)
        print(f"== {name}: exit {code} after {time.perf_counter() - start:.0f} s", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
