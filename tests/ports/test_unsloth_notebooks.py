"""Unsloth's GRPO notebooks (Llama 3.1 8B and Qwen2.5 3B on GSM8K), ported to grpo-lite: the reward and data cells
verbatim (tests/ports/unsloth_gsm8k.py), the GRPOConfig(...) keywords passed unchanged to grpo_lite.train, but for
the hub model (the tiny model), the GPU (use_vllm) and the run's length (max_steps=2, the one added override)."""

import pytest

from grpo_lite import train

from . import unsloth_gsm8k as nb
from .checks import check_port

REWARDS = [nb.xmlcount_reward_func, nb.soft_format_reward_func, nb.strict_format_reward_func, nb.int_reward_func,
           nb.correctness_reward_func]  # GRPOTrainer(reward_funcs=[...]) in both notebooks, in this order

# nb/Llama3.1_(8B)-GRPO.ipynb @ bdda2efc: max_seq_length = 1024, max_prompt_length = 256, then GRPOConfig(...)
max_seq_length = 1024
max_prompt_length = 256
LLAMA = dict(
    learning_rate = 5e-6,
    adam_beta1 = 0.9,
    adam_beta2 = 0.99,
    weight_decay = 0.001,
    warmup_ratio = 0.1,
    lr_scheduler_type = "cosine",
    optim = "paged_adamw_8bit",
    logging_steps = 1,
    per_device_train_batch_size = 1,
    gradient_accumulation_steps = 1, # Increase to 4 for smoother training
    num_generations = 6, # Decrease if out of memory
    max_prompt_length = max_prompt_length,
    max_completion_length = max_seq_length - max_prompt_length,
    # num_train_epochs = 1, # Set to 1 for a full training run
    max_steps = 250,
    save_steps = 250,
    max_grad_norm = 0.1,
    report_to = "none", # Can use Weights & Biases
    output_dir = "outputs",
)

# nb/Qwen2.5_(3B)-GRPO.ipynb @ bdda2efc: GRPOConfig(...)
QWEN25 = dict(
    use_vllm = True, # use vllm for fast inference!
    learning_rate = 5e-6,
    adam_beta1 = 0.9,
    adam_beta2 = 0.99,
    weight_decay = 0.001,
    warmup_ratio = 0.1,
    lr_scheduler_type = "cosine",
    optim = "adamw_8bit",
    logging_steps = 1,
    per_device_train_batch_size = 1,
    gradient_accumulation_steps = 1, # Increase to 4 for smoother training
    num_generations = 8, # Decrease if out of memory
    max_prompt_length = 256,
    max_completion_length = 200,
    # num_train_epochs = 1, # Set to 1 for a full training run
    max_steps = 250,
    save_steps = 250,
    max_grad_norm = 0.1,
    report_to = "none", # Can use Weights & Biases
    output_dir = "outputs",
)


def _port(original: dict, tmp_path) -> dict:
    port = dict(original)
    port["output_dir"] = str(tmp_path)  # REPLACED: the test's folder for "outputs"
    port["max_steps"] = 2  # ADDED: the run's length (250 in the notebook)
    port.pop("use_vllm", None)  # REPLACED (GPU): no vLLM on a CPU; generation goes through transformers
    return port


@pytest.mark.parametrize("original", [LLAMA, QWEN25], ids=["llama3.1-8b", "qwen2.5-3b"])
def test_an_unsloth_gsm8k_notebook_trains_as_written(tiny_model, tmp_path, capsys, original):
    model, tokenizer = tiny_model  # REPLACED (hub): FastLanguageModel.from_pretrained + get_peft_model
    port = _port(original, tmp_path)
    output_dir = port.pop("output_dir")
    capsys.readouterr()
    result = train(model, tokenizer, nb.dataset, REWARDS, output_dir=output_dir, dashboard=False, **port)
    err = capsys.readouterr().err
    assert [m["step"] for m in result.metrics if "loss" in m][-1] == 2
    config = check_port(output_dir, err, port, result.trainer.args, batch_raised=True)
    # the 8-bit optimizer is bitsandbytes' own, whose CPU build runs it (paged: it says it falls back to unpaged on CPU)
    assert type(result.trainer.optimizer.optimizer).__module__.startswith("bitsandbytes.optim")
    assert config["use_vllm"] is False  # the one GPU replacement: generation through transformers
