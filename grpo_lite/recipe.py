"""A run described in YAML: model, data, rewards, preset and overrides -> load, prepare, train.

    model: tiny                     # a hub id, a local folder, or "tiny" (offline random Qwen2)
    load: {max_seq_length: 1024, load_in_4bit: true, backend: auto}
    dataset: {builtin: arithmetic}  # or {path: data.jsonl, question: question, answer: answer}
    rewards: [soft_xml_format_reward, numeric_correctness_reward]
    reward_weights: [1.0, 1.0]      # optional
    preset: auto
    output_dir: outputs/run
    overrides: {max_steps: 20, num_generations: 4}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .config import ConfigError, resolve_options

KEYS = {"model", "load", "dataset", "rewards", "reward_weights", "preset", "output_dir", "overrides"}


def read_recipe(path: str | Path) -> dict[str, Any]:
    """Read and check a run YAML before anything heavy is loaded."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"run config {str(path)!r} does not exist")
    recipe = yaml.safe_load(path.read_text()) or {}
    unknown = set(recipe) - KEYS
    if unknown:
        raise ConfigError(f"{path.name}: unknown keys {sorted(unknown)}; allowed: {sorted(KEYS)}")
    for key in ("model", "dataset", "rewards"):
        if key not in recipe:
            raise ConfigError(f"{path.name}: '{key}' is required")
    resolve_options(recipe.get("preset", "auto"), **(recipe.get("overrides") or {}))
    return recipe


def run_recipe(recipe: dict[str, Any], *, output_dir: str | Path | None = None, callbacks=(), resume: bool = False):
    """Load the model, prepare the data and train, as the recipe says; returns the TrainResult."""
    from .data import load_builtin, prepare_dataset
    from .models import load_model
    from .training import resolve_rewards, train

    out = Path(output_dir or recipe.get("output_dir") or "outputs/grpo-lite")
    funcs = resolve_rewards(recipe["rewards"])
    model_name = str(recipe["model"])
    if model_name == "tiny":
        from .tiny import build_tiny_model

        model_name = str(build_tiny_model(out / "tiny-model"))
    model, tokenizer = load_model(model_name, **(recipe.get("load") or {}))
    data = dict(recipe["dataset"])
    source = load_builtin(data.pop("builtin")) if "builtin" in data else data.pop("path")
    dataset = prepare_dataset(source, tokenizer=tokenizer, **data)
    return train(
        model,
        tokenizer,
        dataset,
        funcs,
        preset=recipe.get("preset", "auto"),
        output_dir=out,
        reward_weights=recipe.get("reward_weights"),
        callbacks=callbacks,
        resume=resume,
        **(recipe.get("overrides") or {}),
    )
