"""grpo-lite command line: demo | train | score | plan | launch-kit."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from ..errors import RunFault, UserError


def _demo(args) -> int:
    from ..run.files import EVAL_FILE, fresh_run_dir
    from .demo import DEMO_RUNS, run_demo

    out = args.output_dir or fresh_run_dir(DEMO_RUNS)
    run_demo(out, task=args.task, max_steps=args.max_steps, seed=args.seed, heldout_n=args.heldout_n,
             heldout_samples=args.heldout_samples)
    print(f"grpo-lite demo: held-out scores in {out / EVAL_FILE}; run files in {out}")
    return 0


def _train(args) -> int:
    from ..run.settings import TIME_LIMIT_SETTINGS
    from .recipe import apply_settings, read_recipe, run_recipe

    settings = apply_settings(read_recipe(args.config), args.set)
    for setting in TIME_LIMIT_SETTINGS:
        if setting in vars(args):
            setattr(settings, setting, vars(args)[setting])
    # train() draws the live dashboard: rich in a terminal, log lines when the output is piped
    result = run_recipe(settings, output_dir=args.output_dir, resume=args.resume)
    accelerator = result.trainer.accelerator
    print(
        f"grpo-lite: rank {accelerator.process_index}/{accelerator.num_processes} trained "
        f"{result.trainer.state.global_step} steps; run files in {result.output_dir}"
    )
    return 0


def _launch_kit(args) -> int:
    from .kit import write_launch_kit

    out = write_launch_kit(args.config, args.out, num_gpus=args.num_gpus, overwrite=args.overwrite)
    print((out / "LAUNCH.md").read_text())
    return 0


def _score(args) -> int:
    import shutil

    from rich.console import Console

    from rewards import check_rewards, resolve_rewards
    from rewards.errors import RewardError

    from ..errors import NotFound

    source = args.data or args.run
    if not source.exists():
        raise NotFound(f"{'--data' if args.data else '--run'} {source}: no such file or folder")
    names = args.rewards.split(",")
    if args.data:  # the reward library alone: no transformers to import, so a file is scored in seconds
        from ..data.prepare import read_records

        funcs, weights = resolve_rewards(names)
        rows = read_records(args.data)
        try:
            report = check_rewards(funcs, rows, reward_weights=weights)
        except RewardError as error:  # the rewards were read: what the lab refuses is the rows
            raise RewardError(f"--data {args.data}: {error}") from None
    else:
        from ..data.prepare import load_rows
        from ..evaluation.rescore import rescore_run

        dataset = load_rows(args.dataset) if args.dataset else None
        report = rescore_run(args.run, names, dataset, question=args.question)
    functions = getattr(report, "functions", names)
    width = max(shutil.get_terminal_size().columns, 90 + 12 * len(functions))  # wide tables scroll, not crush
    Console(width=width).print(report)
    return 0 if report.ok else 1


def _plan(args) -> int:
    from rich.console import Console

    from ..machine.planner import plan

    gpu = float(args.gpu) if args.gpu.replace(".", "", 1).isdigit() else args.gpu
    result = plan(args.model, gpu, args.num_generations, args.max_prompt_tokens, args.max_completion_length,
                  args.lora_rank, not args.no_4bit, gpu_memory_utilization=args.gpu_memory_utilization,
                  image_tokens=args.image_tokens)
    Console().print(result)
    return 0 if result.fits else 1


def _seconds_or_none(setting: str):
    """The reader of a time-limit flag's value, checked as the run YAML's ``setting`` is."""
    from ..run.settings import ConfigError, check_time_limit

    def read(value: str) -> float | None:
        try:
            seconds = None if value.lower() == "none" else float(value)
            check_time_limit(setting, seconds)
        except (ValueError, ConfigError):
            raise argparse.ArgumentTypeError(f"{value!r}: give a positive number of seconds, or 'none' for no limit") from None
        return seconds

    return read


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusals of a flag speak as every other refusal does: a ``grpo-lite:`` line, exit 2."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(2, f"grpo-lite: {self.prog.removeprefix('grpo-lite').strip() + ': ' if self.prog != 'grpo-lite' else ''}"
                     f"{message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="grpo-lite", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (also GRPO_LITE_DEBUG=1)")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="GRPO-train the shipped demo model on CPU and show held-out accuracy before/after")
    demo.add_argument("--output-dir", type=Path, default=None, help="where the run's files go (default: a fresh "
                      "outputs/demo-<n>)")
    from .demo import DEMO_TASKS

    demo.add_argument("--task", choices=list(DEMO_TASKS), default="arithmetic", help="arithmetic word "
                      "problems, questions about drawn shapes for a vision-language model (needs torchvision), or "
                      "arithmetic word problems with a calculator to call (needs tool calling: TRL 1, transformers 5)")
    demo.add_argument("--max-steps", type=int, default=None, help="GRPO steps (default: the task's)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--heldout-n", type=int, default=200, help="held-out questions scored before and after")
    demo.add_argument("--heldout-samples", type=int, default=8, help="sampled answers per question for pass@k (1: none)")
    demo.set_defaults(handler=_demo)

    from ..run.presets import TRAINING_PRESETS
    from ..run.settings import TIME_LIMIT_SETTINGS, RunSettings, field_help

    run = commands.add_parser("train", help="train from a run YAML (model, dataset, rewards, preset, overrides)",
                              epilog=field_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("config", type=Path)
    run.add_argument("--output-dir", type=Path, default=None, help="overrides output_dir in the YAML (none there: a fresh "
                     "outputs/<model>-<n>)")
    run.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in the output dir")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help=f"change a setting (preset={next(iter(TRAINING_PRESETS))}, load.lora_rank=32, heldout.n=50, "
                     "dataset.path=x.jsonl) or a GRPOConfig field "
                     "(max_steps=50)")
    settings = {f.name: f for f in dataclasses.fields(RunSettings)}
    for setting in TIME_LIMIT_SETTINGS:  # the run YAML's setting, which the flag replaces
        run.add_argument(f"--{setting.replace('_', '-')}", type=_seconds_or_none(setting), default=argparse.SUPPRESS,
                         metavar="SECONDS", help=f"the run YAML's {setting}: {settings[setting].metadata['help']} (default "
                                                 f"{settings[setting].default:g}; on the command line 'none' for null)")
    run.set_defaults(handler=_train)

    kit = commands.add_parser("launch-kit", help="write the recipe, accelerate configs and launch commands for more GPUs")
    kit.add_argument("config", type=Path, help="a recipe YAML, or the output dir of a finished run")
    kit.add_argument("--out", type=Path, default=Path("launch"))
    kit.add_argument("--num-gpus", type=int, default=2)
    kit.add_argument("--overwrite", action="store_true", help="replace the launch kit --out holds")
    kit.set_defaults(handler=_launch_kit)

    score = commands.add_parser("score", help="run reward functions over completions: a JSONL of rows (the reward lab), "
                                "or a run's samples.jsonl (what other rewards would have taught)")
    score.add_argument("--rewards", required=True,
                       help="comma-separated reward or preset names, or module:function paths of your own")
    source = score.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", type=Path, help="JSONL rows with prompt, completion, answer, ...")
    source.add_argument("--run", type=Path, help="a run's output dir: re-score its samples.jsonl, compare advantages")
    score.add_argument("--dataset", type=Path, help="with --run: the training rows (CSV/JSONL) whose columns rewards read")
    score.add_argument("--question", default="question", help="with --dataset: the column holding the question")
    score.set_defaults(handler=_score)

    memory = commands.add_parser("plan", help="estimate peak GPU memory of a run and the nearest config that fits")
    memory.add_argument("model", help="a known model name (Qwen2.5-1.5B, Llama-3.2-1B, ...) or a local model folder")
    memory.add_argument("--gpu", default="T4", help="GPU name (T4, L4, A100, ...) or memory in GB")
    memory.add_argument("--num-generations", type=int, default=8)
    memory.add_argument("--max-prompt-tokens", type=int, default=256)
    memory.add_argument("--image-tokens", type=int, default=0,
                        help="of the prompt's tokens, those its images make (a vision-language model's processor counts them)")
    memory.add_argument("--max-completion-length", type=int, default=512)
    memory.add_argument("--lora-rank", type=int, default=16)
    memory.add_argument("--no-4bit", action="store_true", help="16-bit base weights instead of 4-bit")
    memory.add_argument("--gpu-memory-utilization", type=float, default=None, help="vLLM's share (fast_inference)")
    memory.set_defaults(handler=_plan)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run a command. What the user gave that cannot work exits 2 and a run that could not go on exits 1, each
    with its message and no traceback (``--debug`` or GRPO_LITE_DEBUG=1 shows it); grpo-lite's own bugs show theirs."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help, or a flag argparse refused (its grpo-lite: line is said): the exit code
        return done.code
    if os.getcwd() not in sys.path:  # "module:function" rewards name the user's own modules, as python -m would find them
        sys.path.insert(0, os.getcwd())
    try:
        return args.handler(args)
    except (UserError, RunFault) as error:
        if args.debug or os.environ.get("GRPO_LITE_DEBUG") == "1":
            raise
        for line in str(error).splitlines() or [type(error).__name__]:
            print(f"grpo-lite: {line}", file=sys.stderr)
        return 1 if isinstance(error, RunFault) else 2
    finally:
        _close_process_group()


def _close_process_group() -> None:
    """Close the process group a launched run opened, before the interpreter exits: gloo's worker threads outliving
    it abort the process in its teardown ("terminate called without an active exception", pytorch/pytorch#190489)."""
    if "torch" not in sys.modules:  # plan, score and launch-kit never import torch: no group to close
        return
    import torch.distributed

    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
