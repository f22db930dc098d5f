"""Faults injected into real runs of the tiny model through grpo_lite.train: each run ends with a message
naming the fix, its last good checkpoint loads and resumes, and metrics.jsonl keeps every step once."""

import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

from grpo_lite import prepare_dataset, read_metrics, train
from grpo_lite.nan_guard import NaNDetected

RUN = dict(preset="cpu-smoke", num_generations=4, per_device_train_batch_size=4, max_completion_length=8,
           save_steps=2, dashboard=False)


def length_reward(completions, **kwargs):
    return [len(c[0]["content"]) / 10 for c in completions]


@pytest.fixture
def arithmetic():
    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(12)]
    return prepare_dataset(rows, system_prompt=None)


class FaultAt(TrainerCallback):
    """A callback that, once ``train`` attaches it, makes the trainer fail while it computes ``step``."""

    def __init__(self, step: int):
        self.step = step
        self.trainer = None

    def now(self) -> bool:
        return self.trainer.state.global_step == self.step - 1


class NaNLossAt(FaultAt):
    """The loss of one step becomes NaN, as an overflowing forward pass makes it."""

    def attach(self, trainer):
        self.trainer = trainer
        compute_loss = trainer.compute_loss

        def nan_at_step(*args, **kwargs):
            loss = compute_loss(*args, **kwargs)
            return loss * float("nan") if self.now() else loss

        trainer.compute_loss = nan_at_step


def lora_weights(path):
    return {name: tensor for name, tensor in load_file(str(path / "adapter_model.safetensors")).items() if "lora" in name}


def assert_resumes(model, tokenizer, dataset, output_dir, max_steps, rewards=(length_reward,)):
    """The last good checkpoint loads (finite weights), the run resumes from it to ``max_steps``, and every
    step is in metrics.jsonl once."""
    checkpoints = sorted(output_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    assert checkpoints, "no checkpoint was kept"
    assert all(torch.isfinite(w).all() for w in lora_weights(checkpoints[-1]).values())
    result = train(model, tokenizer, dataset, list(rewards), output_dir=output_dir, resume=True, max_steps=max_steps, **RUN)
    assert result.trainer.state.global_step == max_steps
    assert [r["step"] for r in read_metrics(output_dir)] == list(range(1, max_steps + 1))


def test_a_nan_loss_stops_without_saving_and_the_last_good_checkpoint_resumes(tiny_model, arithmetic, tmp_path):
    model, tokenizer = tiny_model
    fault = NaNLossAt(step=3)
    with pytest.raises(NaNDetected) as stopped:
        train(model, tokenizer, arithmetic, [length_reward], output_dir=tmp_path, max_steps=4, callbacks=[fault], **RUN)
    message = str(stopped.value)
    assert "training stopped at step 3: the gradient norm is nan" in message
    assert "lower learning_rate" in message and "checkpoint-2, is kept" in message
    assert [p.name for p in tmp_path.glob("checkpoint-*")] == ["checkpoint-2"]
    assert not (tmp_path / "adapter_model.safetensors").exists()  # nothing was saved over the last good checkpoint
    assert all(torch.isfinite(p).all() for n, p in model.named_parameters() if "lora" in n)  # the update was dropped
    last = read_metrics(tmp_path)[-1]
    assert last["step"] == 3 and last["loss"] is None  # NaN is written as null: the log shows it

    assert_resumes(model, tokenizer, arithmetic, tmp_path, max_steps=4)

