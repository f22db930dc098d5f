"""A CLI run killed with SIGKILL after a checkpoint resumes with --resume: every step logged once, none lost."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_lite import ConfigError, read_metrics
from grpo_lite.config import check_resume, load_run_yaml, make_config

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINT_WAIT_S = 600  # a guard against a hung run, not a speed check


def cli(output_dir: Path, *settings: str, resume: bool = False) -> list[str]:
    command = [sys.executable, "-m", "grpo_lite", "train", "examples/tiny_cpu.yaml", "--output-dir", str(output_dir),
               "--set", "save_steps=2", *[arg for s in settings for arg in ("--set", s)]]
    return command + (["--resume"] if resume else [])


def kill_after_first_checkpoint(output_dir: Path) -> float:
    """Start a run, SIGKILL it once checkpoint-2 is complete, and return the time of the kill."""
    run = subprocess.Popen(cli(output_dir, "max_steps=8"), cwd=ROOT, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + CHECKPOINT_WAIT_S
    while not (output_dir / "checkpoint-2" / "trainer_state.json").exists():
        assert run.poll() is None, f"the run ended (rc {run.returncode}) before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint-2 appeared"
        time.sleep(0.2)
    os.killpg(run.pid, signal.SIGKILL)
    assert run.wait() == -signal.SIGKILL
    return time.time()


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
    resumed = subprocess.run(cli(output_dir, "max_steps=10", resume=True), cwd=ROOT, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    records = read_metrics(output_dir)
    assert [r["step"] for r in records] == list(range(1, 11))
    checkpoint_step = json.loads((output_dir / "checkpoint-2" / "trainer_state.json").read_text())["global_step"]
    # steps up to the checkpoint were kept from the killed run, the rest were trained after the resume
    assert all(r["time"] < killed_at for r in records[:checkpoint_step])
    assert all(r["time"] > killed_at for r in records[checkpoint_step:])
    assert json.loads((output_dir / "checkpoint-10" / "trainer_state.json").read_text())["global_step"] == 10
    assert load_run_yaml(output_dir / "run.yaml")["grpo_config"]["max_steps"] == 10


def test_check_resume_names_each_changed_field(tmp_path):
    from grpo_lite.config import save_run_yaml

    save_run_yaml(tmp_path / "run.yaml", make_config("cpu-smoke", output_dir=tmp_path, max_steps=4), model="tiny",
                  lora_rank=8, rewards=["a"])
    check_resume(tmp_path / "run.yaml", make_config("cpu-smoke", output_dir=tmp_path, max_steps=40),
                 model="tiny", lora_rank=8, rewards=["a"])
    changed = make_config("cpu-smoke", output_dir=tmp_path, max_steps=4, beta=0.0)
    with pytest.raises(ConfigError) as error:
        check_resume(tmp_path / "run.yaml", changed, model="other", lora_rank=16, rewards=["a", "b"])
    message = str(error.value)
    for line in ("model: 'tiny' -> 'other'", "lora_rank: 8 -> 16", "rewards: ['a'] -> ['a', 'b']", "beta: "):
        assert line in message
