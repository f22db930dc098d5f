"""What the GPU tests share: a reward that varies on a random model's text, a short run, and a fresh interpreter."""

from __future__ import annotations

from pathlib import Path

from real_unsloth import run_script

HERE = Path(__file__).parent

# Six steps of the auto preset, made short to fit tests/gpu/run.sh's one call: 8 completions of 64 tokens a step. The
# learning rate is raised so that a few steps move LoRA weights by more than 16-bit rounding (the preset's 5e-6 would
# leave kl at 0.0 in bf16).
SHORT_RUN = dict(max_steps=6, num_generations=8, per_device_train_batch_size=8, max_completion_length=64,
                 learning_rate=5e-4, save_steps=3)

# Small models with the head size Unsloth's kernels see in real models' tiles (a multiple of 32: 128 / 4 heads)
TILED_SIZE = dict(hidden_size=128, num_heads=4, num_kv_heads=2, intermediate_size=256)


def characters_reward(completions, **kwargs):
    """Characters per completion / 1000: a random model's completions differ in it (its vocabulary's words have
    2 to 4 letters), so each group's rewards vary and the advantages are not all zero. A completion is chat messages,
    or text where the trainer hands rewards text (rows with images from TRL 0.24, as Unsloth's trainer does)."""
    return [len(completion if isinstance(completion, str) else completion[0]["content"]) / 1000 for completion in completions]


def run_in_fresh_interpreter(code: str, model_dir: Path, cwd: Path) -> object:
    """``code`` in a fresh interpreter (its own CUDA memory, its own Unsloth import) with this folder and tests/
    importable and ``model_dir`` set; returns what it passes to ``result``."""
    setup = f"import sys\nsys.path[:0] = [{str(HERE)!r}, {str(HERE.parent)!r}]\nmodel_dir = {str(model_dir)!r}\n"
    return run_script(setup + code, cwd, prelude="", timeout=900)
