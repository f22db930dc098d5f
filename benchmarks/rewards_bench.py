"""Reward throughput: completions scored per second by each library reward, on a fixed synthetic set.

Also times ``math_equivalence_reward`` against TRL's ``trl.rewards.accuracy_reward`` (both math-verify)
on the same completions and golds, as a ratio. Golds repeat G times per prompt, as in GRPO batches.

    python benchmarks/rewards_bench.py [--n 4096] [--write-docs]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs import machine, publish  # noqa: E402

NUM_GENERATIONS = 8
SKIPPED = {"code_execution_reward", "code_generation_reward"}  # run programs; measured by sandbox_bench.py


def synthetic_rows(n: int, seed: int = 0) -> dict[str, list]:
    """GSM8K-shaped completions (right, wrong, unformatted, boxed, chatty) with their golds."""
    rng = random.Random(seed)
    completions, answers, ids = [], [], []
    gold = 0
    for i in range(n):
        if i % NUM_GENERATIONS == 0:  # a new prompt: its group of completions shares one gold
            gold = rng.randint(1, 5_000)
        value = gold if rng.random() < 0.5 else gold + rng.randint(1, 9)
        reasoning = " ".join(rng.choice(["First,", "then", "we add", "because", "so", "therefore", str(value)]) for _ in range(40))
        shape = rng.randrange(4)
        text = (
            f"<reasoning>\n{reasoning}\n</reasoning>\n<answer>\n{value:,}\n</answer>" if shape == 0
            else f"{reasoning} The answer is \\boxed{{{value}}}." if shape == 1
            else f"<reasoning>{reasoning}</reasoning><answer>{value}</answer> trailing" if shape == 2
            else reasoning
        )
        completions.append(text)
        answers.append(f"{gold:,}" if i % 3 else f"#### {gold}")
        ids.append(list(range(len(text) // 4)))
    return {"completions": completions, "answer": answers, "completion_ids": ids}


def throughput(func, rows: dict[str, list], batch: int = 64, passes: int = 3) -> float:
    """Completions per second, scoring in trainer-sized batches; best of ``passes`` passes."""
    n = len(rows["completions"])
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        for i in range(0, n, batch):
            func(prompts=None, **{k: v[i : i + batch] for k, v in rows.items()})
        best = min(best, time.perf_counter() - start)
    return n / best


def trl_accuracy(prompts=None, completions=(), answer=(), **kwargs):
    """TRL's math-verify reward on the same inputs (it wants chat completions and a ``solution``)."""
    from trl.rewards import accuracy_reward

    chat = [[{"role": "assistant", "content": c}] for c in completions]
    return accuracy_reward(chat, [a.split("####")[-1].strip() for a in answer])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096, help="completions in the synthetic set")
    parser.add_argument("--math-n", type=int, default=512, help="completions for the two math-verify rewards")
    parser.add_argument("--write-docs", action="store_true", help="write the table into docs/benchmarks.md")
    args = parser.parse_args(argv)

    from rewards.correctness import MathEquivalence
    from rewards.registry import REWARDS

    rows = synthetic_rows(args.n)
    math_rows = {k: v[: args.math_n] for k, v in rows.items()}
    results = []
    for name, func in sorted(REWARDS.items()):
        if name in SKIPPED or name == "math_equivalence_reward":
            continue
        results.append((name, throughput(func, rows)))
    warmup = {k: v[:8] for k, v in synthetic_rows(8, seed=1).items()}  # imports and sympy caches, for both
    for func in (MathEquivalence(), trl_accuracy):
        func(prompts=None, **warmup)
    ours = throughput(MathEquivalence(), math_rows, passes=1)  # a fresh instance: its gold cache starts cold
    theirs = throughput(trl_accuracy, math_rows, passes=1)

    lines = [
        "## Reward throughput",
        "",
        f"`python benchmarks/rewards_bench.py --write-docs` on {machine()}.",
        f"{args.n} synthetic GSM8K-shaped completions (math-verify rewards: {args.math_n}), batches of 64, "
        f"golds repeated per group of {NUM_GENERATIONS}; best of 3 passes (math-verify rewards: one cold pass).",
        "",
        "| reward | completions/s |",
        "|---|---:|",
        *[f"| `{name}` | {rate:,.0f} |" for name, rate in sorted(results, key=lambda r: -r[1])],
        f"| `math_equivalence_reward` | {ours:,.0f} |",
        f"| `trl.rewards.accuracy_reward` (baseline) | {theirs:,.0f} |",
        "",
        f"math_equivalence_reward / TRL accuracy_reward throughput ratio: **{ours / theirs:.2f}x** "
        "(parsed golds are cached; each gold repeats once per generation).",
        "Slowest format/length/style (regex) reward: "
        + "{1:,.0f} completions/s (`{0}`; aim >= 100,000).".format(*min(
            ((n, r) for n, r in results if REWARDS[n].__module__.split(".")[-1] in ("format", "length", "style")), key=lambda x: x[1]
        )),
    ]
    publish(lines, args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
