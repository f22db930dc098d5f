"""The notebook runtime a run starts on: which GPU, one GPU on Kaggle's two, outputs that outlive the VM.

Colab and Kaggle differ from a workstation in three ways a run feels: the runtime may have no GPU at all
(the default Colab runtime is a CPU), Kaggle shows two T4s to one process, and a Colab VM is wiped when it
is recycled. Nothing here imports transformers or trl: :func:`use_one_gpu` runs as ``grpo_lite`` is imported.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import NotFound, UserError
from .device import installed, supports_bf16, this_gpu
from .engine import Engine, generation_engine

HOW_TO_GET_A_GPU = (
    "Colab: Runtime > Change runtime type > T4 GPU, then Runtime > Run all. "
    "Kaggle: Settings > Accelerator > GPU T4 x2 (and Settings > Internet on), then Run All."
)
LAUNCHER_VARIABLES = ("LOCAL_RANK", "WORLD_SIZE")


class NoGPU(UserError, RuntimeError):
    """The runtime has no CUDA GPU and the notebook did not ask for the CPU smoke mode."""


def platform() -> str:
    """``"colab"``, ``"kaggle"`` or ``"local"``, from the variables each service sets in its kernels."""
    if any(name.startswith("COLAB_") for name in os.environ):
        return "colab"
    if "KAGGLE_KERNEL_RUN_TYPE" in os.environ or Path("/kaggle/working").is_dir():
        return "kaggle"
    return "local"


def _gpus_seen_by_the_driver() -> int:
    """How many GPUs ``nvidia-smi`` lists: counted without starting CUDA in this process, so that
    ``CUDA_VISIBLE_DEVICES`` set afterwards still takes effect (CUDA reads it once, when it starts)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in listing.splitlines())


def use_one_gpu(gpu_count=_gpus_seen_by_the_driver) -> str | None:
    """With two or more GPUs visible to a process no launcher started (Kaggle's 2x T4), show it only GPU 0.

    TRL's GRPOTrainer refuses to train when ``Trainer`` would wrap the model in ``nn.DataParallel``, which it
    does whenever one process sees several GPUs (trl/trainer/grpo_trainer.py, after ``Trainer.__init__``:
    ``if args.n_gpu > 1: raise ValueError("... does not support nn.DataParallel ...")``). Returns the
    message it printed, or None when it changed nothing (one GPU, a launcher, or ``CUDA_VISIBLE_DEVICES``
    already chosen by the user).
    """
    if "CUDA_VISIBLE_DEVICES" in os.environ or any(name in os.environ for name in LAUNCHER_VARIABLES):
        return None
    count = gpu_count()
    if count < 2:
        return None
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    message = (f"grpo-lite: {count} GPUs visible; training on GPU 0 only (CUDA_VISIBLE_DEVICES=0). GRPO in one "
               "process uses one GPU; for several, `grpo-lite launch-kit`.")
    print(message)
    return message


def one_gpu_per_process(config):
    """``config`` with ``n_gpu`` 1 when CUDA started before :func:`use_one_gpu` could hide the other GPUs.

    ``Trainer`` itself does the same for a model split across devices (transformers/trainer.py:
    ``if self.is_model_parallel: self.args._n_gpu = 1``); the model then trains on ``config.device``, GPU 0.
    """
    import torch

    if any(name in os.environ for name in LAUNCHER_VARIABLES) or torch.cuda.device_count() < 2 or config.n_gpu <= 1:
        return config
    print(f"grpo-lite: {config.n_gpu} GPUs visible; training on GPU 0 only (no nn.DataParallel, which GRPOTrainer refuses).")
    config._n_gpu = 1
    return config


@dataclass
class RuntimeReport:
    platform: str
    gpu: str | None
    memory_gb: float | None
    precision: str
    engine: Engine  # which engine generates completions, and why
    unsloth: bool

    def __str__(self) -> str:
        if self.gpu is None:
            return f"{self.platform} runtime: no GPU; CPU smoke mode (a tiny model, fp32). For a GPU: {HOW_TO_GET_A_GPU}"
        unsloth = "Unsloth: installed" if self.unsloth else "Unsloth: not installed (transformers + PEFT)"
        return (f"{self.platform} runtime: {self.gpu}, {self.memory_gb:.1f} GB, {self.precision}. "
                f"Generation: {self.engine}. {unsloth}.")


def check_runtime(allow_cpu: bool = False) -> RuntimeReport:
    """Print and return what this runtime gives a run: GPU, memory, precision, and which engine generates (vLLM or
    transformers) and why (:func:`grpo_lite.machine.engine.generation_engine`).

    Without a CUDA GPU it raises :class:`NoGPU`, saying how to switch the runtime to one, so that "Run all"
    stops here instead of training on the CPU; ``allow_cpu=True`` (a notebook's smoke mode) goes on.
    """
    where = platform()
    gpu = this_gpu()
    if gpu is None and not allow_cpu:
        raise NoGPU(f"This {where} runtime has no GPU, and GRPO on a real model needs one. {HOW_TO_GET_A_GPU} "
                    "To try the notebook on the CPU instead (a tiny offline model, a few steps), set SMOKE = True.")
    precision = "fp32" if gpu is None else "bf16" if supports_bf16() else "fp16"
    report = RuntimeReport(where, gpu and gpu.name, gpu and gpu.memory_gb, precision, generation_engine(), installed("unsloth"))
    print(report)
    return report


def drive_folder(drive_root: str | Path = "/content/drive") -> Path:
    """grpo-lite's folder on Google Drive, ``<drive_root>/MyDrive/grpo-lite``, Drive mounted here when it is not yet.
    ``drive_root`` is where Drive is mounted; a directory that is already there (mounted earlier, or a stand-in) is
    used as it is."""
    root = Path(drive_root)
    if not (root / "MyDrive").is_dir():
        try:
            from google.colab import drive as colab_drive
        except ImportError:
            raise NotFound(
                f"drive=True needs Google Drive at {root}/MyDrive: run on Colab, or mount Drive there first, or set drive=False."
            ) from None
        colab_drive.mount(str(root))
    return root / "MyDrive" / "grpo-lite"
