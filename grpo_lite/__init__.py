"""grpo-lite: GRPO fine-tuning on one consumer GPU, with rewards you can debug and a run you can watch.

    model, tokenizer = load_model("unsloth/Qwen2.5-1.5B-Instruct", max_seq_length=1024)
    dataset = prepare_dataset("gsm8k.jsonl", question="question", answer="answer", tokenizer=tokenizer)
    result = train(model, tokenizer, dataset, rewards="math", max_steps=300)

Names load on first use: importing grpo_lite imports neither transformers nor trl, so Unsloth (which
must be imported before them) can still be loaded by ``load_model``.
"""

from importlib import import_module

__version__ = "0.1.0"

_EXPORTS = {
    "load_model": ".models",
    "generate": ".inference",
    "evaluate": ".evaluation",
    "compare": ".evaluation",
    "EvalReport": ".evaluation",
    "export": ".exporter",
    "ExportError": ".exporter",
    "plan": ".planner",
    "Stage": ".stages",
    "train_stages": ".stages",
    "choose_backend": ".models",
    "Backend": ".models",
    "BackendError": ".models",
    "prepare_dataset": ".data",
    "load_builtin": ".data",
    "DatasetError": ".data",
    "REASONING_SYSTEM_PROMPT": ".data",
    "make_config": ".config",
    "PRESETS": ".config",
    "ConfigError": ".config",
    "train": ".training",
    "TrainResult": ".training",
    "RewardFailure": ".training",
    "read_metrics": ".monitor.metrics",
    "read_samples": ".monitor.samples",
    "LiveDashboard": ".monitor.dashboard",
    "show_run": ".monitor.show",
    "HealthMonitor": ".monitor.health",
    "build_tiny_model": ".tiny",
    "run_demo": ".demo",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'grpo_lite' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
