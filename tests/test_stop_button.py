"""The Stop button on real kernels: its click, sent as a frontend sends it, ends training after that step.

Kernels: this venv's (ipykernel 7.4: a subshell), ipykernel 7.3 and 7.0 (clicks taken off the shell channel
thread), 6.29.5, Colab's (ipykernel 6.17.1, IPython 7.34, jupyter_client 6.1.12, ipywidgets 7.7.1) and 5.5.6
(jupyter-ui-poll). Cases:
a training cell queued behind another that drew a button ("Run all"), clicked while it runs; a plan of stages; a
kernel without jupyter-ui-poll.
"""

import os
import sys

import pytest
from kernel_click import run_and_click
from kernel_envs import kernel_pythonpath

SETUP = """
from grpo_lite import Stage, build_tiny_model, load_model, prepare_dataset, train, train_stages
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


KERNELS = ["default", "ipykernel-7.3", "ipykernel-7.0", "ipykernel-6.29.5", "colab", "ipykernel-5.5.6"]


# The click on the running cell, on every kernel: the second training cell's, once the first (which drew a button too)
# has ended. A kernel's first button is clicked in the plan of stages (Colab's) and without jupyter-ui-poll (subshells).
@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
def test_a_click_stops_a_training_cell_queued_behind_another(kernel, tmp_path):
    cells = [SETUP, training_cell("first", max_steps=2), training_cell("run")]
    clicked = run_and_click(sys.executable, cells, tmp_path, env=kernel_env(kernel), click_button=2)
    assert not clicked.errors, clicked
    assert clicked.trained(1) == [2], "the first cell ran to its end"
    [trained] = clicked.trained(2)
    assert clicked.clicked_at <= trained < MAX_STEPS, clicked
    assert (tmp_path / "run" / f"checkpoint-{trained}").is_dir()


STAGES = f"""
results = train_stages([Stage(length_reward, max_steps={MAX_STEPS}, name="first"), Stage(length_reward, max_steps=3)],
                       model, tokenizer, dataset, output_dir="plan", **SETTINGS)
print("trained", *[r.trainer.state.global_step for r in results])
"""


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["default", "colab"])
def test_a_click_ends_the_whole_plan_of_stages_with_a_checkpoint(kernel, tmp_path):
    clicked = run_and_click(sys.executable, [SETUP, STAGES], tmp_path, env=kernel_env(kernel))
    assert not clicked.errors, clicked
    [trained] = clicked.trained(1)
    assert clicked.clicked_at <= trained < MAX_STEPS, clicked
    assert (tmp_path / "plan" / "1-first" / f"checkpoint-{trained}").is_dir()
    assert not (tmp_path / "plan" / "2-stage2").exists(), "the second stage did not start"


WITHOUT_UI_POLL = "import sys\nsys.modules['jupyter_ui_poll'] = None  # as if it were not installed"


@pytest.mark.slow
def test_without_jupyter_ui_poll_a_kernel_without_subshells_draws_no_button_and_says_how_to_stop(tmp_path):
    cells = [SETUP, WITHOUT_UI_POLL, training_cell("run", max_steps=2)]
    clicked = run_and_click(sys.executable, cells, tmp_path, env=kernel_env("colab"))
    assert not clicked.errors, clicked
    assert clicked.buttons == [] and clicked.trained(2) == [2], clicked
    assert "no Stop button" in clicked.stdout[2] and "interrupt the kernel" in clicked.stdout[2]


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["default", "ipykernel-7.3"])
def test_kernels_with_subshells_need_no_jupyter_ui_poll(kernel, tmp_path):
    clicked = run_and_click(sys.executable, [SETUP, WITHOUT_UI_POLL, training_cell("run")], tmp_path, env=kernel_env(kernel))
    assert not clicked.errors, clicked
    [trained] = clicked.trained(2)
    assert clicked.clicked_at <= trained < MAX_STEPS, clicked
