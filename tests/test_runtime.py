"""The notebook runtime, checked on a CPU: no GPU stops "Run all"; Kaggle's two T4s train on one; Drive output.

No GPU exists here, so GPU counts and properties are patched where a test says so; each patched fact names the
upstream code that reads it.
"""

import inspect
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from grpo_lite import check_runtime, read_metrics, run_dir
from grpo_lite.errors import UserError
from grpo_lite.machine import stack
from grpo_lite.machine.notebook import NoGPU, use_one_gpu
from grpo_lite.run.config import make_config

ROOT = Path(__file__).resolve().parents[1]


def test_a_cpu_runtime_stops_run_all_and_says_how_to_switch():
    with pytest.raises(NoGPU) as raised:
        check_runtime()
    message = str(raised.value)
    assert "Runtime > Change runtime type > T4 GPU" in message and "Settings > Accelerator" in message
    assert "SMOKE = True" in message


def test_the_cpu_smoke_mode_goes_on_and_says_so(capsys):
    report = check_runtime(allow_cpu=True)
    assert report.gpu is None and report.precision == "fp32" and not report.engine.vllm
    assert "no GPU; CPU smoke mode" in capsys.readouterr().out


class _T4:
    name = "Tesla T4"
    total_memory = int(14.74 * 2**30)
    major, minor = 7, 5


def test_a_t4_is_named_with_its_memory_precision_and_which_engine_generates(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # no GPU here: a T4 as torch describes it
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: _T4())
    report = check_runtime()
    out = capsys.readouterr().out
    assert report.gpu == "Tesla T4" and report.precision == "fp16" and "Tesla T4, 14.7 GB, fp16. Generation: " in out
    assert report.engine.reason in out  # which engine, and why: tests/test_engine.py


def test_two_gpus_without_a_launcher_show_the_process_one(monkeypatch, capsys):
    for name in ("CUDA_VISIBLE_DEVICES", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert use_one_gpu(gpu_count=lambda: 2) and os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    assert "training on GPU 0 only" in capsys.readouterr().out


@pytest.mark.parametrize("variable", ["CUDA_VISIBLE_DEVICES", "LOCAL_RANK", "WORLD_SIZE"])
def test_a_launcher_or_the_users_choice_is_left_alone(monkeypatch, variable):
    for name in ("CUDA_VISIBLE_DEVICES", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, "1")
    assert use_one_gpu(gpu_count=lambda: 2) is None
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == ("1" if variable == "CUDA_VISIBLE_DEVICES" else None)


def test_one_gpu_hidden_too_late_still_trains_without_data_parallel(monkeypatch):
    # The TRL lines this relies on (trl/trainer/grpo_trainer.py, GRPOTrainer.__init__ after Trainer.__init__):
    #     if args.n_gpu > 1:
    #         raise ValueError(f"{type(self).__name__} does not support `nn.DataParallel` ...")
    # and transformers' Trainer wraps the model in nn.DataParallel when args.n_gpu > 1, n_gpu being
    # torch.cuda.device_count() for a process no launcher started (transformers/training_args.py, _setup_devices).
    from trl import GRPOConfig, GRPOTrainer

    source = inspect.getsource(GRPOTrainer.__init__)  # TRL before 1.15 lets the Trainer use nn.DataParallel instead
    assert ("if args.n_gpu > 1:" in source and "does not support `nn.DataParallel`" in source) == stack.newer("data_parallel_refused")

    for name in ("LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    # Kaggle's 2x T4 when CUDA started before grpo_lite could hide GPU 1 (no GPU here: torch's answers patched)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    assert GRPOConfig(output_dir="unused", bf16=False).n_gpu == 2, "TRL would refuse this config"
    config = make_config("t4-16gb", output_dir="unused")
    assert config.n_gpu == 1 and str(config.device) == "cuda:0"


def test_kaggle_runs_write_under_kaggle_working(monkeypatch):
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    assert run_dir("quickstart").parent == Path("/kaggle/working")


def test_each_run_of_a_notebook_gets_a_folder_of_its_own_said_and_resume_takes_the_last(tmp_path, monkeypatch, caplog):
    """"Run all" again trains again: run_dir numbers past the highest folder there, keeping the runs before."""
    monkeypatch.chdir(tmp_path)
    with caplog.at_level("INFO", logger="grpo_lite"):
        first = run_dir("quickstart")
        assert run_dir("quickstart") == first == Path("outputs/quickstart-1")  # nothing made until a run writes there
        (tmp_path / first).mkdir(parents=True)
        assert run_dir("quickstart") == Path("outputs/quickstart-2") and run_dir("quick") == Path("outputs/quick-1")
        assert run_dir("quickstart", resume=True) == first and run_dir("other", resume=True) == Path("outputs/other-1")
    assert "run folder: outputs/quickstart-2 (each run of 'quickstart' gets a folder of its own; outputs/quickstart-1 " \
           "and those before it are kept)" in caplog.text
    assert "run folder: outputs/quickstart-1 (resume=True: the last run named 'quickstart', to continue)" in caplog.text


def test_drive_without_colab_or_a_mount_is_refused_with_the_fix(tmp_path):
    with pytest.raises(UserError, match="drive=True needs Google Drive"):
        run_dir("quickstart", drive=True, drive_root=tmp_path / "drive")


@pytest.mark.slow
def test_a_run_on_drive_resumes_after_the_vm_is_recycled(tmp_path):
    """Train in one process, then resume in a fresh one from the same Drive folder: a recycled Colab VM.

    The Drive mount is a stand-in directory with the layout ``google.colab.drive.mount`` gives (``MyDrive``).
    """
    drive = tmp_path / "drive"
    (drive / "MyDrive").mkdir(parents=True)
    script = textwrap.dedent(f"""
        import sys
        from grpo_lite import build_tiny_model, load_builtin, load_model, prepare_dataset, run_dir, train

        steps = int(sys.argv[1])
        out = run_dir("quickstart", drive=True, drive_root={str(drive)!r}, resume=steps > 2)
        model, tokenizer = load_model(str(build_tiny_model({str(tmp_path / 'tiny')!r})))
        dataset = prepare_dataset(load_builtin("arithmetic")[:16], question="question", answer="answer")
        result = train(model, tokenizer, dataset, rewards="math", output_dir=out, max_steps=steps, save_steps=2,
                       dashboard=False, resume=steps > 2, num_generations=2, per_device_train_batch_size=2,
                       max_completion_length=8)
        print("STEPS", [row["step"] for row in result.metrics])
    """)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.run([sys.executable, "-c", script, "2"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    out = drive / "MyDrive" / "grpo-lite" / "quickstart-1"
    assert (out / "checkpoint-2").is_dir()
    recycled_at = time.time()
    second = subprocess.run([sys.executable, "-c", script, "4"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    records = read_metrics(out)
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    # steps 1-2 kept from before the recycle, 3-4 trained after it: resumed, not restarted
    assert all(r["time"] < recycled_at for r in records[:2]) and all(r["time"] > recycled_at for r in records[2:])
    assert (out / "checkpoint-4").is_dir()
