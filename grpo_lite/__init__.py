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

from . import log  # grpo-lite's logger, and its filter of bitsandbytes' Hub-kernel notice, before PEFT imports bitsandbytes
from .machine.device import import_unsloth_first
from .machine.notebook import use_one_gpu

__version__ = "0.1.0"

use_one_gpu()  # before anything starts CUDA: CUDA reads CUDA_VISIBLE_DEVICES once
import_unsloth_first()

# Each public name and the module it lives in, in the order of a notebook. Everything else (the errors each step
# raises, make_config, the run record, the dashboard's parts) is importable from its module: docs/api.md.
_EXPORTS = {
    # check the runtime
    "check_runtime": ".machine.notebook",
    "run_dir": ".run.files",
    # load a model
    "load_model": ".model.load",
    "build_tiny_model": ".model.tiny",
    # prepare the data
    "prepare_dataset": ".data.prepare",
    "load_builtin": ".data.prepare",
    "REASONING_SYSTEM_PROMPT": ".data.prepare",
    # before training: what the rewards would teach, and whether the run fits the GPU
    "preview": ".training.episode_preview",
    "plan": ".machine.planner",
    # train, and watch
    "warmup_format": ".training.warmup",
    "train": ".training.trainer",
    "train_stages": ".training.stages",
    "Stage": ".training.stages",
    "gymnasium_environment": ".environments.gymnasium_env",
    "http_environment": ".environments.http_env",
    "LiveDashboard": ".monitor.dashboard",
    "show_run": ".monitor.show",
    "read_metrics": ".monitor.metrics",
    "rescore_run": ".evaluation.rescore",
    # evaluate, export, use
    "evaluate": ".evaluation.scoring",
    "compare": ".evaluation.scoring",
    "export": ".model.exporter",
    "generate": ".model.inference",
    # the offline demo
    "run_demo": ".launch.demo",
}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:  # what editors and type checkers see; at run time each name loads on first use
    from .data.prepare import REASONING_SYSTEM_PROMPT, load_builtin, prepare_dataset
    from .environments.gymnasium_env import gymnasium_environment
    from .environments.http_env import http_environment
    from .evaluation.rescore import rescore_run
    from .evaluation.scoring import compare, evaluate
    from .launch.demo import run_demo
    from .machine.notebook import check_runtime
    from .machine.planner import plan
    from .model.exporter import export
    from .model.inference import generate
    from .model.load import load_model
    from .model.tiny import build_tiny_model
    from .monitor.dashboard import LiveDashboard
    from .monitor.metrics import read_metrics
    from .monitor.show import show_run
    from .run.files import run_dir
    from .training.episode_preview import preview
    from .training.stages import Stage, train_stages
    from .training.trainer import train
    from .training.warmup import warmup_format


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'grpo_lite' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
