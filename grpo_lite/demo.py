"""``grpo-lite demo``: GRPO-train the shipped demo model on arithmetic and show it getting better.

The demo model (``grpo_lite/assets/demo-model``, made by ``scripts/train_demo_model.py``) answers the
built-in arithmetic word problems, but its greedy answers are plain text rather than ``<reasoning>``/
``<answer>`` blocks (sampled ones use the tags about a quarter of the time), and half of them are wrong.
The demo measures greedy accuracy and format rate on held-out questions, GRPO-trains with the library's
correctness and format rewards under the live dashboard, measures again, and writes both to
``<output_dir>/demo_eval.json``. It runs offline on a laptop CPU (figures: docs/benchmarks.md).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any

DEMO_MODEL_DIR = Path(__file__).parent / "assets" / "demo-model"
DEMO_REWARDS = ["numeric_correctness_reward", "soft_xml_format_reward"]
EVAL_FILE = "demo_eval.json"


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
    output_dir: str | Path = "outputs/demo",
    *,
    max_steps: int = 100,
    seed: int = 0,
    n_heldout: int = 200,
    model_dir: str | Path = DEMO_MODEL_DIR,
    dashboard: bool | str = True,
    **overrides: Any,
) -> dict[str, Any]:
    """GRPO-train the demo model and return ``{"before": {...}, "after": {...}, "n_heldout": n}``.

    ``before`` and ``after`` hold greedy ``accuracy`` and ``format_rate`` on ``n_heldout`` questions that
    are not in the training set. ``overrides`` are GRPOConfig fields passed to :func:`grpo_lite.train`.
    Run files (run.yaml, metrics.jsonl, the trained weights) and ``demo_eval.json`` go to ``output_dir``.
    """
    from transformers import set_seed

    from .data import heldout_arithmetic_problems, load_builtin, prepare_dataset
    from .models import load_model
    from .training import train

    output_dir = Path(output_dir)
    set_seed(seed)
    # On the CPU on every machine, unquantized: the model is too small to gain from a GPU, and the cpu-smoke preset
    # below trains where it sits.
    model, tokenizer = load_model(str(model_dir), lora_rank=None, backend="cpu")
    # No system prompt: the demo model learned to answer bare questions, and byte tokens make prompts long.
    heldout = prepare_dataset(heldout_arithmetic_problems(n_heldout), system_prompt=None)
    dataset = prepare_dataset(load_builtin("arithmetic"), system_prompt=None)

    options = {
        "max_steps": max_steps,
        "seed": seed,
        # Small steps: larger ones flip the format sooner but also unlearn sums the model got right.
        "learning_rate": 5e-5,
        "beta": 0.0,  # no reference model to run: less memory and compute on a laptop (and no KL to log)
        "num_generations": 8,
        "per_device_train_batch_size": 32,  # 4 questions a step, so one hard question moves the step less
        "max_completion_length": 64,
        "save_steps": 50,  # the cpu-smoke preset saves every 5 steps: 20 checkpoints of a 100-step demo
        **overrides,
    }
    with _one_thread():
        result = train(model, tokenizer, dataset, DEMO_REWARDS, preset="cpu-smoke", output_dir=output_dir,
                       dashboard=dashboard, heldout=heldout, heldout_n=None, **options)
    before, after = result.evaluation.base, result.evaluation.trained
    report = {
        "before": {"accuracy": before.accuracy, "format_rate": before.format_rate},
        "after": {"accuracy": after.accuracy, "format_rate": after.format_rate},
        "n_heldout": after.n,
    }
    (output_dir / EVAL_FILE).write_text(json.dumps(report, indent=2) + "\n")
    return report
