"""Long runs stay light: what one dashboard update, one chart and one report display cost at step 50,000.

Synthetic T4 GSM8K steps (8 completions of one prompt per step, the five gsm8k rewards, KL on; a quarter of the
steps have every completion tied, so ``no_signal`` fires again and again) are driven through the real monitor
callbacks, in training's order: InvariantChecks, SampleLog, MetricsLog, LiveDashboard (its own redraws held
off, so that each cost is measured on its own). At each checkpoint it measures, ``--repeats`` times,
interleaved: one notebook update (``frame()`` and ``frame_html``; the kernel then sends those bytes), one
terminal update (the ``frame_rich`` panel rendered by rich, as its ``Live`` view does), one chart (the figure and
its PNG, what ``dashboard.png`` holds), and once the memory the callbacks hold (a walk over their objects). Each
figure is a ratio to the same figure at the first checkpoint of the same run, paired repeat by repeat: the median
and, in brackets, the lowest and highest ratio. It also times the reward lab's report display (``str()`` and
the notebook HTML) at two row counts and ``show_run`` (with its page) at two run lengths.

    python benchmarks/long_run.py [--steps 10,1000,10000,50000] [--repeats 5] [--rows 100,10000]
                                  [--show-run 10000,50000] [--code DIR] [--write-docs]

``--code DIR`` measures another copy of the code (DIR holding ``grpo_lite/`` and ``rewards/``, e.g. the last
commit's: ``git archive HEAD grpo_lite rewards | tar -x -C DIR``); with ``--write-docs`` its table goes in a section
of its own, named by ``--label``. The last printed line is
``long_run_worst_ratios=notebook:<x>,terminal:<x>,html_bytes:<x>,chart:<x>,lab_display_s:<s>``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import shlex
import statistics
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs import machine, publish  # noqa: E402

HEADING = "## Long runs: dashboard, charts and reports (CPU)"
GENERATIONS = 8
REWARDS = ("xml_count_reward", "soft_xml_format_reward", "strict_xml_format_reward", "int_answer_reward", "numeric_correctness_reward")
TIED_SHARE = 0.25
AIMS = {"notebook": 1.5, "terminal": 1.5, "html_bytes": 1.5, "chart": 2.0}


REASONING = [" ".join(random.Random(i).choice(["First", "then", "we add", "so", "half of", "times", str(i)]) for _ in range(30))
             for i in range(64)]


def completion(rng: random.Random, value: int) -> str:
    return f"<reasoning>\n{rng.choice(REASONING)}\n</reasoning>\n<answer>\n{value}\n</answer>\n"


def spread(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    return mean, (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5


def synthetic_step(rng: random.Random, step: int, trainer) -> dict:
    """One step's logs as TRL's GRPOTrainer hands them to callbacks, and its batch in ``trainer._logs``."""
    tied = rng.random() < TIED_SHARE
    gold = rng.randint(1, 500)
    scores = {name: [0.0 if tied else rng.choice((0.0, 0.5, 1.0, 2.0)) for _ in range(GENERATIONS)] for name in REWARDS}
    mean, std = spread([sum(s[i] for s in scores.values()) for i in range(GENERATIONS)])
    totals = [sum(s[i] for s in scores.values()) for i in range(GENERATIONS)]
    advantages = [0.0 if tied or std == 0 else (t - mean) / (std + 1e-4) for t in totals]
    prompt = [{"role": "system", "content": "Respond in <reasoning> and <answer> tags."},
              {"role": "user", "content": f"Natalia sold clips to {gold} of her friends. How many clips? (question {step})"}]
    logs = trainer._logs
    for i in range(GENERATIONS):
        logs["prompt"].append(prompt)
        logs["completion"].append([{"role": "assistant", "content": completion(rng, gold if i % 2 else gold + 1)}])
        logs["advantages"].append(advantages[i])
        for name in REWARDS:
            logs["rewards"][name].append(scores[name][i])
    length = rng.uniform(150, 250)
    record = {
        "loss": rng.gauss(0.0, 0.02), "grad_norm": abs(rng.gauss(0.3, 0.1)), "learning_rate": 5e-6, "num_tokens": 2600.0 * step,
        "completions/mean_length": length, "completions/min_length": length - 60, "completions/max_length": length + 60,
        "completions/clipped_ratio": rng.choice((0.0, 0.0, 0.125)), "completions/mean_terminated_length": length,
        "completions/min_terminated_length": length - 60, "completions/max_terminated_length": length + 60,
        "reward": mean, "reward_std": std, "frac_reward_zero_std": 1.0 if tied else 0.0,
        "kl": abs(rng.gauss(0.02, 0.01)), "entropy": rng.uniform(0.3, 0.6), "clip_ratio/region_mean": 0.0,
        "clip_ratio/low_mean": 0.0, "clip_ratio/high_mean": 0.0, "epoch": step / 7473,
    }
    for name in REWARDS:
        record[f"rewards/{name}/mean"], record[f"rewards/{name}/std"] = spread(scores[name])
    return record


class Drive:
    """The callbacks of a run and a stand-in trainer feeding them synthetic steps."""

    def __init__(self, output_dir: Path, max_steps: int, seed: int = 0):
        from transformers import TrainerControl, TrainerState

        from grpo_lite.monitor.dashboard import LiveDashboard
        from grpo_lite.monitor.invariants import InvariantChecks
        from grpo_lite.monitor.metrics import MetricsLog
        from grpo_lite.monitor.samples import SampleLog

        self.rng = random.Random(seed)
        self.output_dir = output_dir
        keep = GENERATIONS  # TRL keeps one generation batch (deques of generation_batch_size)
        self.trainer = SimpleNamespace(
            _logs={"prompt": deque(maxlen=keep), "completion": deque(maxlen=keep), "advantages": deque(maxlen=keep),
                   "rewards": {name: deque(maxlen=keep) for name in REWARDS}},
            reward_weights=[1.0] * len(REWARDS), reward_func_names=list(REWARDS))
        self.invariants = InvariantChecks(self.trainer)
        self.metrics = MetricsLog(output_dir)
        self.samples = SampleLog(output_dir, trainer=self.trainer)
        # view "log", redraws held off: each cost is measured on its own at the checkpoints
        self.dashboard = LiveDashboard(output_dir, trainer=self.trainer, view="log", min_interval=float("inf"), stop_button=False)
        self.callbacks = [self.invariants, self.samples, self.metrics, self.dashboard]
        self.trainer.callback_handler = SimpleNamespace(callbacks=self.callbacks)
        self.args = SimpleNamespace(output_dir=str(output_dir), beta=0.04, num_generations=GENERATIONS, mask_truncated_completions=False)
        self.state = TrainerState(max_steps=max_steps, is_world_process_zero=True, is_local_process_zero=True)
        self.control = TrainerControl()
        model = SimpleNamespace(config=SimpleNamespace(_name_or_path="unsloth/Qwen2.5-1.5B-Instruct-bnb-4bit"))
        for callback in self.callbacks:
            callback.on_train_begin(self.args, self.state, self.control, model=model)

    def run_to(self, step: int) -> None:
        while self.state.global_step < step:
            self.state.global_step += 1
            logs = synthetic_step(self.rng, self.state.global_step, self.trainer)
            for callback in self.callbacks:
                callback.on_log(self.args, self.state, self.control, logs=logs)
            self.dashboard.on_step_end(self.args, self.state, self.control)

    def chart_source(self):
        """What the charts are drawn from: the dashboard's incremental series, or (older code) its history."""
        return getattr(self.dashboard, "chart", None) or self.dashboard.history


def timed(function, *args) -> tuple[float, object]:
    start = time.perf_counter()
    value = function(*args)
    return time.perf_counter() - start, value


SKIPPED_ATTRIBUTES = {"trainer", "view", "stop"}


def held_bytes(*roots) -> int:
    """The memory the callbacks hold: ``sys.getsizeof`` over every object reachable from them (the trainer, the
    view and the stop switch left out), each object counted once."""
    seen: set[int] = set()
    total = 0
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, type(sys), type(held_bytes))):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack += list(obj.keys()) + list(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset, deque)):
            stack += list(obj)
        elif hasattr(obj, "__dict__"):
            stack += [v for k, v in vars(obj).items() if k not in SKIPPED_ATTRIBUTES]
        elif hasattr(obj, "__slots__"):
            stack += [getattr(obj, name) for name in obj.__slots__ if hasattr(obj, name)]
    return total


def measure_checkpoint(drive: Drive, repeats: int) -> dict[str, list[float]]:
    from rich.console import Console

    from grpo_lite.monitor.figure import dashboard_figure, figure_png
    from grpo_lite.monitor.views import frame_html, frame_rich

    found: dict[str, list[float]] = {key: [] for key in ("notebook", "terminal", "chart", "html_bytes", "html_bytes_no_chart", "png_bytes")}
    drive.dashboard.draw(drive.state, chart=True)  # the frame carries the latest chart, as in training
    for _ in range(repeats):
        seconds, html = timed(lambda: frame_html(drive.dashboard.frame(drive.state)))
        found["notebook"].append(seconds)
        found["html_bytes"].append(len(html.encode()))
        console = Console(file=io.StringIO(), width=160, force_terminal=True, color_system="truecolor")
        found["terminal"].append(timed(lambda out: out.print(frame_rich(drive.dashboard.frame(drive.state))), console)[0])
        seconds, png = timed(lambda: figure_png(dashboard_figure(drive.chart_source())))
        found["chart"].append(seconds)
        found["png_bytes"].append(len(png))
    frame = drive.dashboard.frame(drive.state)
    frame.png = None
    found["html_bytes_no_chart"] = [len(frame_html(frame).encode())] * repeats
    held = held_bytes(*drive.callbacks)
    found["held_kb"] = [held / 1024] * repeats
    found["held_per_step"] = [held / drive.state.global_step] * repeats
    return found


def measure_show_run(output_dir: Path, repeats: int) -> dict[str, list[float]]:
    from grpo_lite.monitor.show import show_run
    from grpo_lite.monitor.views import frame_html

    found = {"show_run": [], "page_bytes": []}
    for _ in range(repeats):
        with contextlib.redirect_stderr(io.StringIO()):  # the log view's one line
            seconds, page = timed(lambda: frame_html(show_run(output_dir, view="log").frame()))
        found["show_run"].append(seconds)
        found["page_bytes"].append(len(page.encode()))
    return found


def lab_rows(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        if i % GENERATIONS == 0:
            gold = rng.randint(1, 500)
            tied = rng.random() < TIED_SHARE
        value = gold if tied or rng.random() < 0.5 else gold + rng.randint(1, 9)
        text = completion(rng, value) if tied or rng.random() < 0.75 else f"{rng.choice(REASONING)} so {value}"  # some unformatted
        rows.append({"prompt": f"How many clips did Natalia sell? (question {i // GENERATIONS})", "completion": text,
                     "answer": str(gold)})
    return rows


def measure_lab(n: int, repeats: int) -> dict[str, list[float]]:
    from rewards import check_rewards

    check_rewards("gsm8k", lab_rows(GENERATIONS))  # imports and caches, outside the timing
    lab_seconds, report = timed(check_rewards, "gsm8k", lab_rows(n))
    found = {"lab": [lab_seconds], "text": [], "html": [], "text_bytes": [], "html_bytes": []}
    for _ in range(repeats):
        seconds, text = timed(lambda: str(report))
        found["text"].append(seconds)
        found["text_bytes"].append(len(text.encode()))
        seconds, page = timed(report._repr_html_)
        found["html"].append(seconds)
        found["html_bytes"].append(len(page.encode()))
    return found


def ratios(values: list[float], baseline: list[float]) -> tuple[float, float, float]:
    """Median, lowest and highest ratio of ``values`` to ``baseline``, paired repeat by repeat."""
    paired = [v / b for v, b in zip(values, baseline)]
    return statistics.median(paired), min(paired), max(paired)


def cell(values: list[float], baseline: list[float], unit: str) -> str:
    value = statistics.median(values)
    shown = {"ms": f"{value * 1000:,.1f} ms", "s": f"{value:,.2f} s", "KB": f"{value / 1024:,.1f} KB", "kb": f"{value:,.0f} KB",
             "B": f"{value:,.0f} B"}[unit]
    if values is baseline:
        return shown
    middle, low, high = ratios(values, baseline)
    spread = "" if f"{low:.2f}" == f"{high:.2f}" else f" [{low:.2f}-{high:.2f}]"
    return f"{shown} ({middle:.2f}x{spread})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="10,1000,10000,50000", help="checkpoints, the first is the baseline")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rows", default="100,10000", help="reward lab row counts, the first is the baseline")
    parser.add_argument("--show-run", default="10000,50000", help="run lengths for show_run, the first is the baseline")
    parser.add_argument("--code", type=Path, help="measure the grpo_lite/ and rewards/ in this folder instead")
    parser.add_argument("--label", default="", help="a note on the code measured, for the doc")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)
    checkpoints = [int(s) for s in args.steps.split(",")]
    row_counts = [int(s) for s in args.rows.split(",")]
    show_at = [int(s) for s in args.show_run.split(",")] if args.show_run else []
    if args.code:
        sys.path.insert(0, str(args.code.resolve()))
    import logging

    import grpo_lite
    import grpo_lite.log  # noqa: F401  (it sets the level when first imported)

    logging.getLogger("grpo_lite").setLevel(logging.ERROR)  # each warning's log line: the same in every version, not measured
    code = Path(grpo_lite.__file__).resolve().parent.parent
    print(f"measuring the code in {code}", file=sys.stderr)

    started = time.perf_counter()
    by_step: dict[int, dict[str, list[float]]] = {}
    shown_runs: dict[int, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="grpo-lite-long-run-") as tmp:
        drive = Drive(Path(tmp) / "run", max_steps=max(checkpoints + show_at))
        drive_seconds = 0.0
        for step in sorted(set(checkpoints + show_at)):
            drive_seconds += timed(drive.run_to, step)[0]
            if step in checkpoints:
                by_step[step] = measure_checkpoint(drive, args.repeats)
            if step in show_at:
                shown_runs[step] = measure_show_run(drive.output_dir, max(args.repeats // 2, 1))
            print(f"step {step}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    labs = {n: measure_lab(n, max(args.repeats // 2, 1)) for n in row_counts}

    first = by_step[checkpoints[0]]
    rows = [
        ("notebook update: `frame()` + `frame_html`", "notebook", "ms"),
        ("notebook update: HTML bytes sent (chart PNG included)", "html_bytes", "KB"),
        ("notebook update: HTML bytes without the chart", "html_bytes_no_chart", "KB"),
        ("terminal update: `frame_rich` rendered by rich", "terminal", "ms"),
        ("chart: figure + PNG (`dashboard.png`)", "chart", "ms"),
        ("chart: PNG bytes", "png_bytes", "KB"),
        ("memory the callbacks hold", "held_kb", "kb"),
        ("memory held per step", "held_per_step", "B"),
    ]
    command = shlex.join(["python", "benchmarks/long_run.py", *(argv if argv is not None else sys.argv[1:])])
    heading = f"{HEADING}, {args.label or 'other code'}" if args.code else HEADING  # a section of its own
    lines = [
        heading,
        "",
        f"`{command}` on {machine()}." + (f" Code measured: {args.label}." if args.label else ""),
        f"Synthetic T4 GSM8K steps ({GENERATIONS} completions of one prompt, the five gsm8k rewards, KL on, "
        f"{TIED_SHARE:.0%} of steps with every completion tied, so `no_signal` fires again and again) driven through the real "
        "InvariantChecks, MetricsLog, SampleLog and LiveDashboard; at each step count each figure is measured "
        f"{args.repeats} times, interleaved. Cells: the median, then its ratio to step {checkpoints[0]:,} (median ratio "
        "paired repeat by repeat, [lowest-highest]).",
        "",
        "| measure | " + " | ".join(f"step {s:,}" for s in checkpoints) + " |",
        "|---|" + "---:|" * len(checkpoints),
    ]
    for label, key, unit in rows:
        lines.append(f"| {label} | " + " | ".join(cell(by_step[s][key], first[key], unit) for s in checkpoints) + " |")
    lines += [
        "",
        f"Driving the {max(checkpoints + show_at):,} steps through the four callbacks took {drive_seconds:.1f} s "
        f"({drive_seconds / max(checkpoints + show_at) * 1e6:.0f} us per step, chart and frame redraws left out).",
        "",
        "| reward lab (`check_rewards(\"gsm8k\", rows)`) | " + " | ".join(f"{n:,} rows" for n in row_counts) + " |",
        "|---|" + "---:|" * len(row_counts),
    ]
    base = labs[row_counts[0]]
    for label, key, unit in [("the lab itself (once)", "lab", "s"), ("`str(report)`", "text", "s"),
                             ("`report._repr_html_()`", "html", "s"), ("text bytes", "text_bytes", "KB"),
                             ("HTML bytes", "html_bytes", "KB")]:
        lines.append(f"| {label} | " + " | ".join(
            cell(labs[n][key], base[key], unit) if key != "lab" else cell(labs[n][key], labs[n][key], unit) for n in row_counts) + " |")
    if show_at:
        base = shown_runs[show_at[0]]
        lines += [
            "",
            "| `show_run` (it reads metrics.jsonl and replays the health rules: its time grows with the run, its page should not) | "
            + " | ".join(f"{n:,} steps" for n in show_at) + " |",
            "|---|" + "---:|" * len(show_at),
            "| time | " + " | ".join(cell(shown_runs[n]["show_run"], base["show_run"], "s") for n in show_at) + " |",
            "| page bytes | " + " | ".join(cell(shown_runs[n]["page_bytes"], base["page_bytes"], "KB") for n in show_at) + " |",
        ]
    last = by_step[checkpoints[-1]]
    worst = {key: ratios(last[key], first[key])[0] for key in ("notebook", "terminal", "html_bytes", "chart")}
    display = max(statistics.median(labs[row_counts[-1]]["text"]), statistics.median(labs[row_counts[-1]]["html"]))
    verdicts = ", ".join(f"{key} {value:.2f}x (aim <= {AIMS[key]}x)" for key, value in worst.items())
    lines += ["", f"At step {checkpoints[-1]:,} against step {checkpoints[0]:,}: {verdicts}; a {row_counts[-1]:,}-row lab report "
              f"displays in {display:.2f} s (aim < 0.5 s). Whole benchmark: {time.perf_counter() - started:.0f} s."]
    publish(lines, args.write_docs)
    print("long_run_worst_ratios=" + ",".join(f"{k}:{v:.3f}" for k, v in worst.items()) + f",lab_display_s:{display:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
