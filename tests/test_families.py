"""The model families users load (tests/families.py: Llama 3.2, Qwen3, Gemma 2, 3 and 3n, Mistral v0.1, Phi-3-mini,
SmolLM2 and 3, gpt-oss, and the mixtures of experts Qwen3-MoE, DeepSeek-V3.1, Llama 4, Mixtral and Granite 4), each a
tiny random model of transformers' own class with the family's real chat template, through the whole path: prepare ->
train 2 steps -> generate -> export the adapter and the merged model -> reload each with the same logits.
"""

import re

import pytest
import torch
from families import FAMILIES
from peft import AutoPeftModelForCausalLM
from stacks import prompts_trl_generates_from
from transformers import AutoModelForCausalLM

from grpo_lite import export, generate, load_model, prepare_dataset, train
from grpo_lite.data.prepare import REASONING_SYSTEM_PROMPT
from grpo_lite.data.prompts import prompt_token_ids, render_prompt
from grpo_lite.model.load import loaded_as
from grpo_lite.model.lora import lora_blocks, targets_as_named

ROWS = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(2)]
TWO_STEPS = dict(preset="cpu-smoke", max_steps=2, num_generations=4, per_device_train_batch_size=4, max_completion_length=6,
                 beta=0.0, save_steps=100, dashboard=False)
FOLD_LINE = "the system prompt is folded into the first user turn"


def characters_reward(completions, **kwargs):
    """Distinct characters per completion: a random model's completions of equal length differ in it."""
    return [len(set(completion[0]["content"])) / 10 for completion in completions]


def logits(model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0]


@pytest.mark.parametrize("family", FAMILIES, ids=[family.name for family in FAMILIES])
def test_each_family_prepares_trains_generates_exports_and_reloads(family, tmp_path, capsys):
    model, tokenizer = load_model(str(family.build(tmp_path)), lora_rank=4)
    # load: LoRA on every linear projection of the family (Phi's fused ones, Gemma 3n's held in lists, the dense and
    # shared MLPs of a mixture of experts) and on its experts, modules or parameters, the output layer and the router left
    # out, said with the blocks of each kind, as many on either end of the supported range
    assert loaded_as(model).lora_modules == family.expected_lora_modules()
    said = capsys.readouterr().err
    adapted = said.split("LoRA on ", 1)[1].split("; left out: ")[0]
    assert set(family.expected_lora_modules()) <= set(re.findall(r"[\w.]+", adapted))
    assert lora_blocks(model) == family.lora_blocks
    assert all(f" in {count} block" in adapted for count in family.lora_blocks.values())
    left_out = said.split("; left out: ", 1)[1]
    assert "lm_head (the output layer" in left_out
    assert ("(the experts' router: it stays as loaded" in left_out) == ("experts" in family.lora_blocks)

    # prepare: the default system prompt survives in every prompt, kept or folded (said), and the prompt ends where
    # the assistant's turn begins
    dataset = prepare_dataset(ROWS, tokenizer=tokenizer)
    said = capsys.readouterr().err
    prompt = render_prompt(tokenizer, dataset[0]["prompt"])
    assert REASONING_SYSTEM_PROMPT in prompt and ROWS[0]["question"] in prompt
    assert prompt.endswith(family.generation_prompt)
    assert (FOLD_LINE in said) == (family.system != "kept")
    assert [m["role"] for m in dataset[0]["prompt"]] == (["system", "user"] if family.system == "kept" else ["user"])

    # train: two steps through TRL, which renders the prompts exactly as grpo-lite does: every prompt it asks the model
    # is one of the dataset's as grpo-lite renders it
    with prompts_trl_generates_from(model) as asked:
        result = train(model, tokenizer, dataset, [characters_reward], output_dir=tmp_path / "run", **TWO_STEPS)
    assert result.trainer.state.global_step == 2 and len(result.metrics) == 2
    rendered = [prompt_token_ids(tokenizer, p) for p in dataset["prompt"]]
    assert asked and all(ids in rendered for ids in asked)
    moved = [name for name, p in result.model.named_parameters() if "lora_B" in name and p.abs().sum() > 0]
    assert moved, "LoRA did not move"
    if "experts" in family.lora_blocks:  # the experts' LoRA: under experts, or Granite 4's block_sparse_moe on transformers 4
        assert any("experts" in name or "block_sparse_moe" in name for name in moved), "LoRA on the experts did not move"

    # generate, with the prompt rendered as in training
    texts = generate(result.model, tokenizer, [dataset[0]["prompt"]], max_completion_length=4)
    assert len(texts) == 1 and isinstance(texts[0], str)

    # export both ways; each reloads without grpo-lite and gives the trained model's logits
    ids = prompt_token_ids(tokenizer, dataset[0]["prompt"])
    expected = logits(result.model, ids)
    adapter = export(result.model, tokenizer, tmp_path / "adapter", how="adapter")
    # PEFT would rewrite a mixture of experts' targets as transformers 4 named them, on transformers 5
    # (peft_expert_targets): the adapter reloads as it was saved with that kept out
    with targets_as_named():
        torch.testing.assert_close(logits(AutoPeftModelForCausalLM.from_pretrained(adapter), ids), expected)
    merged = export(result.model, tokenizer, tmp_path / "merged", how="merged_16bit")
    reloaded = AutoModelForCausalLM.from_pretrained(merged)
    assert not any("lora" in name for name, _ in reloaded.named_parameters())
    torch.testing.assert_close(logits(reloaded, ids), expected, atol=1e-4, rtol=1e-4)
