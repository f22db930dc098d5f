"""The seed template's GRPOConfig (templates/basic_grpo_training.py, as /work/shared/seed-recipe.md section 2 lists it),
every keyword at its own value. tests/test_porting.py ports the same template at the test's size (num_generations=4,
max_completion_length=8) and checks the translations and the table in detail; this adds the keywords it leaves out
(optim="adamw_8bit", run_name) and the template's own group size and lengths. Replaced: bf16=True (the GPU) and
report_to="wandb" (an account); added: max_steps=2. The template's rewards are not public code: the library's versions
of its three (incremental format, soft format, exact match) stand in for them."""

import pytest

from grpo_lite import prepare_dataset, train
from grpo_lite.data.prepare import DatasetError

from .checks import check_port
from .unsloth_gsm8k import GSM8K_ROWS

# GSM8K-shaped rows short enough for the tiny model's byte-level tokenizer (a real tokenizer counts GSM8K's questions
# well under 256 tokens; this one counts a byte a token, and GSM8K_ROWS run 251 to 409): a step of 1 x 4 accumulation
# steps raised to a batch of 8 needs 4 prompts
SHORT_GSM8K_ROWS = [{"question": f"Tom has {a} apples and buys {b} more. How many apples does he have?",
                     "answer": f"He has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} apples.\n#### {a + b}"} for a, b in
                    [(3, 4), (10, 5), (7, 8), (12, 30), (2, 9), (6, 6), (20, 1), (11, 11)]]

# seed-recipe.md section 2, "GRPOConfig: ...", in its order
SEED_GRPO_CONFIG = dict(run_name="grpo-training", learning_rate=5e-6, adam_beta1=0.9, adam_beta2=0.99, weight_decay=0.1,
                        warmup_ratio=0.1, lr_scheduler_type="cosine", per_device_train_batch_size=1, gradient_accumulation_steps=4,
                        num_generations=8, max_prompt_length=256, max_completion_length=512, num_train_epochs=1, bf16=True,
                        optim="adamw_8bit", max_grad_norm=0.1, logging_steps=1, save_steps=100, report_to="wandb")


@pytest.mark.slow
def test_the_seed_templates_whole_config_trains(tiny_model, tmp_path, capsys):
    model, tokenizer = tiny_model  # REPLACED (hub): AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-1.5B-Instruct") + LoRA
    dataset = prepare_dataset(SHORT_GSM8K_ROWS, tokenizer=tokenizer)  # REPLACED (hub): GSM8K rows, answer after "####"
    port = dict(SEED_GRPO_CONFIG)
    port.pop("bf16")  # REPLACED (GPU): no bf16 on a CPU
    port["report_to"] = "none"  # REPLACED (an account): no wandb
    port["max_steps"] = 2  # ADDED: the run's length
    capsys.readouterr()
    result = train(model, tokenizer, dataset, ["incremental_format_reward", "soft_xml_format_reward", "exact_match_reward"],
                   output_dir=tmp_path, dashboard=False, **port)
    err = capsys.readouterr().err
    assert [m["step"] for m in result.metrics if "loss" in m][-1] == 2
    config = check_port(tmp_path, err, port, result.trainer.args, batch_raised=True)  # 1 x 4 cannot hold a group of 8
    assert config["generation_batch_size"] == 32
    assert type(result.trainer.optimizer.optimizer).__module__.startswith("bitsandbytes.optim")


def test_rows_that_cannot_fill_one_step_are_refused(tiny_model, tmp_path):
    model, tokenizer = tiny_model
    # 3 prompts, each kept (those over max_prompt_length=256 cut), for a batch of 8 x 4 steps in groups of 8: 4 prompts
    dataset = prepare_dataset(GSM8K_ROWS[:3], tokenizer=tokenizer)
    port = {k: v for k, v in SEED_GRPO_CONFIG.items() if k not in ("bf16", "report_to")}
    with pytest.raises(DatasetError, match=r"the dataset has 3 rows and one generation batch takes 4 prompts .* so no step could train"):
        train(model, tokenizer, dataset, ["soft_xml_format_reward"], output_dir=tmp_path, dashboard=False, max_steps=2,
              report_to="none", **{**port, "max_completion_length": 8})
