"""Faults injected into real runs of the tiny model through grpo_lite.train: each run ends with a message
naming the fix, its last good checkpoint loads and resumes, and metrics.jsonl keeps every step once."""

import asyncio
import errno
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

from grpo_lite import LiveDashboard, prepare_dataset, read_metrics, train
from grpo_lite.guards import out_of_memory as oom
from grpo_lite.guards.disk import DiskFull
from grpo_lite.guards.nan import NaNDetected
from grpo_lite.guards.out_of_memory import OutOfMemory
from grpo_lite.guards.user_code import RewardFailure, guard
from grpo_lite.machine import stack
from grpo_lite.machine.device import GPU
from grpo_lite.run.callbacks import RunCallback
from grpo_lite.run.resume import latest_checkpoint
from rewards import check_rewards

RUN = dict(preset="cpu-smoke", num_generations=4, per_device_train_batch_size=4, max_completion_length=8,
           save_steps=2, dashboard=False)


def length_reward(completions, **kwargs):
    return [len(c[0]["content"]) / 10 for c in completions]


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The tiny model's matrices gain nothing from a second thread, and on a shared 2-core machine its
    waiting makes each step ~15x slower (1.1 s against 17 s for 4 steps)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def arithmetic():
    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(12)]
    return prepare_dataset(rows, system_prompt=None)


class FaultAt(RunCallback):
    """A callback that, once ``train`` attaches it, makes the trainer fail once, while it computes ``step``."""

    def __init__(self, step: int):
        self.step = step
        self.trainer = None
        self.fired = False

    def now(self) -> bool:
        if self.fired or self.trainer.state.global_step != self.step - 1:
            return False
        self.fired = True
        return True


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


class Checkpointing(TrainerCallback):
    """Whether the model trained each step with activation checkpointing on."""

    def __init__(self):
        self.steps = []

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.steps.append(model.is_gradient_checkpointing)


def assert_resumes(model, tokenizer, dataset, output_dir, max_steps, rewards=(length_reward,), **changes) -> tuple[str, str]:
    """The last good checkpoint loads (finite weights), the run resumes from it to ``max_steps`` with ``changes`` (the
    advice a fault gave), and every step is in metrics.jsonl once. Returns what survived and what was lost, for the fault
    table."""
    checkpoint = latest_checkpoint(output_dir)
    assert checkpoint is not None, "no whole checkpoint was kept"
    assert all(torch.isfinite(w).all() for w in lora_weights(checkpoint).values())
    logged = [r["step"] for r in read_metrics(output_dir)]
    assert logged == list(range(1, len(logged) + 1))
    checkpointing = Checkpointing()
    result = train(model, tokenizer, dataset, list(rewards), output_dir=output_dir, resume=True, max_steps=max_steps,
                   **{**RUN, "callbacks": [checkpointing], **changes})
    assert result.trainer.state.global_step == max_steps
    asked = any(changes.get(name) for name in ("gradient_checkpointing", "activation_checkpointing"))
    assert checkpointing.steps and set(checkpointing.steps) == {asked}, (changes, checkpointing.steps)
    assert [r["step"] for r in read_metrics(output_dir)] == list(range(1, max_steps + 1))
    redone = [step for step in logged if step > int(checkpoint.name.split("-")[1])]
    lost = (f"steps {redone[0]}-{redone[-1]} trained again" if len(redone) > 1
            else f"step {redone[0]} trained again" if redone else "none")
    return f"yes: {checkpoint.name} resumed to step {max_steps}; metrics.jsonl has steps 1-{max_steps} once", lost


def record(fault_table, fault: str, injected: str, error: BaseException, outcome: tuple[str, str]) -> None:
    survived, lost = outcome
    fault_table.append(f"| {fault} | {injected} | `{type(error).__name__}` | {survived} | {lost} |")


def test_a_nan_loss_stops_without_saving_and_the_last_good_checkpoint_resumes(tiny_model, arithmetic, tmp_path, fault_table):
    model, tokenizer = tiny_model
    dashboard = LiveDashboard(view="log")
    with pytest.raises(NaNDetected) as stopped:
        train(model, tokenizer, arithmetic, [length_reward], output_dir=tmp_path, max_steps=4, callbacks=[NaNLossAt(step=3)],
              **{**RUN, "dashboard": dashboard})
    message = str(stopped.value)
    assert "training stopped at step 3: the gradient norm is nan" in message
    assert "lower learning_rate" in message and "checkpoint-2, is kept" in message
    assert [p.name for p in tmp_path.glob("checkpoint-*")] == ["checkpoint-2"]
    assert not (tmp_path / "adapter_model.safetensors").exists()  # nothing was saved over the last good checkpoint
    assert all(torch.isfinite(p).all() for n, p in model.named_parameters() if "lora" in n)  # the update was dropped
    last = read_metrics(tmp_path)[-1]
    assert last["step"] == 3 and last["loss"] is None  # NaN is written as null: the log shows it
    assert dashboard.frame(dashboard.trainer.state).header["stopping"].startswith("NaN at step 3")
    assert "nan" in [w.rule for w in dashboard.health.warnings if w.step == 3]

    outcome = assert_resumes(model, tokenizer, arithmetic, tmp_path, max_steps=4)
    record(fault_table, "NaN loss", "the loss of step 3 times NaN", stopped.value, outcome)


NAP_S = 60  # far past the 1 s limit: a nap still running when train() returns shows it did not wait for it


def napping_reward(nap_calls, woke):
    """A reward that, on the calls numbered in ``nap_calls``, sleeps as a hung HTTP call or input() would."""
    calls = []

    def napping_reward(completions, **kwargs):
        calls.append(1)
        if len(calls) in nap_calls:
            time.sleep(NAP_S)
            woke.append(len(calls))
        return [0.5] * len(completions)

    return napping_reward


def async_napping_reward(nap_calls, woke):
    """The same as an ``async`` reward whose nap blocks its event loop (a sync call inside ``async def``)."""
    calls = []

    async def napping_reward(completions, **kwargs):
        calls.append(1)
        if len(calls) in nap_calls:
            time.sleep(NAP_S)
            woke.append(len(calls))
        await asyncio.sleep(0)
        return [0.5] * len(completions)

    return napping_reward


@pytest.mark.parametrize("make_reward", [napping_reward, async_napping_reward], ids=["sync", "async"])
def test_a_reward_that_hangs_scores_none_and_repeated_hangs_stop_with_a_checkpoint(make_reward, tiny_model, arithmetic,
                                                                                   tmp_path, capsys, fault_table):
    model, tokenizer = tiny_model
    woke = []
    rewards = [length_reward, make_reward({2, 3, 4}, woke)]
    with pytest.raises(RewardFailure) as stopped:
        train(model, tokenizer, arithmetic, rewards, output_dir=tmp_path, max_steps=6, reward_timeout=1, **RUN)
    message = str(stopped.value)
    assert "'napping_reward' failed 3 calls in a row; training stopped at step 4" in message
    assert "did not return within reward_timeout=1 s" in message and "raise reward_timeout" in message
    assert "in napping_reward" in message and "time.sleep(NAP_S)" in message  # the stack where it was stuck
    assert woke != [2, 3, 4]  # training went on without waiting for the naps to end
    records = read_metrics(tmp_path)
    assert [r["rewards/napping_reward/mean"] for r in records] == [0.5, None, None, None]  # hung batches scored None
    assert (tmp_path / "checkpoint-4" / "adapter_model.safetensors").exists()
    # said once with its step and the batch it hung on (a hang names no row: the whole batch was being scored)
    assert "reward function 'napping_reward' failed at step 2 on a batch of 4 completions (the first: 'What is" in (
        capsys.readouterr().err)

    outcome = assert_resumes(model, tokenizer, arithmetic, tmp_path, max_steps=5,
                             rewards=[length_reward, make_reward(set(), woke)])
    kind = "an async" if make_reward is async_napping_reward else "a"
    record(fault_table, f"hung reward ({'async' if kind == 'an async' else 'sync'})",
           f"{kind} reward sleeping {NAP_S} s at steps 2-4, reward_timeout=1", stopped.value, outcome)


@pytest.mark.parametrize("bad", [float("inf"), float("nan")], ids=["inf", "nan"])
def test_a_non_finite_score_is_a_reward_failure_as_in_the_reward_lab(bad):
    # inf would make a group's advantages NaN; a NaN the function computed would be read by TRL as None and
    # silently drop its completion. The lab refuses both with the same words.
    def overflowing_reward(completions, **kwargs):
        return [1.0, bad]

    guarded = guard(overflowing_reward)
    assert guarded(completions=["a", "b"]) == [None, None]
    lab = check_rewards([overflowing_reward], [{"completion": "a"}, {"completion": "b"}])
    assert guarded.consecutive_failures == 1 and not lab.ok
    assert f"returned {bad!r} for completion 1; return a finite float" in guarded.last_error
    assert lab.problems[0].message in guarded.last_error


def test_a_save_that_fills_the_disk_keeps_the_previous_checkpoint_and_says_what_it_needs(tiny_model, arithmetic, tmp_path,
                                                                                          monkeypatch, fault_table):
    # The save is patched, not the disk: the optimizer file of checkpoint-4 gets 1 KB out, then ENOSPC.
    real_save, failed = torch.save, []

    def save_until_the_disk_fills(obj, f, *args, **kwargs):
        if "checkpoint-4" in str(f) and not failed:
            failed.append(f)
            Path(f).write_bytes(bytes(1024))
            raise OSError(errno.ENOSPC, "No space left on device", str(f))
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save_until_the_disk_fills)
    model, tokenizer = tiny_model
    with pytest.raises(DiskFull) as full:  # save_total_limit=1: the Trainer would delete checkpoint-2 after a whole save
        train(model, tokenizer, arithmetic, [length_reward], output_dir=tmp_path, max_steps=6, save_total_limit=1, **RUN)
    message = str(full.value)
    assert full.value.errno == errno.ENOSPC and "is full" in message and "GB free) at step 4" in message
    assert "The partial checkpoint-4" in message and "was deleted" in message
    assert "A checkpoint of this run takes" in message and "resume from checkpoint-2, which is whole" in message
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-2"]
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2, 3, 4]

    outcome = assert_resumes(model, tokenizer, arithmetic, tmp_path, max_steps=6)
    record(fault_table, "full disk", "ENOSPC after 1 KB of checkpoint-4's optimizer file, save_total_limit=1", full.value,
           outcome)


CUDA_MESSAGE = ("CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity of 14.74 GiB of which "
                "1.00 MiB is free. Including non-PyTorch memory, this process has 14.73 GiB memory in use.")


class OutOfMemoryInGeneration(FaultAt):
    """model.generate fails as CUDA's allocator does when the KV cache does not fit (no GPU here to fill)."""

    def attach(self, trainer):
        self.trainer = trainer
        model_generate = trainer.model.generate

        def generate(*args, **kwargs):  # named as the model's own: TRL before 0.24 has no generation frame of its own
            if self.now():
                raise torch.cuda.OutOfMemoryError("CUDA out of memory.")
            return model_generate(*args, **kwargs)

        trainer.model.generate = generate


class OutOfMemoryInBackward(FaultAt):
    """A LoRA weight's gradient hook fails as CUDA's allocator does in backward (no GPU here to fill)."""

    def attach(self, trainer):
        self.trainer = trainer
        weight = next(p for n, p in trainer.model.named_parameters() if "lora_B" in n)

        def out_of_memory_in_backward(grad):
            if self.now():
                raise torch.cuda.OutOfMemoryError(CUDA_MESSAGE)
            return grad

        weight.register_hook(out_of_memory_in_backward)


def test_out_of_memory_in_generation_saves_the_steps_done_and_names_the_fix(tiny_model, arithmetic, tmp_path, fault_table):
    model, tokenizer = tiny_model
    with pytest.raises(OutOfMemory) as ran_out:
        train(model, tokenizer, arithmetic, [length_reward], output_dir=tmp_path, max_steps=5,
              callbacks=[OutOfMemoryInGeneration(step=4)], **RUN)
    error = ran_out.value
    assert isinstance(error, torch.cuda.OutOfMemoryError) and isinstance(error.__cause__, torch.cuda.OutOfMemoryError)
    assert error.phase == "generation" and error.step == 3
    message = str(error)
    assert "out of GPU memory in generation during step 4, after 3 steps were done" in message
    assert "KV cache" in message and "No CUDA GPU is visible" in message  # no card on this machine
    assert error.nearest and "Nearest config the planner estimates smaller" in message
    assert oom.as_calls(error.nearest) in message
    assert "The steps done are in checkpoint-3, which is whole" in message
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2, 3]

    outcome = assert_resumes(model, tokenizer, arithmetic, tmp_path, max_steps=5)
    record(fault_table, "out of GPU memory in generation", "`torch.cuda.OutOfMemoryError` from `model.generate` at step 4",
           error, outcome)


@pytest.mark.seam
def test_out_of_memory_in_backward_compares_the_planner_with_the_card(tiny_model, arithmetic, tmp_path, monkeypatch,
                                                                       fault_table):
    monkeypatch.setattr(oom, "this_gpu", lambda: GPU("Tesla T4", 14.74))  # the device memory of a GPU this machine lacks
    model, tokenizer = tiny_model
    with pytest.raises(OutOfMemory) as ran_out:
        train(model, tokenizer, arithmetic, [length_reward], output_dir=tmp_path, max_steps=4,
              callbacks=[OutOfMemoryInBackward(step=3)], **RUN)
    error = ran_out.value
    message = str(error)
    assert error.phase == "backward" and "out of GPU memory in backward during step 3" in message
    assert f"The planner's estimate for this run: {error.plan.total_gb:.2f} GB" in message
    assert "on Tesla T4 (14.74 GB); the run needed about 14.74 GB" in message
    assert "The planner underestimated this run" in message  # a tiny model "needing" a whole T4
    checkpointing = stack.field_name("gradient_checkpointing")  # activation_checkpointing from transformers 5.23
    assert error.phase_fixes == {checkpointing: True}  # cpu-smoke runs without it
    assert "For backward, first try this, which keeps the batch of each optimizer step: " \
           f"train(..., {checkpointing}=True)" in message
    assert set(error.nearest) <= {"per_device_train_batch_size", "num_generations", "max_completion_length", "lora_rank", "load_in_4bit"}
    assert "checkpoint-2, which is whole" in message  # the regular save; the steps done are the same

    outcome = assert_resumes(model, tokenizer, arithmetic, tmp_path, max_steps=4, **error.phase_fixes)  # trains checkpointed
    record(fault_table, "out of GPU memory in backward", "`torch.cuda.OutOfMemoryError` from a LoRA gradient hook at step 3",
           error, outcome)


def test_the_command_line_takes_a_reward_timeout_and_ends_a_faulted_run_with_its_message(tmp_path, monkeypatch, capsys):
    from grpo_lite.launch.cli import main

    (tmp_path / "sleepy.py").write_text("import time\n\ndef dozing_reward(completions, **kwargs):\n"
                                        "    time.sleep(60)\n    return [0.0] * len(completions)\n")
    (tmp_path / "run.yaml").write_text(
        "model: tiny\ndataset: {builtin: arithmetic}\nrewards: [soft_xml_format_reward, 'sleepy:dozing_reward']\n"
        "preset: cpu-smoke\noverrides: {max_steps: 5, num_generations: 4, per_device_train_batch_size: 4, "
        "max_completion_length: 8}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["train", "run.yaml", "--output-dir", "out", "--reward-timeout", "1"]) == 1
    err = capsys.readouterr().err
    assert "grpo-lite: reward function 'dozing_reward' failed 3 calls in a row; training stopped at step 3" in err
    assert "did not return within reward_timeout=1 s" in err
    assert [r["step"] for r in read_metrics(tmp_path / "out")] == [1, 2, 3]
