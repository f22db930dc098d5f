"""The same run config under accelerate with two CPU processes (gloo, loopback only), trained and resumed, and the
process group such a launch opens, closed by the command line whether its run ends or fails."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed
from accelerate.state import AcceleratorState

from grpo_lite.launch.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(out: Path, cwd: Path, *options: str) -> str:
    """``grpo-lite train examples/tiny_cpu.yaml`` into ``out`` under accelerate with two CPU processes, as docs/scaling.md
    launches it; its log, once it has ended well."""
    # accelerate's --cpu launcher starts a single process unless MPI is set up; the torchrun launcher behind
    # --multi_gpu starts both processes, which use gloo on a machine without GPUs.
    command = [
        str(Path(sys.executable).parent / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_ip", "127.0.0.1", "--main_process_port", str(_free_port()),
        "-m", "grpo_lite", "train", str(ROOT / "examples" / "tiny_cpu.yaml"), "--output-dir", str(out), *options,
    ]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1"}
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=cwd)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    return log


@pytest.mark.slow
def test_two_processes_train_resume_and_write_the_run_files_once(tmp_path):
    out = tmp_path / "run"
    log = _launch(out, tmp_path, "--set", "max_steps=2")
    assert "rank 0/2 trained 2 steps" in log and "rank 1/2 trained 2 steps" in log
    assert log.count("saved the adapter and tokenizer") == 1
    assert (out / "adapter_model.safetensors").exists() and (out / "run.yaml").exists()
    # resumed as docs/scaling.md resumes it: each process loads the checkpoint's optimizer state onto its device, cpu:N
    log = _launch(out, tmp_path, "--resume")
    assert "resuming from checkpoint-2, with its optimizer" in log
    assert "rank 0/2 trained 4 steps" in log and "rank 1/2 trained 4 steps" in log
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
    assert log.count("saved the adapter and tokenizer") == 1
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]


@pytest.fixture
def world_of_one():
    """A gloo process group as ``accelerate launch`` opens it in each process, here for this process alone; accelerate's
    state, which the run reads from the group, is reset after the test for the tests that follow in this process."""
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    yield
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    AcceleratorState._reset_state(reset_partial_state=True)


@pytest.mark.parametrize("ending", ["trained", "refused"])
def test_the_command_line_closes_the_process_group_of_a_launch_whether_its_run_ends_or_fails(world_of_one, tmp_path, ending):
    # A process that exits with its gloo group open can abort in the interpreter's teardown once training is over
    # (SIGABRT, "terminate called without an active exception"; pytorch/pytorch#190489): a finished run then fails its launch.
    config = ROOT / "examples" / "tiny_cpu.yaml"
    if ending == "refused":
        config = tmp_path / "run.yaml"
        config.write_text("model: tiny\ndataset: {builtin: arithmetic}\nrewards: [no_such_reward]\n")
    assert main(["train", str(config), "--output-dir", str(tmp_path / "run")]) == (0 if ending == "trained" else 2)
    assert not torch.distributed.is_initialized()


def test_a_checkpoint_loads_onto_the_device_accelerate_gives_a_cpu_process(tmp_path):
    # transformers' Trainer resumes a run on several processes with map_location=args.device, cpu:0 on a CPU
    from grpo_lite.training.trl_compat import restore_cpu_storages_by_index

    restore_cpu_storages_by_index()
    torch.save({"state": {0: {"exp_avg": torch.ones(3)}}}, tmp_path / "optimizer.pt")
    loaded = torch.load(tmp_path / "optimizer.pt", map_location=torch.device("cpu", 0), weights_only=True)
    assert torch.equal(loaded["state"][0]["exp_avg"], torch.ones(3))
