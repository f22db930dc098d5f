"""The Stop button on real kernels: its click, sent as a frontend sends it, ends training after that step.

Kernels: this venv's (ipykernel 7.4: a subshell), ipykernel 7.3 (clicks taken off the shell channel thread)
and Colab's (ipykernel 6.17.1, IPython 7.34, jupyter_client 6.1.12, ipywidgets 7.7.1: jupyter-ui-poll).
"""

import os
import sys

import pytest
from kernel_click import run_and_click
from kernel_envs import kernel_pythonpath

SETUP = """
from grpo_lite import build_tiny_model, load_model, prepare_dataset, train
model, tokenizer = load_model(str(build_tiny_model("tiny-model", seed=0)), lora_rank=8)
dataset = prepare_dataset([{"question": f"Spell {w}", "answer": w} for w in ["cat", "dog", "owl", "bee"] * 4],
                          system_prompt=None)
def length_reward(completions, **kwargs):
    return [len(c[0]["content"]) / 10 for c in completions]
SETTINGS = dict(preset="cpu-smoke", num_generations=4, per_device_train_batch_size=8, max_completion_length=8,
                save_steps=1000, dashboard="notebook")
"""
MAX_STEPS = 400  # far more than a click takes to land, however slow the machine


def training_cell(output_dir: str, max_steps: int = MAX_STEPS) -> str:
    return (f"r = train(model, tokenizer, dataset, [length_reward], output_dir={output_dir!r}, max_steps={max_steps}, "
            "**SETTINGS)\nprint('trained', r.trainer.state.global_step)")


def kernel_env(name: str) -> dict[str, str]:
    env = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "MPLBACKEND": "Agg"}
    path = kernel_pythonpath(name)
    if path:
        env["PYTHONPATH"] = os.pathsep.join([path, os.environ.get("PYTHONPATH", "")])
    return env


KERNELS = ["default", "ipykernel-7.3", "colab"]


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
def test_a_click_stops_the_running_cell_after_that_step_with_a_checkpoint(kernel, tmp_path):
    clicked = run_and_click(sys.executable, [SETUP, training_cell("run")], tmp_path, env=kernel_env(kernel))
    assert not clicked.errors, clicked
    assert clicked.clicked_at is not None and len(clicked.buttons) == 1, clicked
    [trained] = clicked.trained(1)
    assert clicked.clicked_at <= trained < MAX_STEPS, clicked
    assert (tmp_path / "run" / f"checkpoint-{trained}").is_dir()
