"""grpo-lite command line: demo | train | export-script | score."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEMO_REWARDS = ["soft_xml_format_reward", "numeric_correctness_reward"]


def _demo(args) -> int:
    from .monitor.console import StepPrinter
    from .recipe import run_recipe

    recipe = {
        "model": "tiny",
        "dataset": {"builtin": "arithmetic"},
        "rewards": DEMO_REWARDS,
        "preset": "cpu-smoke",
        "overrides": {"max_steps": args.max_steps, "seed": args.seed},
    }
    result = run_recipe(recipe, output_dir=args.output_dir, callbacks=[StepPrinter()])
    print(f"grpo-lite demo: {len(result.metrics)} steps logged; run files in {result.output_dir}")
    return 0


def _train(args) -> int:
    from .monitor.console import StepPrinter
    from .recipe import apply_settings, read_recipe, run_recipe

    recipe = apply_settings(read_recipe(args.config), args.set)
    result = run_recipe(recipe, output_dir=args.output_dir, callbacks=[StepPrinter()], resume=args.resume)
    accelerator = result.trainer.accelerator
    print(
        f"grpo-lite: rank {accelerator.process_index}/{accelerator.num_processes} trained "
        f"{result.trainer.state.global_step} steps; run files in {result.output_dir}"
    )
    return 0


def _export_script(args) -> int:
    from .launch import export_script

    out = export_script(args.config, args.out, num_gpus=args.num_gpus)
    print((out / "LAUNCH.md").read_text())
    return 0


def _score(args) -> int:
    from rewards.check import score_file

    report = score_file(args.rewards.split(","), args.data)
    from rich.console import Console

    Console().print(report)
    return 0 if report.ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grpo-lite", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="an offline GRPO run on CPU with a tiny model and built-in data")
    demo.add_argument("--output-dir", type=Path, default=Path("outputs/demo"))
    demo.add_argument("--max-steps", type=int, default=20)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(handler=_demo)

    run = commands.add_parser("train", help="train from a run YAML (model, dataset, rewards, preset, overrides)")
    run.add_argument("config", type=Path)
    run.add_argument("--output-dir", type=Path, default=None, help="overrides output_dir in the YAML")
    run.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in the output dir")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="override a GRPOConfig field (max_steps=50) or load./dataset. options (load.backend=transformers)")
    run.set_defaults(handler=_train)

    script = commands.add_parser("export-script", help="write run.yaml, accelerate configs and launch commands for more GPUs")
    script.add_argument("config", type=Path, help="a run YAML, or the output dir of a finished run")
    script.add_argument("--out", type=Path, default=Path("launch"))
    script.add_argument("--num-gpus", type=int, default=2)
    script.set_defaults(handler=_export_script)

    score = commands.add_parser("score", help="run reward functions over a JSONL of completions (the reward lab)")
    score.add_argument("--rewards", required=True, help="comma-separated reward or preset names")
    score.add_argument("--data", required=True, type=Path, help="JSONL rows with prompt, completion, answer, ...")
    score.set_defaults(handler=_score)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .config import ConfigError
    from .data import DatasetError
    from .models import BackendError

    try:
        return args.handler(args)
    except (ConfigError, DatasetError, BackendError) as error:
        print(f"grpo-lite: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
