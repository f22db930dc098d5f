"""Toolkit overhead: the same tiny-model GRPO run through ``grpo_lite.train`` and through a bare
``trl.GRPOTrainer`` script, step times compared.

Both runs use the same model weights, seed, GRPOConfig, dataset and library rewards. The grpo_lite run
adds what a user gets by default: guarded rewards, metrics.jsonl, run.yaml, the live dashboard, samples
and invariant checks. Runs are interleaved (A B B A ...) so machine noise hits both alike; the ratio is
the median grpo_lite step time over the median bare-TRL step time, each step timed end to end (callbacks
included; first step of each run excluded).

    python benchmarks/overhead.py [--repeats 3] [--steps 12] [--write-docs]

The last printed line is ``overhead_ratio=<float>``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from transformers import TrainerCallback

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs import machine, publish  # noqa: E402

REWARDS = ["soft_xml_format_reward", "numeric_correctness_reward", "ngram_repetition_penalty"]


def settings(steps: int) -> dict:
    return dict(max_steps=steps, num_generations=4, per_device_train_batch_size=8, max_completion_length=32,
                save_strategy="no", seed=0, logging_steps=1)


def dataset():
    from grpo_lite import prepare_dataset
    from grpo_lite.data import arithmetic_problems

    return prepare_dataset(arithmetic_problems(64, seed=0), system_prompt=None)


class StepClock(TrainerCallback):
    """Wall time between consecutive step ends: it includes every callback's logging and drawing."""

    def __init__(self):
        self.marks: list[float] = []

    def on_step_end(self, args, state, control, **kwargs):
        self.marks.append(time.perf_counter())

    @property
    def step_times(self) -> list[float]:
        return [b - a for a, b in zip(self.marks, self.marks[1:])]  # the first step (warm-up) has no start mark


def run_grpo_lite(model_dir: Path, steps: int, out: Path) -> list[float]:
    from grpo_lite import load_model, train

    model, tokenizer = load_model(str(model_dir), lora_rank=8)
    clock = StepClock()
    train(model, tokenizer, dataset(), REWARDS, preset="cpu-smoke", output_dir=out, callbacks=[clock], **settings(steps))
    return clock.step_times


def run_bare_trl(model_dir: Path, steps: int, out: Path) -> list[float]:
    from grpo_lite import load_model
    from grpo_lite.config import make_config
    from grpo_lite.trl_compat import enable_cpu_logprobs
    from rewards import resolve

    enable_cpu_logprobs()
    from trl import GRPOTrainer

    model, tokenizer = load_model(str(model_dir), lora_rank=8)
    config = make_config("cpu-smoke", output_dir=out, **settings(steps))  # the same trl.GRPOConfig both runs use
    funcs = [f for name in REWARDS for f in resolve(name)]
    clock = StepClock()
    trainer = GRPOTrainer(model=model, reward_funcs=funcs, args=config, train_dataset=dataset(), processing_class=tokenizer,
                          callbacks=[clock])
    trainer.train()
    return clock.step_times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)

    from grpo_lite.tiny import build_tiny_model

    times: dict[str, list[float]] = {"trl": [], "grpo_lite": []}
    runners = {"trl": run_bare_trl, "grpo_lite": run_grpo_lite}
    with tempfile.TemporaryDirectory(prefix="grpo-lite-overhead-") as tmp:
        work = Path(tmp)
        model_dir = build_tiny_model(work / "model", seed=0)
        for repeat in range(args.repeats):
            order = ["trl", "grpo_lite"] if repeat % 2 == 0 else ["grpo_lite", "trl"]
            for name in order:
                times[name] += runners[name](model_dir, args.steps, work / f"{name}-{repeat}")
    trl_median, ours_median = statistics.median(times["trl"]), statistics.median(times["grpo_lite"])
    ratio = ours_median / trl_median
    lines = [
        "## Toolkit overhead (CPU)",
        "",
        f"`python benchmarks/overhead.py --repeats {args.repeats} --steps {args.steps} --write-docs` on {machine()}.",
        f"Tiny Qwen2 model, LoRA r=8, {args.steps} steps x {args.repeats} interleaved repeats, 8 completions of 32 tokens "
        f"per step, rewards {', '.join(REWARDS)}.",
        "",
        "| run | median step time (s) | steps timed |",
        "|---|---:|---:|",
        f"| bare `trl.GRPOTrainer` (baseline) | {trl_median:.4f} | {len(times['trl'])} |",
        f"| `grpo_lite.train` (dashboard, guarded rewards, metrics, samples, invariants) | {ours_median:.4f} | {len(times['grpo_lite'])} |",
        "",
        f"Overhead ratio (grpo_lite / TRL): **{ratio:.3f}** (aim: <= 1.03).",
    ]
    publish(lines, args.write_docs)
    print(f"overhead_ratio={ratio:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
