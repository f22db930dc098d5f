"""Dashboard overhead: the same tiny-model ``grpo_lite.train`` run with and without the live dashboard.

Three interleaved variants share model weights, seed, config, data and rewards: no dashboard (baseline),
the default dashboard (redraws throttled to 2% of training time), and a dashboard redrawing at every step
(what the throttle saves). Each step is timed end to end, so every redraw (chart PNG, frame, dashboard.png)
falls inside a timed step; the ratio is the mean step time over the baseline's mean step time. Means, not
medians: a throttled redraw lands in few steps and a median would hide it.

    python benchmarks/dashboard_overhead.py [--repeats 2] [--steps 40] [--write-docs]

The last printed line is ``dashboard_overhead_ratio=<float>`` (default dashboard / none).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from overhead import REWARDS, StepClock, dataset, settings  # noqa: E402

from docs import machine, publish  # noqa: E402

HEADING = "## Dashboard overhead (CPU)"
VARIANTS = {
    "none": "no dashboard (baseline)",
    "throttled": "`LiveDashboard()` defaults: max_overhead=0.02, min_interval=1 s",
    "every_step": "`LiveDashboard(max_overhead=1.0, min_interval=0)`: a redraw at (nearly) every step",
}


def run(model_dir: Path, variant: str, steps: int, out: Path) -> tuple[list[float], int, float]:
    """Step times, redraw count and seconds spent drawing for one training run."""
    from grpo_lite import LiveDashboard, load_model, train

    model, tokenizer = load_model(str(model_dir), lora_rank=8)
    clock = StepClock()
    options = {"throttled": {}, "every_step": {"max_overhead": 1.0, "min_interval": 0.0}}
    dashboard = LiveDashboard(view="log", **options[variant]) if variant in options else False
    train(model, tokenizer, dataset(), REWARDS, preset="cpu-smoke", output_dir=out, callbacks=[clock], dashboard=dashboard,
          **settings(steps))
    return clock.step_times, (dashboard.redraws if dashboard else 0), (dashboard.draw_seconds if dashboard else 0.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)

    from grpo_lite.model.tiny import build_tiny_model

    times = {name: [] for name in VARIANTS}
    redraws = {name: 0 for name in VARIANTS}
    drawing = {name: 0.0 for name in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="grpo-lite-dashboard-") as tmp:
        work = Path(tmp)
        model_dir = build_tiny_model(work / "model", seed=0)
        for repeat in range(args.repeats):
            order = list(VARIANTS) if repeat % 2 == 0 else list(reversed(VARIANTS))
            for name in order:
                step_times, count, seconds = run(model_dir, name, args.steps, work / f"{name}-{repeat}")
                times[name] += step_times
                redraws[name] += count
                drawing[name] += seconds
    means = {name: statistics.mean(values) for name, values in times.items()}
    ratio = means["throttled"] / means["none"]
    lines = [
        HEADING,
        "",
        f"`python benchmarks/dashboard_overhead.py --repeats {args.repeats} --steps {args.steps} --write-docs` on {machine()}.",
        f"Tiny Qwen2 model, LoRA r=8, {args.steps} steps x {args.repeats} interleaved repeats, 8 completions of 32 tokens "
        "per step; the dashboard's log view (the chart PNG and dashboard.png are drawn as in a notebook).",
        "",
        "| run | mean step time (s) | ratio to baseline | redraws | drawing time / step time, final frame included |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, label in VARIANTS.items():
        share = drawing[name] / sum(times[name])
        lines.append(f"| {label} | {means[name]:.4f} | {means[name] / means['none']:.3f} | {redraws[name]} | {share:.1%} |")
    lines += ["", f"Dashboard overhead ratio (default dashboard / none): **{ratio:.3f}** (aim: <= 1.02)."]
    publish(lines, args.write_docs)
    print(f"dashboard_overhead_ratio={ratio:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
