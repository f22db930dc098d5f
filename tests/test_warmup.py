"""A format warm-up before GRPO, as Unsloth's Qwen3 (4B) GRPO notebook does it: a short SFT on formatted examples,
on the same model and LoRA adapter, then GRPO."""

import pytest
import torch

from grpo_lite import prepare_dataset, train, warmup_format
from grpo_lite.training.warmup import WarmupError

SYSTEM = "Think, then answer: <reasoning>...</reasoning><answer>...</answer>"


def _examples(n=6):
    # the notebook's Messages column: system, user, and the assistant turn in the format the rewards check
    return [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"What is {i} + {i}?"},
             {"role": "assistant", "content": f"<reasoning>{i} and {i} make {2 * i}</reasoning><answer>{2 * i}</answer>"}]
            for i in range(n)]


def _lora(model):
    return {name: p.detach().clone() for name, p in model.named_parameters() if "lora_" in name}


def _loss(model, tokenizer, examples):
    """The mean next-token loss over the examples' chat texts."""
    model.eval()
    with torch.no_grad():
        losses = []
        for messages in examples:
            ids = tokenizer.apply_chat_template(messages, tokenize=True, return_tensors="pt", return_dict=True)["input_ids"]
            losses.append(model(input_ids=ids, labels=ids).loss.item())
    return sum(losses) / len(losses)


def length_reward(completions, **kwargs):
    return [len(c[0]["content"]) % 3 / 2 for c in completions]


def test_a_warm_up_trains_the_adapter_and_grpo_follows_on_the_same_model(tiny_model, tmp_path):
    model, tokenizer = tiny_model
    examples = _examples()
    before, loss_before = _lora(model), _loss(model, tokenizer, examples)
    result = warmup_format(model, tokenizer, examples, output_dir=tmp_path / "warmup", max_steps=2, warmup_steps=0,
                           learning_rate=1e-2)
    assert result.trainer.state.global_step == 2 and len(result.losses) == 2
    after = _lora(model)
    assert any(not torch.equal(before[name], after[name]) for name in before)  # the adapter moved
    assert _loss(model, tokenizer, examples) < loss_before  # towards the examples
    assert all(p.requires_grad for name, p in model.named_parameters() if "lora_" in name)

    dataset = prepare_dataset([{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(4)], tokenizer=tokenizer)
    grpo = train(model, tokenizer, dataset, [length_reward], preset="cpu-smoke", output_dir=tmp_path / "grpo", dashboard=False,
                 max_steps=1, warmup_steps=0, num_generations=4, max_completion_length=8)
    assert [m["step"] for m in grpo.metrics if "loss" in m] == [1]
    assert any(not torch.equal(after[name], p) for name, p in _lora(model).items() if name in after)  # the same adapter trained


def test_prompt_completion_rows_and_the_notebooks_messages_column_are_examples(tiny_model, tmp_path):
    model, tokenizer = tiny_model
    rows = [{"prompt": [{"role": "user", "content": f"What is {i} + {i}?"}],
             "completion": [{"role": "assistant", "content": f"<answer>{2 * i}</answer>"}]} for i in range(3)]
    assert warmup_format(model, tokenizer, rows, output_dir=tmp_path / "a", max_steps=1).trainer.state.global_step == 1
    rows = [{"Messages": messages} for messages in _examples(3)]
    assert warmup_format(model, tokenizer, rows, output_dir=tmp_path / "b", max_steps=1).trainer.state.global_step == 1


@pytest.mark.parametrize("examples, message", [
    ([], "no examples"),
    ([[{"role": "user", "content": "2 + 2?"}]], "need an assistant turn"),
    ([{"question": "2 + 2?"}], "give messages"),
])
def test_examples_it_cannot_train_on_are_refused_with_what_they_need(tiny_model, tmp_path, examples, message):
    model, tokenizer = tiny_model
    with pytest.raises(WarmupError, match=message):
        warmup_format(model, tokenizer, examples, output_dir=tmp_path)
