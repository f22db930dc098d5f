"""open-r1's GRPO demo recipe (huggingface/open-r1, commit 1416fa0cf21595d2083b399a2a0bbddd7f6e9563,
recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml, run by src/open_r1/grpo.py), ported to a grpo-lite run YAML: its
training keys go into ``overrides:`` unchanged, its rewards (accuracy, format, tag_count) are src/open_r1/rewards.py's,
verbatim (tests/ports/open_r1_rewards.py), and the run goes through read_recipe/run_recipe as `grpo-lite train` does.
Replaced: the hub (model, dataset, push_to_hub, wandb), the GPU (bf16, use_vllm) and the run's length (max_steps=1)."""

import json

import pytest
import yaml

from grpo_lite.launch.recipe import read_recipe, run_recipe
from grpo_lite.machine import stack
from grpo_lite.run.record import read_run

from .checks import check_port

# The original file, verbatim.
CONFIG_DEMO = r'''
# Model arguments
model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct
model_revision: main
torch_dtype: bfloat16
attn_implementation: flash_attention_2

# Data training arguments
dataset_name: open-r1/OpenR1-Math-220k
dataset_prompt_column: problem
system_prompt: "You are a helpful AI Assistant that provides well-reasoned and detailed responses. You first think about the reasoning process as an internal monologue and then provide the user with the answer. Respond in the following format: <think>\n...\n</think>\n<answer>\n...\n</answer>"

# GRPO trainer config
bf16: true
use_vllm: true
do_eval: false
gradient_accumulation_steps: 4
gradient_checkpointing: true
gradient_checkpointing_kwargs:
  use_reentrant: false
hub_model_id: Qwen2.5-1.5B-Open-R1-GRPO
hub_strategy: every_save
learning_rate: 2.0e-05
log_completions: true
log_level: info
logging_first_step: true
logging_steps: 1
logging_strategy: steps
lr_scheduler_type: cosine
max_prompt_length: 512
max_completion_length: 1024
max_steps: -1
num_generations: 16
num_train_epochs: 1
output_dir: data/Qwen2.5-1.5B-Open-R1-GRPO
overwrite_output_dir: true
per_device_eval_batch_size: 16
per_device_train_batch_size: 16
push_to_hub: true
report_to:
- wandb
reward_funcs:
- accuracy
- format
- tag_count
reward_weights:
- 1.0
- 1.0
- 1.0
save_strategy: "epoch"
save_total_limit: 1
seed: 42
warmup_ratio: 0.1
'''  # noqa: E501 (the recipe's system_prompt line, verbatim)

MODEL_KEYS = ("model_name_or_path", "model_revision", "torch_dtype", "attn_implementation")  # -> model: tiny (hub, GPU)
DATA_KEYS = ("dataset_name", "dataset_prompt_column", "system_prompt")  # -> dataset: {...}
SCRIPT_KEYS = ("reward_funcs", "reward_weights", "output_dir")  # open-r1's own arguments -> the run YAML's top level
# open-r1's registry (src/open_r1/rewards.py, get_reward_funcs): name -> function
OPEN_R1_REWARDS = {"accuracy": "accuracy_reward", "format": "format_reward", "tag_count": "tag_count_reward"}

# REPLACED (hub): rows of open-r1/OpenR1-Math-220k's shape (problem, solution ending in a boxed answer)
OPENR1_ROWS = [
    {"problem": "Find the value of $x$ if $2x + 3 = 11$.", "solution": "Subtract 3: $2x = 8$, so $x = \\boxed{4}$."},
    {"problem": "What is $\\frac{1}{2} + \\frac{1}{3}$?", "solution": "Common denominator 6: $\\frac{3}{6} + \\frac{2}{6} = \\boxed{\\frac{5}{6}}$."},
    {"problem": "How many positive divisors does 12 have?", "solution": "They are 1, 2, 3, 4, 6, 12, so $\\boxed{6}$."},
    {"problem": "Compute $3^4$.", "solution": "$3^4 = 81$, so the answer is $\\boxed{81}$."},
]


def port_recipe(original: dict, tmp_path) -> dict:
    """The grpo-lite run YAML for the recipe: every training key unchanged under overrides, but for the replacements."""
    overrides = {k: v for k, v in original.items() if k not in (*MODEL_KEYS, *DATA_KEYS, *SCRIPT_KEYS)}
    overrides["bf16"] = False  # REPLACED (GPU): no bf16 on this CPU
    overrides["use_vllm"] = False  # REPLACED (GPU): no vLLM on a CPU; generation goes through transformers
    overrides["push_to_hub"] = False  # REPLACED (hub): nothing leaves the machine
    overrides["report_to"] = "none"  # REPLACED (an account): no wandb
    overrides["max_steps"] = 1  # ADDED: the run's length (-1: one epoch in the recipe); each step generates 64 x 1024 tokens
    rows = tmp_path / "openr1_math.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in OPENR1_ROWS))
    return {
        "model": "tiny",  # REPLACED (hub): model_name_or_path, torch_dtype, attn_implementation
        "dataset": {"path": str(rows),  # REPLACED (hub): dataset_name
                    "question": original["dataset_prompt_column"], "answer": "solution",  # kept beside `answer` as it was
                    "system_prompt": original["system_prompt"]},
        "rewards": [f"{__package__}.open_r1_rewards:{OPEN_R1_REWARDS[name]}" for name in original["reward_funcs"]],
        "reward_weights": original["reward_weights"],
        "output_dir": str(tmp_path / "run"),  # REPLACED: the test's folder for data/Qwen2.5-1.5B-Open-R1-GRPO
        "overrides": overrides,
    }


@pytest.mark.slow
def test_open_r1s_demo_recipe_trains_as_written(tmp_path, capsys):
    original = yaml.safe_load(CONFIG_DEMO)
    run_yaml = tmp_path / "config_demo.grpo-lite.yaml"
    port = port_recipe(original, tmp_path)
    run_yaml.write_text(yaml.safe_dump(port, sort_keys=False))
    changed = {k for k in port["overrides"] if port["overrides"][k] != original.get(k)}
    assert changed == {"bf16", "use_vllm", "push_to_hub", "report_to", "max_steps"}  # every other key as the recipe wrote it

    settings = read_recipe(run_yaml)
    capsys.readouterr()
    result = run_recipe(settings)
    err = capsys.readouterr().err
    assert result.trainer.state.global_step == 1
    assert [m["step"] for m in result.metrics if "loss" in m][-1] == 1
    config = check_port(port["output_dir"], err, port["overrides"], result.trainer.args)
    run = read_run(port["output_dir"])
    assert run.settings.reward_weights == [1.0, 1.0, 1.0]
    assert [f.__name__ for f in result.trainer.reward_funcs] == ["accuracy_reward", "format_reward", "tag_count_reward"]
    # under the name the installed transformers reads (activation_checkpointing_kwargs from 5.23), said once (check_port)
    assert config[stack.field_name("gradient_checkpointing_kwargs")] == {"use_reentrant": False}
    assert getattr(result.trainer.args, stack.field_name("gradient_checkpointing")) is True
    assert result.trainer.train_dataset[0]["prompt"][0] == {"role": "system", "content": original["system_prompt"]}
    assert "solution" in result.trainer.train_dataset.column_names  # accuracy_reward(completions, solution) reads it
