"""TRL's GRPOTrainer quick start (huggingface/trl, commit f2cd57710ae345ea6428ae95363267fcf38a3dc8,
docs/source/grpo_trainer.md, "Quick start"), ported to grpo-lite:

    # train_grpo.py
    from datasets import load_dataset
    from trl import GRPOTrainer
    from trl.rewards import accuracy_reward

    dataset = load_dataset("trl-lib/DeepMath-103K", split="train")

    trainer = GRPOTrainer(
        model="Qwen/Qwen2.5-0.5B-Instruct",
        reward_funcs=accuracy_reward,
        train_dataset=dataset,
    )
    trainer.train()

It sets no GRPOConfig field, so the port passes none but max_steps=2 (the one added override): under preset="trl" the
run is TRL's defaults but for what a CPU needs; under the default preset every value differing from TRL's is in the
table the run prints first."""

import pytest
from datasets import Dataset

from grpo_lite.machine import stack

if not stack.newer("trl_math_rewards"):  # the quick start above is TRL 1.x's
    pytest.skip(f"TRL {stack.installed('trl')}: {stack.DIFFERENCES['trl_math_rewards'].older}, and the quick start imports "
                "trl.rewards.accuracy_reward", allow_module_level=True)

from trl.rewards import accuracy_reward  # noqa: E402  TRL's own reward, as the quick start imports it

from grpo_lite import train  # noqa: E402
from grpo_lite.run.presets import trl_defaults  # noqa: E402

from .checks import changes_table, check_port  # noqa: E402

# REPLACED (hub): rows of trl-lib/DeepMath-103K's shape, a conversational prompt and a LaTeX solution
DEEPMATH_ROWS = [
    {"prompt": [{"role": "user", "content": "Evaluate the limit: \\[ \\lim_{x \\to 0} \\frac{\\sin 3x}{x} \\]"}], "solution": "3"},
    {"prompt": [{"role": "user", "content": "Compute \\( \\int_0^1 2x \\, dx \\)."}], "solution": "1"},
    {"prompt": [{"role": "user", "content": "What is the sum of the first 10 positive integers?"}], "solution": "55"},
    {"prompt": [{"role": "user", "content": "Simplify \\( \\frac{2}{6} \\)."}], "solution": "\\frac{1}{3}"},
]


@pytest.mark.parametrize("preset", ["trl", "auto"])
def test_trls_quick_start_trains_as_written(tiny_model, tmp_path, capsys, preset):
    dataset = Dataset.from_list(DEEPMATH_ROWS)  # REPLACED (hub): load_dataset("trl-lib/DeepMath-103K", split="train")
    model, tokenizer = tiny_model  # REPLACED (hub): model="Qwen/Qwen2.5-0.5B-Instruct"
    capsys.readouterr()
    result = train(model, tokenizer, dataset, accuracy_reward, preset=preset, output_dir=tmp_path, dashboard=False,
                   max_steps=2)  # ADDED: the run's length
    err = capsys.readouterr().err
    assert result.trainer.state.global_step == 2  # (TRL's logging_steps=10 logs no loss in 2 steps under preset="trl")
    config = check_port(tmp_path, err, {"max_steps": 2}, result.trainer.args)
    table = changes_table(err)
    if preset == "trl":  # TRL's defaults, but for what a CPU needs
        assert set(table) == {"use_cpu", "bf16"}
        defaults = trl_defaults()
        assert all(config[key] == defaults[key] for key in ("beta", "num_generations", "max_completion_length", "learning_rate",
                                                            "per_device_train_batch_size", "loss_type", "temperature"))
    else:
        assert table["beta"] == ["0.0", "0.04", "grpo-lite's base: KL on"]
    assert dataset.column_names == ["prompt", "solution"]  # the reward reads `solution` as TRL passes it
