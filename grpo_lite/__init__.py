"""grpo-lite: GRPO fine-tuning on one consumer GPU, with rewards you can debug and a run you can watch.

    model, tokenizer = load_model("unsloth/Qwen2.5-1.5B-Instruct", max_seq_length=1024)
    dataset = prepare_dataset("gsm8k.jsonl", question="question", answer="answer", tokenizer=tokenizer)
    result = train(model, tokenizer, dataset, rewards="math", max_steps=300)

Unsloth patches transformers, TRL and PEFT when it is imported, so on a machine with a CUDA GPU and
Unsloth installed, importing grpo_lite imports Unsloth first. Everything else loads on first use:
importing grpo_lite imports neither transformers nor trl.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from .device import import_unsloth_first
from .runtime import use_one_gpu

__version__ = "0.1.0"

use_one_gpu()  # before anything starts CUDA: CUDA reads CUDA_VISIBLE_DEVICES once
import_unsloth_first()

# Each public name and the module it lives in, in the order of a run.
_EXPORTS = {
    # check the runtime
    "check_runtime": ".runtime",
    "run_dir": ".runtime",
    "NoGPU": ".runtime",
    # load a model
    "load_model": ".models",
    "choose_backend": ".models",
    "Backend": ".models",
    "BackendError": ".models",
    "build_tiny_model": ".tiny",
    # prepare the data
    "prepare_dataset": ".data",
    "load_builtin": ".data",
    "REASONING_SYSTEM_PROMPT": ".data",
    "DatasetError": ".data",
    # see what the rewards would teach, before training
    "preview": ".preview",
    "PreviewReport": ".preview",
    # size and configure the run
    "plan": ".planner",
    "make_config": ".config",
    "TRAINING_PRESETS": ".config",
    "ConfigError": ".config",
    # train
    "train": ".training",
    "TrainResult": ".training",
    "RunCallback": ".callbacks",
    "RewardFailure": ".reward_guard",
    "NaNDetected": ".nan_guard",
    "OutOfMemory": ".out_of_memory",
    "DiskFull": ".disk",
    "Stage": ".stages",
    "train_stages": ".stages",
    # watch
    "LiveDashboard": ".monitor.dashboard",
    "HealthMonitor": ".monitor.health",
    "show_run": ".monitor.show",
    "read_metrics": ".monitor.metrics",
    "read_samples": ".monitor.samples",
    "rescore_run": ".rescore",
    "read_run": ".run_record",
    # evaluate, export, use
    "evaluate": ".evaluation",
    "compare": ".evaluation",
    "EvalReport": ".evaluation",
    "export": ".exporter",
    "ExportError": ".exporter",
    "generate": ".inference",
    # the offline demo
    "run_demo": ".demo",
}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:  # what editors and type checkers see; at run time each name loads on first use
    from .callbacks import RunCallback
    from .config import TRAINING_PRESETS, ConfigError, make_config
    from .data import REASONING_SYSTEM_PROMPT, DatasetError, load_builtin, prepare_dataset
    from .demo import run_demo
    from .disk import DiskFull
    from .evaluation import EvalReport, compare, evaluate
    from .exporter import ExportError, export
    from .inference import generate
    from .models import Backend, BackendError, choose_backend, load_model
    from .monitor.dashboard import LiveDashboard
    from .monitor.health import HealthMonitor
    from .monitor.metrics import read_metrics
    from .monitor.samples import read_samples
    from .monitor.show import show_run
    from .nan_guard import NaNDetected
    from .out_of_memory import OutOfMemory
    from .planner import plan
    from .preview import PreviewReport, preview
    from .rescore import rescore_run
    from .reward_guard import RewardFailure
    from .run_record import read_run
    from .runtime import NoGPU, check_runtime, run_dir
    from .stages import Stage, train_stages
    from .tiny import build_tiny_model
    from .training import TrainResult, train


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'grpo_lite' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
