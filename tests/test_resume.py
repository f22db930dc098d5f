"""A CLI run killed with SIGKILL after a checkpoint resumes with --resume: every step logged once, none lost."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_lite import read_metrics
from grpo_lite.run.config import make_config
from grpo_lite.run.record import RunRecord, read_run
from grpo_lite.run.resume import check_resume
from grpo_lite.run.settings import ConfigError, LoadSettings, RunSettings

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINT_WAIT_S = 600  # a guard against a hung run, not a speed check


def cli(output_dir: Path, *settings: str, resume: bool = False) -> list[str]:
    command = [sys.executable, "-m", "grpo_lite", "train", "examples/tiny_cpu.yaml", "--output-dir", str(output_dir),
               "--set", "save_steps=2", *[arg for s in settings for arg in ("--set", s)]]
    return command + (["--resume"] if resume else [])


def kill_after_first_checkpoint(output_dir: Path) -> float:
    """Start a run, SIGKILL it once a checkpoint is complete, and return the time of the kill."""
    run = subprocess.Popen(cli(output_dir, "max_steps=8"), cwd=ROOT, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + CHECKPOINT_WAIT_S
    while not saved_steps(output_dir):
        assert run.poll() is None, f"the run ended (rc {run.returncode}) before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint was saved"
        time.sleep(0.2)
    os.killpg(run.pid, signal.SIGKILL)
    assert run.wait() == -signal.SIGKILL
    return time.time()


def saved_steps(output_dir: Path) -> list[int]:
    """Steps of the checkpoints saved whole (their trainer_state.json, written last, parses)."""
    steps = []
    for state in output_dir.glob("checkpoint-*/trainer_state.json"):
        try:
            steps.append(json.loads(state.read_text())["global_step"])
        except ValueError:
            continue
    return sorted(steps)


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("killed")
    return output_dir, kill_after_first_checkpoint(output_dir)


def test_a_resume_with_changed_settings_is_refused_with_a_diff(killed_run):
    output_dir, _ = killed_run
    before = (output_dir / "run.yaml").read_text()
    refused = subprocess.run(cli(output_dir, "max_steps=8", "num_generations=2", "learning_rate=0.01", resume=True),
                             cwd=ROOT, capture_output=True, text=True)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "cannot resume" in refused.stderr
    assert "num_generations: 4 -> 2" in refused.stderr and "learning_rate: 0.001 -> 0.01" in refused.stderr
    assert (output_dir / "run.yaml").read_text() == before


def test_killed_run_resumes_each_step_once_and_extends_max_steps(killed_run):
    output_dir, killed_at = killed_run
    resumed_from = saved_steps(output_dir)[-1]  # the run may have gone on past checkpoint-2 before the kill
    resumed = subprocess.run(cli(output_dir, "max_steps=10", resume=True), cwd=ROOT, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    records = read_metrics(output_dir)
    assert [r["step"] for r in records] == list(range(1, 11))
    checkpoint_step = resumed_from
    # steps up to the checkpoint were kept from the killed run, the rest were trained after the resume
    assert all(r["time"] < killed_at for r in records[:checkpoint_step])
    assert all(r["time"] > killed_at for r in records[checkpoint_step:])
    assert json.loads((output_dir / "checkpoint-10" / "trainer_state.json").read_text())["global_step"] == 10
    assert read_run(output_dir).grpo_config["max_steps"] == 10


def test_check_resume_names_each_changed_field(tmp_path):
    from grpo_lite.run.config import config_to_dict

    def record(model, lora_rank, rewards, config):
        settings = RunSettings(model=model, rewards=rewards, load=LoadSettings(lora_rank=lora_rank))
        return RunRecord(settings, {"backend": "cpu"}, config_to_dict(config))

    first = make_config("cpu-smoke", output_dir=tmp_path, max_steps=4)
    record("tiny", 8, ["a"], first).write(tmp_path / "run.yaml")
    longer = make_config("cpu-smoke", output_dir=tmp_path, max_steps=40)
    check_resume(tmp_path / "run.yaml", longer, record("tiny", 8, ["a"], longer))
    changed = make_config("cpu-smoke", output_dir=tmp_path, max_steps=4, beta=0.0)
    with pytest.raises(ConfigError) as error:
        check_resume(tmp_path / "run.yaml", changed, record("other", 16, ["a", "b"], changed))
    message = str(error.value)
    for line in ("model: 'tiny' -> 'other'", "lora_rank: 8 -> 16", "rewards: ['a'] -> ['a', 'b']", "beta: "):
        assert line in message


def test_check_resume_returns_every_other_change_it_lets_through(tmp_path):
    from grpo_lite.run.config import config_to_dict

    def record(rows, fingerprint, timeout, config):
        settings = RunSettings(model="tiny", rewards=["a"], load=LoadSettings(lora_rank=8), reward_timeout=timeout)
        return RunRecord(settings, {"backend": "cpu", "rows": rows, "rows_fingerprint": fingerprint}, config_to_dict(config))

    first = make_config("cpu-smoke", output_dir=tmp_path, max_steps=4)
    record(12, "aaaa", 600.0, first).write(tmp_path / "run.yaml")
    assert check_resume(tmp_path / "run.yaml", first, record(12, "aaaa", 600.0, first)) == []
    again = make_config("cpu-smoke", output_dir="elsewhere/../" + str(tmp_path), max_steps=40, save_steps=3)
    assert check_resume(tmp_path / "run.yaml", again, record(16, "bbbb", 60.0, again)) == [
        "reward_timeout: 600.0 -> 60.0", "rows: 12 -> 16", "rows_fingerprint: 'aaaa' -> 'bbbb'", "max_steps: 4 -> 40",
        "save_steps: 5 -> 3"]


def _checkpoint(folder: Path, *parts: str, state: str = '{"global_step": 2}') -> None:
    folder.mkdir()
    for name in parts:
        (folder / name).write_bytes(b"x")
    (folder / "trainer_state.json").write_text(state)


def test_resume_takes_the_newest_whole_checkpoint_and_says_why_it_skipped_the_others(tmp_path, capsys):
    from grpo_lite.run.resume import latest_checkpoint

    assert latest_checkpoint(tmp_path) is None
    whole = ("adapter_model.safetensors", "optimizer.pt", "scheduler.pt")
    _checkpoint(tmp_path / "checkpoint-2", *whole)
    _checkpoint(tmp_path / "checkpoint-4", *whole, state='{"global_st')  # killed while writing it
    _checkpoint(tmp_path / "checkpoint-6", "adapter_model.safetensors", "scheduler.pt")  # optimizer.pt removed
    _checkpoint(tmp_path / "checkpoint-8", "optimizer.pt", "scheduler.pt")  # no weights
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoint-2"
    said = capsys.readouterr().err
    assert "skipping checkpoint-8: it has no the weights" in said
    assert "skipping checkpoint-6: it has no optimizer.pt" in said
    assert "skipping checkpoint-4: it has no a readable trainer_state.json" in said
    assert (tmp_path / "checkpoint-4").exists()  # skipped, not deleted


def test_a_resume_passes_over_a_checkpoint_without_its_optimizer_and_rotation_keeps_a_whole_one(tmp_path, capsys):
    """The Trainer would resume from checkpoint-4 without optimizer.pt and reset Adam without a word; its rotation
    would then count the broken checkpoint among the ones it keeps."""
    from grpo_lite import load_builtin, load_model, prepare_dataset, train
    from grpo_lite.model.tiny import build_tiny_model
    from grpo_lite.run.resume import saved_whole

    model, tokenizer = load_model(str(build_tiny_model(tmp_path / "model")), lora_rank=4)
    dataset = prepare_dataset(load_builtin("arithmetic")[:16], system_prompt=None)
    quick = dict(preset="cpu-smoke", num_generations=4, per_device_train_batch_size=4, max_completion_length=8,
                 save_steps=2, save_total_limit=2, dashboard=False)
    out = tmp_path / "run"
    train(model, tokenizer, dataset, "numeric_correctness_reward", output_dir=out, max_steps=4, **quick)
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    (out / "checkpoint-4" / "optimizer.pt").unlink()
    capsys.readouterr()
    train(model, tokenizer, dataset, "numeric_correctness_reward", output_dir=out, max_steps=6, resume=True, **quick)
    said = capsys.readouterr().err
    assert "skipping checkpoint-4: it has no optimizer.pt" in said and "resuming from checkpoint-2" in said
    assert "kept the incomplete checkpoint-4 as partial-checkpoint-4" in said
    assert (out / "partial-checkpoint-4" / "adapter_model.safetensors").exists()  # nothing the user had is deleted
    checkpoints = sorted(out.glob("checkpoint-*"))
    assert [p.name for p in checkpoints] == ["checkpoint-4", "checkpoint-6"] and all(saved_whole(p) for p in checkpoints)
    assert [row["step"] for row in read_metrics(out)] == list(range(1, 7))


def test_a_run_resumed_on_other_rows_says_each_change_and_records_it(tmp_path, capsys):
    from grpo_lite import load_builtin, load_model, prepare_dataset, train
    from grpo_lite.model.tiny import build_tiny_model

    folder = build_tiny_model(tmp_path / "model")
    rows = prepare_dataset(load_builtin("arithmetic")[:16], system_prompt=None)
    quick = dict(preset="cpu-smoke", num_generations=4, per_device_train_batch_size=4, max_completion_length=8, save_steps=1,
                 dashboard=False)
    out = tmp_path / "run"
    model, tokenizer = load_model(str(folder), lora_rank=4)
    train(model, tokenizer, rows, "numeric_correctness_reward", output_dir=out, max_steps=1, **quick)
    first = read_run(out).chosen
    assert first["rows"] == 16 and len(first["rows_fingerprint"]) == 16 and "resumes" not in first
    other = prepare_dataset(load_builtin("arithmetic")[16:36], system_prompt=None)
    model, tokenizer = load_model(str(folder), lora_rank=4)
    capsys.readouterr()
    train(model, tokenizer, other, "numeric_correctness_reward", output_dir=out, max_steps=2, resume=True, **quick)
    said = capsys.readouterr().err
    changes = ["rows: 16 -> 20", f"rows_fingerprint: {first['rows_fingerprint']!r} -> {read_run(out).chosen['rows_fingerprint']!r}",
               "max_steps: 1 -> 2"]
    assert (f"resuming checkpoint-1 with changes since run.yaml (old -> new) (other training rows: the steps from here "
            f"train on them): {'; '.join(changes)}") in said
    assert read_run(out).chosen["resumes"] == [{"checkpoint": "checkpoint-1", "changed": changes}]
    assert [row["step"] for row in read_metrics(out)] == [1, 2]


def _length_reward(completions, **kwargs):
    return [len(completion[0]["content"]) / 10 for completion in completions]


@pytest.fixture
def two_steps(tmp_path):
    """A run of 2 steps with a checkpoint after each, trained by a reward that varies (its LoRA weights move)."""
    from grpo_lite import load_builtin, load_model, prepare_dataset, train
    from grpo_lite.model.tiny import build_tiny_model

    folder = build_tiny_model(tmp_path / "model")
    rows = prepare_dataset(load_builtin("arithmetic")[:16], system_prompt=None)
    quick = dict(preset="cpu-smoke", num_generations=4, per_device_train_batch_size=4, max_completion_length=8, save_steps=1,
                 dashboard=False)
    model, tokenizer = load_model(str(folder), lora_rank=4)
    train(model, tokenizer, rows, _length_reward, output_dir=tmp_path / "run", max_steps=2, **quick)
    return folder, rows, quick, tmp_path / "run"


def _adapter(model) -> dict:
    from peft import get_peft_model_state_dict

    return {key: value.detach().cpu().clone() for key, value in get_peft_model_state_dict(model).items()}


def _same(saved: dict, held: dict) -> bool:
    import torch

    return saved.keys() == held.keys() and all(torch.equal(saved[key], held[key]) for key in saved)


def test_a_resumed_run_goes_on_from_its_checkpoint_s_trained_weights(two_steps):
    """transformers' Trainer loads only a checkpoint's adapter subfolders once it has one (TRL 1.x's "ref"): the trained
    adapter at the top was left at its initial weights, with the optimizer state of the trained ones."""
    from safetensors.torch import load_file
    from transformers import TrainerCallback

    from grpo_lite import load_model, train

    folder, rows, quick, out = two_steps
    saved = load_file(out / "checkpoint-2" / "adapter_model.safetensors")
    assert any(saved[key].abs().sum() > 0 for key in saved if "lora_B" in key)  # trained: lora_B starts at zero
    seen = []

    class FirstStep(TrainerCallback):
        def on_step_begin(self, args, state, control, model=None, **kwargs):
            if not seen:
                seen.append((state.global_step, _adapter(model)))

    model, tokenizer = load_model(str(folder), lora_rank=4)
    train(model, tokenizer, rows, _length_reward, output_dir=out, max_steps=3, resume=True, callbacks=[FirstStep()], **quick)
    step, held = seen[0]
    assert step == 2 and _same(saved, held)


def test_a_finished_run_resumed_trains_nothing_and_the_model_takes_its_weights(two_steps, capsys):
    """The Trainer, resumed at max_steps, would train one step past it and rotate a checkpoint out."""
    from safetensors.torch import load_file

    from grpo_lite import load_model, train

    folder, rows, quick, out = two_steps
    files = {path: path.read_bytes() for path in sorted(out.rglob("*")) if path.is_file()}
    model, tokenizer = load_model(str(folder), lora_rank=4)
    capsys.readouterr()
    result = train(model, tokenizer, rows, _length_reward, output_dir=out, max_steps=2, resume=True, **quick)
    assert f"the run in {out} trained its max_steps=2 already (checkpoint-2)" in capsys.readouterr().err
    assert {path: path.read_bytes() for path in sorted(out.rglob("*")) if path.is_file()} == files
    assert _same(load_file(out / "checkpoint-2" / "adapter_model.safetensors"), _adapter(result.model))
