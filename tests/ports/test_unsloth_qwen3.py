"""Unsloth's Qwen3 (4B) GRPO notebook (unslothai/notebooks @ bdda2efc, nb/Qwen3_(4B)-GRPO.ipynb), ported to grpo-lite: a
short format SFT (grpo_lite.warmup_format) and then GRPO (grpo_lite.train) on the same LoRA adapter. Its code cells run
verbatim (tests/ports/unsloth_qwen3_cells.py) but for what reaches the hub or the GPU, each replaced here and said so."""

from stacks import newer_only

from grpo_lite import load_model, train
from grpo_lite.machine import stack
from grpo_lite.run.record import read_run

from .checks import check_port, run_config_cell
from .unsloth_qwen3_cells import CELLS

# REPLACED (hub): rows of unsloth/OpenMathReasoning-mini's shape (split "cot"); the last one's answer is not a number,
# which the notebook's own filter drops
OPEN_MATH_REASONING_MINI = [
    {"expected_answer": "12", "problem": "What is 3 times 4?", "generated_solution": "<think>\n3 times 4 is 12.\n</think>\nThe answer is 12."},
    {"expected_answer": "7", "problem": "What is 15 minus 8?", "generated_solution": "<think>\n15 - 8 = 7.\n</think>\n7"},
    {"expected_answer": "9", "problem": "What is the square root of 81?", "generated_solution": "<think>\n9 * 9 = 81.\n</think>\n9"},
    {"expected_answer": "x+1", "problem": "Simplify (x^2-1)/(x-1).", "generated_solution": "<think>\nFactor.\n</think>\nx+1"},
]
# REPLACED (hub): rows of open-r1/DAPO-Math-17k-Processed's shape (config "en"): prompt and solution text
DAPO_MATH = [
    {"prompt": "What is 6 plus 7?", "solution": "13"},
    {"prompt": "What is 20 divided by 4?", "solution": "5"},
    {"prompt": "What is 2 to the power 5?", "solution": "32"},
    {"prompt": "What is 100 minus 1?", "solution": "99"},
    {"prompt": "How many sides does a hexagon have?", "solution": "6"},
]


def _load_dataset(path, name=None, split=None):  # REPLACED (hub): datasets.load_dataset for the notebook's two datasets
    from datasets import Dataset

    rows = {("unsloth/OpenMathReasoning-mini", None, "cot"): OPEN_MATH_REASONING_MINI,
            ("open-r1/DAPO-Math-17k-Processed", "en", "train"): DAPO_MATH}[(path, name, split)]
    return Dataset.from_list(rows)


# The notebook's SFTConfig(...) keywords (cell 26), unchanged
SFT_CONFIG = dict(dataset_text_field="text", per_device_train_batch_size=1, gradient_accumulation_steps=1, warmup_steps=5,
                  num_train_epochs=2, learning_rate=2e-4, logging_steps=5, optim="adamw_8bit", weight_decay=0.001,
                  lr_scheduler_type="linear", seed=3407, report_to="none")
# Lines of cell 59 a port changes: GRPOConfig(...) becomes the keywords train() takes; vLLM's SamplingParams (no vLLM on a
# CPU) becomes a mapping of the same keywords, which grpo-lite reads as it reads a SamplingParams
# transformers 5: apply_chat_template(tokenize=True) returns a BatchEncoding (a dict of input_ids and attention_mask) unless
# return_dict=False, so cell 22's len(...) is 2 for every row (its length filter keeps everything, silently) and cell 57's
# batched map fails. Not grpo-lite's to change (it is the user's own tokenizer call): the one hand edit, in both cells.
TRANSFORMERS_5_CHANGES = {
    22: ("len(tokenizer.apply_chat_template(x))", "len(tokenizer.apply_chat_template(x, return_dict = False))"),
    57: ("add_generation_prompt = True, tokenize = True)", "add_generation_prompt = True, tokenize = True, return_dict = False)"),
}
CELL_59_CHANGES = {"from vllm import SamplingParams\n": "SamplingParams = dict  # REPLACED (GPU): no vLLM here\n",
                   "from trl import GRPOConfig, GRPOTrainer\ntraining_args = GRPOConfig(": "training_args = dict("}


def _edited(cell: int) -> str:
    if cell not in TRANSFORMERS_5_CHANGES or not stack.newer("chat_template_dict"):  # transformers 4: as written
        return CELLS[cell]
    old, new = TRANSFORMERS_5_CHANGES[cell]
    assert CELLS[cell].count(old) == 1
    return CELLS[cell].replace(old, new)


@newer_only("chat_template_dict")
def test_transformers_5_changes_what_apply_chat_template_returns(tiny_model_dir):
    """Why cells 22 and 57 need return_dict=False on transformers 5 (the notebook was written for transformers 4)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    messages = [{"role": "user", "content": "What is 3 times 4?"}]
    assert len(tokenizer.apply_chat_template(messages)) == 2  # input_ids and attention_mask: cell 22's N, for any row
    assert len(tokenizer.apply_chat_template(messages, return_dict=False)) > 2


def test_unsloths_qwen3_notebook_warms_up_then_trains_as_written(tiny_model_dir, tmp_path, capsys, monkeypatch):
    from grpo_lite import warmup_format

    monkeypatch.setattr("datasets.load_dataset", _load_dataset)
    monkeypatch.chdir(tmp_path)  # the notebook writes "outputs" in the working folder
    ns: dict = {}
    # cell 8: max_seq_length = 2048, lora_rank = 32, FastLanguageModel.from_pretrained + get_peft_model
    max_seq_length, lora_rank = 2048, 32
    model, tokenizer = load_model(str(tiny_model_dir), max_seq_length=max_seq_length, load_in_4bit=False, lora_rank=lora_rank,
                                  lora_alpha=lora_rank * 2, seed=3407)  # REPLACED (hub): the tiny model, the notebook's LoRA
    import torch

    ns.update(model=model, tokenizer=tokenizer, max_seq_length=max_seq_length, lora_rank=lora_rank, torch=torch)
    for cell in (10, 12, 16, 18, 22, 24):  # markers, chat template, the SFT rows (numbers only, short enough), "text"
        exec(_edited(cell), ns)
    assert len(ns["dataset"]) == 3  # the notebook's filter dropped the non-numeric answer

    # cell 26: SFTTrainer(model, tokenizer, train_dataset=dataset, args=SFTConfig(...)).train() -> warmup_format
    warmup = warmup_format(model, tokenizer, ns["dataset"], output_dir=str(tmp_path / "sft"), **SFT_CONFIG)
    assert warmup.trainer.state.global_step == 6  # 3 rows x 2 epochs, batch 1
    assert warmup.trainer.args.weight_decay == 0.001 and warmup.trainer.args.optim == "adamw_8bit"

    for cell in (31, 33, 38, 40, 42, 47, 49, 51, 53, 55, 57):  # the GRPO rows, rewards, the prompt-length quantile
        exec(_edited(cell), ns)
    args, output_dir = run_config_cell(CELLS[59], CELL_59_CHANGES, ns)  # max_steps=2 added (100 in the notebook)

    # cell 61: GRPOTrainer(model, processing_class=tokenizer, reward_funcs=[...], args=training_args, train_dataset=dataset)
    capsys.readouterr()
    result = train(model, tokenizer, ns["dataset"], [ns["match_format_exactly"], ns["match_format_approximately"],
                   ns["check_answer"], ns["check_numbers"]], output_dir=output_dir, dashboard=False, **args)
    err = capsys.readouterr().err
    assert result.trainer.state.global_step == 2
    run = read_run(output_dir)
    assert run.settings.overrides["vllm_sampling_params"] == {"min_p": 0.1, "top_p": 1.0, "top_k": -1, "seed": 3407,
                                                              "stop": [tokenizer.eos_token], "include_stop_str_in_output": True}
    config = check_port(output_dir, err, args, result.trainer.args, batch_raised=True)
    assert config["min_p"] == 0.1 and config["top_p"] == 1.0 and config["top_k"] == 0  # vLLM's top_k=-1: off
    assert config["generation_kwargs"] == {"stop_strings": [tokenizer.eos_token]}
    assert config["temperature"] == 1.0
    said = [line for line in err.splitlines() if line.startswith("grpo-lite: vllm_sampling_params")]
    assert len(said) == 1 and "seed=3407 not carried" in said[0]
