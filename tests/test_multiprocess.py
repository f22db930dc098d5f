"""The same run config under accelerate with two CPU processes (gloo, loopback only)."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_both_train_and_the_run_files_are_written_once(tmp_path):
    out = tmp_path / "run"
    # accelerate's --cpu launcher starts a single process unless MPI is set up; the torchrun launcher behind
    # --multi_gpu starts both processes, which use gloo on a machine without GPUs.
    command = [
        str(Path(sys.executable).parent / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_ip", "127.0.0.1", "--main_process_port", str(_free_port()),
        "-m", "grpo_lite", "train", str(ROOT / "examples" / "tiny_cpu.yaml"), "--output-dir", str(out),
    ]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1"}
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]

    assert "rank 0/2 trained 4 steps" in log and "rank 1/2 trained 4 steps" in log
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
    assert log.count("saved the adapter and tokenizer") == 1
    assert (out / "adapter_model.safetensors").exists() and (out / "run.yaml").exists()
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
