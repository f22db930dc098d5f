"""``grpo-lite demo``: GRPO-train the shipped demo model on arithmetic and show it getting better at the task.

The demo model (``grpo_lite/assets/demo-model``, made by ``scripts/train_demo_model.py``) answers the
built-in arithmetic word problems in two ways: mostly with a bare guess, "The answer is 160.", that its
teacher rounded to the nearest ten; sometimes with the sum worked out in ``<reasoning>`` and the exact
result in ``<answer>``. Greedy decoding takes the guess, so it is usually wrong and never formatted;
sampling often reaches a right answer, so pass@8 is far above greedy accuracy. GRPO with a correctness
reward (2.0) that outweighs the format reward (0.5) sharpens those sampled right answers into the first
one. The demo measures held-out greedy accuracy, format rate and pass@k, trains with KL on under the live
dashboard (the correctness curve rises), measures again, prints both side by side and writes them to
``<output_dir>/eval.json``, as every run with a held-out set does. It runs offline on a laptop CPU (figures: docs/benchmarks.md).

``task="pictures"`` does the same with pictures: the vision demo model (``grpo_lite/assets/vision-demo-model``, a tiny
Qwen2.5-VL made by ``scripts/train_vision_demo_model.py``) answers questions about drawn shapes
(:mod:`grpo_lite.data.pictures`: their colour, count or kind) with the right answer or its teacher's steady mistake,
mostly the mistake; GRPO with ``exact_match_reward`` makes the right one its first answer. Its processor needs
torchvision.

``task="calculator"`` learns by acting: the tool demo model (``grpo_lite/assets/tool-demo-model``, a tiny Qwen2 with
Qwen2.5's chat template made by ``scripts/train_tool_demo_model.py``) answers the arithmetic word problems with
:func:`grpo_lite.data.calculator.calculate` among its tools: mostly with a guess rounded to ten, sometimes by calling the
calculator and reading its result. Training runs each call through TRL's tool loop and held-out evaluation plays the
same episodes (:mod:`grpo_lite.evaluation.played`), so held-out accuracy counts answers the model reached by acting.
It needs a stack with tool calling (TRL 1, transformers 5) and is refused on others, by name, before any model work.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..data.arithmetic import arithmetic_problems, heldout_arithmetic_problems
from ..data.calculator import calculate
from ..data.pictures import heldout_picture_questions, picture_questions
from ..run.settings import ConfigError

DEMO_MODEL_DIR = Path(__file__).parents[1] / "assets" / "demo-model"
VISION_DEMO_MODEL_DIR = Path(__file__).parents[1] / "assets" / "vision-demo-model"
TOOL_DEMO_MODEL_DIR = Path(__file__).parents[1] / "assets" / "tool-demo-model"
HELDOUT_QUESTIONS = 200  # the demo models never trained on the first this many of their task's held-out questions
DEMO_RUNS = "demo"  # each demo run without an output_dir gets a fresh outputs/demo-<n>


@dataclass(frozen=True)
class DemoTask:
    """What a demo trains: its model, its rows (``training()``) and held-out rows (``heldout(n)``), the rewards, the
    GRPOConfig values measured to make its model learn (docs/benchmarks.md), the steps it takes by default, and the
    tools its model may call."""

    model_dir: Path
    training: Callable[[], list[dict[str, Any]]]
    heldout: Callable[[int], list[dict[str, Any]]]
    rewards: list[str]
    options: dict[str, Any] = field(default_factory=dict)
    max_steps: int = 100
    tools: list[Callable[..., Any]] = field(default_factory=list)


DEMO_TASKS = {
    # Correctness pays 2.0 and format 0.5: every right answer earns more than any wrong one, tagged or not.
    "arithmetic": DemoTask(DEMO_MODEL_DIR, arithmetic_problems, heldout_arithmetic_problems,
                           ["numeric_correctness_reward", "soft_xml_format_reward"],
                           # measured: 5e-5 moves accuracy 5 points in 100 steps, 2e-4 30, 5e-4 less than 2e-4
                           {"learning_rate": 2e-4, "max_completion_length": 64}),
    "pictures": DemoTask(VISION_DEMO_MODEL_DIR, picture_questions, heldout_picture_questions, ["exact_match_reward"],
                         {"learning_rate": 2e-4, "max_completion_length": 24}),  # "The answer is yellow." and its end
    # max_completion_length holds a call, the calculator's result as the template shows it, and the answer (17 tokens
    # at most with the model's tokenizer); measured: 50 steps at 5e-4 raise accuracy 43.5-46.5 points on seeds 0-2
    "calculator": DemoTask(TOOL_DEMO_MODEL_DIR, arithmetic_problems, heldout_arithmetic_problems,
                           ["numeric_correctness_reward"], {"learning_rate": 5e-4, "max_completion_length": 48},
                           max_steps=50, tools=[calculate]),
}


@contextmanager
def _one_thread():
    """Run torch on one thread inside the block, then restore the caller's setting.

    The demo model's matrices are too small to split across cores: extra threads mostly wait on each
    other, and when other processes share the CPU a step took 20 s instead of 0.5 s.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def run_demo(
    output_dir: str | Path | None = None,
    *,
    task: str = "arithmetic",
    max_steps: int | None = None,
    seed: int = 0,
    heldout_n: int = HELDOUT_QUESTIONS,
    heldout_samples: int = 8,
    model_dir: str | Path | None = None,
    dashboard: bool | str = True,
    **overrides: Any,
) -> dict[str, Any]:
    """GRPO-train a demo model on its ``task`` (:data:`DEMO_TASKS`: ``"arithmetic"``, ``"pictures"``, ``"calculator"``)
    for ``max_steps`` (default: the task's) and return ``{"before": {...}, "after": {...}}``, as written to ``eval.json``.
    ``model_dir`` replaces the task's model.

    ``before`` and ``after`` hold ``n`` (the questions scored), greedy ``accuracy``, ``format_rate``,
    ``mean_rewards`` and ``pass_at_k`` (from ``heldout_samples``
    sampled completions per question; ``heldout_samples=1`` skips sampling) on ``heldout_n`` questions that neither
    the demo model nor this run trained on. ``overrides`` are GRPOConfig fields passed to :func:`grpo_lite.train`.
    Run files (run.yaml, metrics.jsonl, the trained weights, eval.json) go to ``output_dir``, by default a fresh
    ``outputs/demo-<n>``; a folder holding another run is refused, as :func:`grpo_lite.train` refuses it.
    """
    if task not in DEMO_TASKS:
        raise ConfigError(f"task={task!r}: use one of {', '.join(DEMO_TASKS)}")
    if not 1 <= heldout_n <= HELDOUT_QUESTIONS:
        raise ConfigError(f"heldout_n={heldout_n}: use 1 to {HELDOUT_QUESTIONS}, the held-out questions the demo model "
                         "never trained on")
    demo = DEMO_TASKS[task]
    if demo.tools:
        from ..machine import stack

        if (reason := stack.lacking("tools")) is not None:
            raise ConfigError(f"the {task!r} demo calls tools, and {reason}: run it on the latest stack "
                              "(requirements/lock.txt)")
    from transformers import set_seed

    from ..data.prepare import prepare_dataset
    from ..model.load import load_model
    from ..run.files import fresh_run_dir, say_fresh_run_dir
    from ..training.trainer import train

    if output_dir is None:
        output_dir = fresh_run_dir(DEMO_RUNS)
        say_fresh_run_dir(output_dir)
    output_dir = Path(output_dir)
    set_seed(seed)
    # On the CPU on every machine, unquantized: the model is too small to gain from a GPU, and the cpu-smoke preset
    # below trains where it sits.
    model, tokenizer = load_model(str(model_dir or demo.model_dir), lora_rank=None, backend="cpu")
    # No system prompt: the demo models learned to answer bare questions, and byte tokens make prompts long.
    heldout = prepare_dataset(demo.heldout(heldout_n), system_prompt=None)
    dataset = prepare_dataset(demo.training(), system_prompt=None)

    options = {
        "max_steps": demo.max_steps if max_steps is None else max_steps,
        "seed": seed,
        "beta": 0.04,  # KL on: the reference model costs little at this size, and the dashboard's KL panel fills
        "num_generations": 8,
        "per_device_train_batch_size": 32,  # 4 questions a step, so one hard question moves the step less
        "save_steps": 50,  # the cpu-smoke preset saves every 5 steps: 20 checkpoints of a 100-step demo
        **demo.options,
        **overrides,
    }
    with _one_thread():
        result = train(model, tokenizer, dataset, demo.rewards, preset="cpu-smoke", output_dir=output_dir,
                       dashboard=dashboard, heldout=heldout, heldout_n=None, heldout_samples=heldout_samples,
                       tools=demo.tools or None, **options)
    return {"before": result.evaluation.base.as_dict(), "after": result.evaluation.trained.as_dict()}
