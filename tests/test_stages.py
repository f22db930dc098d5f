import pytest
import torch

from grpo_lite import prepare_dataset, read_metrics
from grpo_lite.training.stages import Stage, train_stages

QUICK = dict(preset="cpu-smoke", num_generations=4, per_device_train_batch_size=4, max_completion_length=12, dashboard=False)


def length_reward(completions, **kwargs):
    return [len(c[0]["content"]) / 10 for c in completions]


def digit_reward(completions, answer, **kwargs):
    return [float(a in c[0]["content"]) for c, a in zip(completions, answer)]


def test_stages_train_the_same_lora_weights_and_continue_the_history(tiny_model, tmp_path, capsys):
    model, tokenizer = tiny_model
    dataset = prepare_dataset([{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(12)], system_prompt=None)
    lora = {n: p for n, p in model.named_parameters() if "lora_B" in n}
    start = {n: p.detach().clone() for n, p in lora.items()}
    # the second stage keeps KL on: it gets a fresh reference copy of the adapter the first stage trained
    stages = [Stage(length_reward, max_steps=2, name="format"), Stage([length_reward, digit_reward], max_steps=2),
              Stage(digit_reward, max_steps=1, beta=0.0)]

    results = train_stages(stages, model, tokenizer, dataset, output_dir=tmp_path, **QUICK)

    assert [r.output_dir.name for r in results] == ["1-format", "2-stage2", "3-stage3"]
    assert "stage 'stage2': 2 steps with rewards length_reward, digit_reward" in capsys.readouterr().err
    assert results[2].model is results[1].model is results[0].model
    assert any(not torch.equal(start[n], p) for n, p in lora.items()), "the stages did not train the given LoRA weights"
    assert [r["step"] for r in read_metrics(tmp_path / "1-format")] == [1, 2]
    assert [r["step"] for r in read_metrics(tmp_path / "2-stage2")] == [1, 2]
    history = read_metrics(tmp_path)
    assert [(r["step"], r["stage"], r["stage_step"]) for r in history] == [
        (1, "format", 1), (2, "format", 2), (3, "stage2", 1), (4, "stage2", 2), (5, "stage3", 1)]
    assert "rewards/digit_reward/mean" in history[-1] and "rewards/digit_reward/mean" not in history[0]
    assert history[3]["kl"] is not None and history[0]["kl"] is not None
    assert history[-1]["kl"] is None  # the stage's own beta=0.0 applied


def test_empty_or_stepless_stages_are_refused(tiny_model, tmp_path):
    model, tokenizer = tiny_model
    with pytest.raises(ValueError, match="no stages"):
        train_stages([], model, tokenizer, None, output_dir=tmp_path)
    with pytest.raises(ValueError, match="max_steps=0"):
        Stage(length_reward, max_steps=0)
