"""A run described in YAML: model, data, rewards, preset and overrides -> load, prepare, train.

    model: tiny                     # a hub id, a local folder, or "tiny" (offline random Qwen2)
    load: {max_seq_length: 1024, load_in_4bit: true, backend: auto}
    dataset: {builtin: arithmetic}  # or {path: data.jsonl, question: question, answer: answer}
                                    # or {path: dataset.jsonl, prepared: true} (has a prompt column)
    rewards: [soft_xml_format_reward, numeric_correctness_reward]
    reward_weights: [1.0, 1.0]      # optional
    preset: auto
    output_dir: outputs/run         # optional: a fresh outputs/<model>-<n> for each run without one
    overwrite: false                # true: replace the run output_dir holds (else it is refused)
    reward_timeout: 600             # optional: seconds one reward call may take (null: no limit)
    tool_timeout: 60                # optional: seconds one tool call or environment reset may take (null: no limit)
    rollout_timeout: 1800           # optional: seconds one rollout_func call may take (null: no limit)
    chat_template_kwargs: {enable_thinking: false}   # optional: for the chat template, in training and after (Qwen3)
    heldout: {path: test.jsonl, question: question, answer: answer, n: 200, samples: 4}
                                    # optional: n rows evaluated before and after; samples: 4 adds pass@k
    tools: [tools.py:calculate]     # optional, the latest stack: functions the model may call in a rollout
    environment_factory: games.py:NumberGuess   # optional: one environment per rollout ({name: reference} per row)
    rollout_func: games.py:play     # optional: a loop of your own, rollout_func(prompts, trainer)
    overrides: {max_steps: 20, num_generations: 4}
"""

from __future__ import annotations

import dataclasses
import os
from functools import reduce
from pathlib import Path
from typing import Any

from rewards.registry import split_file_reference

from ..run.files import fresh_run_dir, run_name, say_fresh_run_dir
from ..run.settings import ConfigError, RunSettings, map_rollout_options, read_yaml


def read_recipe(path: str | Path) -> RunSettings:
    """Read a run YAML (or a run's ``run.yaml``) into settings, refusing settings it does not know; the values
    are checked by :meth:`RunSettings.validate`, which :func:`run_recipe` calls before the model loads."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"run config {str(path)!r} does not exist")
    settings = RunSettings.from_dict(read_yaml(path), path.name)

    def beside(name: Any) -> Any:  # a file named relative to the YAML, where one is there
        relative = isinstance(name, str) and name and not Path(name).is_absolute() and (path.parent / name).exists()
        return str(path.parent / name) if relative else name

    if isinstance(settings.dataset, dict) and "path" in settings.dataset:
        settings.dataset = {**settings.dataset, "path": beside(settings.dataset["path"])}
    heldout = settings.heldout.data if settings.heldout is not None else None
    if isinstance(heldout, dict) and "path" in heldout:
        settings.heldout.data = {**heldout, "path": beside(heldout["path"])}
    def beside_reference(reference: Any) -> Any:  # path/to/file.py:function
        return f"{beside(parts[0])}:{parts[1]}" if (parts := split_file_reference(reference)) else reference

    if isinstance(settings.rewards, list):
        settings.rewards = [beside_reference(r) for r in settings.rewards]
    rollouts = map_rollout_options(settings.rollout_references(), lambda reference, _: beside_reference(reference))
    return dataclasses.replace(settings, **rollouts)


def apply_settings(settings: RunSettings, changes: list[str]) -> RunSettings:
    """``settings`` with each ``KEY=VALUE`` (values parsed as YAML) applied (see :meth:`RunSettings.with_setting`).
    Returns new settings."""
    return reduce(RunSettings.with_setting, changes, settings)


def run_recipe(settings: RunSettings, *, output_dir: str | Path | None = None, callbacks=(), resume: bool = False):
    """Check the settings, then load the model, prepare the data and train; returns the TrainResult. Without an output
    folder (``output_dir`` or the settings'), a run on one process gets a fresh ``outputs/<model>-<n>``, said."""
    from ..data.prepare import load_builtin, load_rows, prepare_dataset
    from ..model.load import load_model
    from ..training.trainer import train_run

    out = output_dir or settings.output_dir
    fresh = out is None and not resume and isinstance(settings.model, str) and int(os.environ.get("WORLD_SIZE", "1")) == 1
    if fresh:
        out = fresh_run_dir(run_name(settings.model))
    settings = dataclasses.replace(settings, output_dir=str(out) if isinstance(out, Path) else out)  # else: checked as given
    found = [f"the run: {problem}" for problem in settings.problems(resume=resume)]  # all of it before the model loads
    if settings.dataset is None:
        found.append("the run has no dataset: add dataset: {builtin: ...}, {path: ...} or the data file's path to the run YAML")
    if found:
        raise ConfigError("\n".join(found))
    out = Path(settings.output_dir)
    if fresh:
        say_fresh_run_dir(out)
    model_name = settings.model
    if model_name == "tiny":
        from ..model.tiny import build_tiny_model

        # Every rank builds it: the same seed gives the same files, and they are moved into place atomically,
        # so no rank reads a half-written file (no process group exists yet to wait on another rank).
        model_name = str(build_tiny_model(out / "tiny-model"))
    load = settings.load.to_dict() if settings.load is not None else {}
    from_pretrained = load.pop("from_pretrained", {})
    model, tokenizer = load_model(model_name, **load, **from_pretrained)
    def rows(spec: dict[str, Any]):
        spec = dict(spec)
        if spec.pop("prepared", False):
            return load_rows(spec["path"])
        source = load_builtin(spec.pop("builtin")) if "builtin" in spec else spec.pop("path")
        rendering = {"chat_template_kwargs": settings.chat_template_kwargs, "fold_system_prompt": settings.fold_system_prompt}
        return prepare_dataset(source, tokenizer=tokenizer, **{**rendering, **spec})

    heldout = settings.heldout
    if heldout is not None and heldout.data is not None:
        heldout = dataclasses.replace(heldout, data=rows(heldout.data))
    # the rows go on loaded: the settings no longer name the files, which validate() above has read already
    return train_run(model, tokenizer, rows(settings.dataset), dataclasses.replace(settings, dataset=None, heldout=heldout),
                     callbacks=callbacks, resume=resume)
