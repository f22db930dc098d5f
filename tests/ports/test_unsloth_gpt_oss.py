"""Unsloth's gpt-oss (20B) GRPO notebook (unslothai/notebooks @ bdda2efc, nb/gpt-oss-(20B)-GRPO.ipynb), ported to
grpo-lite on a tiny gpt-oss (experts kept as parameters, its real chat template): the notebook's code cells run verbatim
(tests/ports/unsloth_gpt_oss_cells.py) but for what reaches the hub or the GPU, each replaced here and said so. What it
meant carries over: LoRA on the experts its target_modules name, offload_embedding (Unsloth's) left out on a CPU, each
row's reasoning_effort rendered into its prompt, and max_prompt_length (measured on the raw prompt, without the
template's header) cutting each prompt on the left as the TRL it was written for did."""

import pytest
from families import BY_NAME
from stacks import prompts_trl_generates_from

from grpo_lite import load_model, train
from grpo_lite.data.prompts import prompt_token_ids
from grpo_lite.monitor.samples import read_samples

from .checks import check_port, run_config_cell
from .unsloth_gpt_oss_cells import CELLS

# Cells 8 and 10: FastLanguageModel.from_pretrained + get_peft_model, here load_model with the same keywords but for
# the model (REPLACED (hub): the tiny gpt-oss) and random_state, which is load_model's seed
TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# the cells that define, show and score: 37 and 64 generate on "cuda" (REPLACED (GPU): the model's device)
CELLS_BEFORE_THE_DATA = (12, 14, 16, 17, 19, 22, 24, 26, 28, 29, 31, 35, 37, 39, 41, 42, 44, 46, 47, 49, 50, 52, 53, 54)
CELL_58_CHANGES = {"from trl import GRPOConfig, GRPOTrainer\ntraining_args = GRPOConfig(": "training_args = dict("}


def _on_this_device(cell: int) -> str:
    return CELLS[cell].replace('.to("cuda")', ".to(model.device)")


@pytest.mark.slow
def test_unsloths_gpt_oss_notebook_trains_as_written(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the notebook writes "outputs" in the working folder
    ns: dict = {}
    max_seq_length, lora_rank = 768, 4  # cell 8
    model, tokenizer = load_model(str(BY_NAME["gpt-oss"].build(tmp_path)), max_seq_length=max_seq_length,
                                  load_in_4bit=True, offload_embedding=True, lora_rank=lora_rank,
                                  target_modules=TARGET_MODULES, lora_alpha=lora_rank * 2,
                                  use_gradient_checkpointing="unsloth", seed=3407)
    loaded = capsys.readouterr().err
    assert "offload_embedding=True: Unsloth's from_pretrained option" in loaded
    assert "experts (experts.gate_up_proj, experts.down_proj)" in loaded  # the MLP names reach the experts, said

    import torch

    ns.update(model=model, tokenizer=tokenizer, max_seq_length=max_seq_length, lora_rank=lora_rank, torch=torch)
    for cell in CELLS_BEFORE_THE_DATA:
        exec(_on_this_device(cell), ns)
    exec(CELLS[56], ns)  # 1000 rows of one prompt, reasoning_effort "low"; maximum_length from the raw prompt
    args, output_dir = run_config_cell(CELLS[58], CELL_58_CHANGES, ns)  # max_steps=2 added (100 in the notebook)

    # cells 60 and 62: GRPOTrainer(model, processing_class=tokenizer, reward_funcs=[...], args=training_args,
    # train_dataset=dataset).train()
    capsys.readouterr()
    rewards = [ns["function_works"], ns["no_cheating"], ns["correctness_check"], ns["speed_check"]]
    with prompts_trl_generates_from(model) as asked:
        result = train(model, tokenizer, ns["dataset"], rewards, output_dir=output_dir, dashboard=False, **args)
    err = capsys.readouterr().err
    assert result.trainer.state.global_step == 2
    check_port(output_dir, err, args, result.trainer.args, batch_raised=True)

    # each row is rendered with its own reasoning_effort, said; the prompt is cut on the left to max_prompt_length
    # tokens, as TRL 0.22 cut it, so the model is asked the end of the user turn and the assistant's header
    assert "reasoning_effort (low: 1000 rows)" in err
    rendered = prompt_token_ids(tokenizer, ns["dataset"][0]["prompt"], {"reasoning_effort": "low"})
    assert "Reasoning: low" in tokenizer.decode(rendered)
    assert asked and all(ids == rendered[-ns["max_prompt_length"]:] for ids in asked)
    samples = read_samples(output_dir)
    assert samples and all(row["template_columns"] == {"reasoning_effort": "low"} for row in samples)

    # the optimizer trains LoRA on the experts (whether they move depends on the rewards differing, which the notebook's
    # do not for a random model: tests/test_families.py moves them with a reward that differs)
    experts = {id(p) for name, p in result.model.named_parameters() if "experts" in name and "lora_" in name}
    optimized = {id(p) for group in result.trainer.optimizer.param_groups for p in group["params"]}
    assert experts and experts <= optimized

    exec(_on_this_device(64), ns)  # the notebook's generation after training
    exec(CELLS[66], ns)  # its export cells, each under "if False"
