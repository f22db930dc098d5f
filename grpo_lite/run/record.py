"""The run record, ``run.yaml``: a run's settings as asked for, what the run chose for itself, and the GRPOConfig.

``run.yaml`` is the run's :class:`~grpo_lite.run.settings.RunSettings` written out, plus what the run chose
(``chosen``: the preset ``auto`` picked, the backend, vLLM's share, reward weights from a ``RewardSet``) and the full
GRPOConfig it trained with. Its top level is a recipe: ``grpo-lite launch-kit <run dir>`` and ``grpo-lite train``
read it back as the same run.

    model: Qwen/Qwen2.5-1.5B-Instruct
    load: {max_seq_length: 1024, lora_rank: 32, ...}
    rewards: [soft_xml_format_reward, numeric_correctness_reward]
    preset: auto
    reward_timeout: 600
    overrides: {max_steps: 200}
    chosen: {preset: l4-24gb, backend: unsloth, overrides: {use_vllm: true, ...},
             rows: 7473, rows_fingerprint: 9f2c...,   # the training rows as TRL got them (rows_fingerprint)
             translated: {warmup_ratio: {warmup_steps: 0.1}},   # an old field of the user's -> its new form
             sources: {beta: preset, max_steps: user, use_vllm: machine, ...}}   # each GRPOConfig value not TRL's default
    grpo_config: {...every GRPOConfig field...}
    # written by grpo-lite; sha256 of the lines above: ...   (an edit since shows: run.files.record_origin)
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rewards.combine import distinct

from ..errors import NotFound
from .files import RUN_FILE, replace_file, stamped
from .settings import RunSettings, read_yaml


@dataclass
class RunRecord:
    """``run.yaml``: the settings asked for, what the run chose for itself, and the GRPOConfig it trained with."""

    settings: RunSettings
    chosen: dict[str, Any] = field(default_factory=dict)
    grpo_config: dict[str, Any] = field(default_factory=dict)

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        document = {**self.settings.to_dict(), "chosen": self.chosen, "grpo_config": self.grpo_config}
        replace_file(path, stamped(yaml.dump(document, Dumper=_RecordDumper, sort_keys=False, default_flow_style=False)))
        return path

    @property
    def reward_names(self) -> list[str]:
        """The rewards as the metrics name them (``rewards/<name>/mean``): as the run logged them (``chosen``), else a
        reference's function, the second and later of one name numbered on (:func:`rewards.combine.distinct`)."""
        logged = self.chosen.get("reward_names")
        return list(logged) if logged is not None else distinct(
            [reference.rpartition(":")[2].rpartition(".")[2] for reference in self.settings.rewards])

    def fixed(self) -> dict[str, Any]:
        """What a checkpoint's weights depend on besides the GRPOConfig: a resumed run must match it."""
        load = self.settings.load
        return {"model": self.settings.model, "backend": self.chosen.get("backend"),
                "lora_rank": load.lora_rank if load is not None else self.chosen.get("lora_rank"),
                "rewards": self.settings.rewards,
                "chat_template_kwargs": self.settings.chat_template_kwargs or {}}  # the prompts it was trained on


class _RecordDumper(yaml.SafeDumper):
    """YAML's safe types, plus what ``from_pretrained`` keywords hold: a torch dtype by the name transformers
    reads back (``dtype: bfloat16``); anything else as its text, which a launch kit cannot turn back into it."""


def _represent_other(dumper: yaml.SafeDumper, value: Any):
    import torch

    if isinstance(value, torch.dtype):
        return dumper.represent_str(str(value).removeprefix("torch."))
    from ..log import logger

    logger.warning(f"run.yaml records {value!r} as text: pass it to load_model by name, or rebuild it by hand to rerun")
    return dumper.represent_str(repr(value))


_RecordDumper.add_multi_representer(object, _represent_other)


def read_run(path: str | Path) -> RunRecord:
    """The :class:`RunRecord` in a ``run.yaml`` (or the run folder holding it); the one reader of run records."""
    path = Path(path)
    path = path / RUN_FILE if path.is_dir() else path
    if not path.exists():
        raise NotFound(f"{path}: no run record; pass the output_dir that train() wrote to")
    document = read_yaml(path)
    chosen = dict(document.get("chosen") or {})
    settings = RunSettings.from_dict(document, path.name)
    return RunRecord(settings=settings, chosen=chosen, grpo_config=dict(document.get("grpo_config") or {}))


def reward_reference(func) -> str:
    """The name that reads back as ``func`` itself: its registry name, else its :func:`function_reference`."""
    from rewards.combine import reward_name
    from rewards.registry import REWARDS

    name = reward_name(func)
    return name if REWARDS.get(name) is func else function_reference(func, name)


def function_reference(func, name: str | None = None) -> str:
    """The reference a run YAML names ``func`` by, which reads back as ``func`` itself or as nothing, never as something
    else: where a file, a module, or the notebook or script holds it, that reference
    (:func:`rewards.registry.reference_of`: ``path/to/file.py:name``, ``module:name``, ``__main__:name``); else one that
    cannot be imported and says so when read: ``module:outer.<locals>.inner`` for a function made inside another,
    ``<partial>:name`` (its type, and ``name``, the reward's) for anything else no module holds."""
    from rewards.registry import reference_of

    if (found := reference_of(func)) is not None:
        return found
    module, qualname = getattr(func, "__module__", None), getattr(func, "__qualname__", None) or ""
    if module and "<" in qualname:  # outer.<locals>.inner, <lambda>
        return f"{module}:{qualname}"
    return f"<{type(func).__name__}>:{name or qualname or type(func).__name__}"


def rows_fingerprint(dataset) -> str:
    """A hash of ``dataset``'s rows, in order, every column, as Arrow holds them (an image as its bytes): two datasets
    with the same rows have the same fingerprint, however they were built; any changed, added or moved row changes it."""
    digest = hashlib.sha256(json.dumps(dataset.column_names).encode())
    for batch in dataset.with_format("arrow").iter(batch_size=1000):
        digest.update(json.dumps(batch.to_pylist(), sort_keys=True, default=repr).encode())
    return digest.hexdigest()[:16]
