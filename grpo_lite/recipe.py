"""A run described in YAML: model, data, rewards, preset and overrides -> load, prepare, train.

    model: tiny                     # a hub id, a local folder, or "tiny" (offline random Qwen2)
    load: {max_seq_length: 1024, load_in_4bit: true, backend: auto}
    dataset: {builtin: arithmetic}  # or {path: data.jsonl, question: question, answer: answer}
                                    # or {path: dataset.jsonl, prepared: true} (has a prompt column)
    rewards: [soft_xml_format_reward, numeric_correctness_reward]
    reward_weights: [1.0, 1.0]      # optional
    preset: auto
    output_dir: outputs/run
    reward_timeout: 600             # optional: seconds one reward call may take (null: no limit)
    overrides: {max_steps: 20, num_generations: 4}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .config import ConfigError, resolve_options

KEYS = {"model", "load", "dataset", "rewards", "reward_weights", "preset", "output_dir", "reward_timeout", "overrides"}


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
    timeout = recipe.get("reward_timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ConfigError(f"{path.name}: reward_timeout={timeout!r}: give the seconds one reward call may take "
                          "(e.g. 600), or null for no limit")
    data_path = (recipe["dataset"] or {}).get("path")
    if data_path and not Path(data_path).is_absolute() and (path.parent / data_path).exists():
        recipe["dataset"] = {**recipe["dataset"], "path": str(path.parent / data_path)}  # relative to the YAML
    return recipe


def apply_settings(recipe: dict[str, Any], settings: list[str]) -> dict[str, Any]:
    """Apply ``KEY=VALUE`` settings (values parsed as YAML): ``load.X`` and ``dataset.X`` go to those
    sections, anything else is a GRPOConfig override. Returns a new recipe."""
    recipe = {**recipe, "overrides": dict(recipe.get("overrides") or {})}
    for setting in settings:
        key, sep, raw = setting.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {setting!r}: write KEY=VALUE, e.g. --set max_steps=50")
        section, dot, field = key.partition(".")
        if dot and section in ("load", "dataset"):
            recipe[section] = {**(recipe.get(section) or {}), field: yaml.safe_load(raw)}
        else:
            recipe["overrides"][key] = yaml.safe_load(raw)
    resolve_options(recipe.get("preset", "auto"), **recipe["overrides"])
    return recipe


def run_recipe(recipe: dict[str, Any], *, output_dir: str | Path | None = None, callbacks=(), resume: bool = False):
    """Load the model, prepare the data and train, as the recipe says; returns the TrainResult."""
    from rewards import resolve_rewards

    from .data import load_builtin, load_rows, prepare_dataset
    from .models import load_model
    from .training import train

    out = Path(output_dir or recipe.get("output_dir") or "outputs/grpo-lite")
    funcs, _ = resolve_rewards(recipe["rewards"])  # names are checked before the model loads
    model_name = str(recipe["model"])
    if model_name == "tiny":
        from .tiny import build_tiny_model

        # Every rank builds it: the same seed gives the same files, and they are moved into place atomically,
        # so no rank reads a half-written file (no process group exists yet to wait on another rank).
        model_name = str(build_tiny_model(out / "tiny-model"))
    model, tokenizer = load_model(model_name, **(recipe.get("load") or {}))
    data = dict(recipe["dataset"])
    if data.pop("prepared", False):
        dataset = load_rows(data["path"])
    else:
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
        **({"reward_timeout": recipe["reward_timeout"]} if "reward_timeout" in recipe else {}),
        **(recipe.get("overrides") or {}),
    )
