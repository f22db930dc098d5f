"""Taking a run past one GPU: the run YAML plus the exact launch commands for each way TRL scales.

The same run config trains on one GPU (Unsloth), on several GPUs with DDP or DeepSpeed ZeRO-2/3 through
``accelerate launch`` (transformers backend: Unsloth is single-GPU), and with generation moved to a
separate vLLM server (``trl vllm-serve``). :func:`write_launch_kit` writes all of it into one folder: the
run as a recipe (``recipe.yaml``, what ``grpo-lite train`` reads), the accelerate configs and ``LAUNCH.md``.
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
from pathlib import Path
from typing import Any

import yaml

from rewards.registry import split_file_reference

from ..log import logger
from ..run.record import read_run
from ..run.settings import ConfigError, Heldout, RunSettings, map_rollout_options
from .recipe import read_recipe

RECIPE_FILE = "recipe.yaml"
KIT_FILES = (RECIPE_FILE, "LAUNCH.md", "accelerate", "dataset.jsonl", "heldout.jsonl")  # what write_launch_kit writes

_COMMON = {
    "compute_environment": "LOCAL_MACHINE",
    "machine_rank": 0,
    "main_training_function": "main",
    "mixed_precision": "bf16",
    "num_machines": 1,
    "rdzv_backend": "static",
    "same_network": True,
    "use_cpu": False,
}

ACCELERATE_MODES = {
    "ddp": {"distributed_type": "MULTI_GPU", "gpu_ids": "all"},
    "zero2": {
        "distributed_type": "DEEPSPEED",
        "deepspeed_config": {
            "deepspeed_multinode_launcher": "standard",
            "offload_optimizer_device": "none",
            "offload_param_device": "none",
            "zero3_init_flag": False,
            "zero_stage": 2,
        },
    },
    "zero3": {
        "distributed_type": "DEEPSPEED",
        "deepspeed_config": {
            "deepspeed_multinode_launcher": "standard",
            "offload_optimizer_device": "none",
            "offload_param_device": "none",
            "zero3_init_flag": True,
            "zero3_save_16bit_model": True,
            "zero_stage": 3,
        },
    },
}

MULTI_GPU = ["--set", "load.backend=transformers"]
# bitsandbytes 4-bit weights cannot be sharded by ZeRO-3
ZERO3 = [*MULTI_GPU, "--set", "load.load_in_4bit=false"]
VLLM_SERVER = [*MULTI_GPU, "--set", "use_vllm=true", "--set", "vllm_mode=server"]


def accelerate_config(mode: str, num_processes: int) -> dict[str, Any]:
    """The ``accelerate launch --config_file`` contents for ``mode`` (ddp, zero2, zero3)."""
    return {**_COMMON, **ACCELERATE_MODES[mode], "num_processes": num_processes}


def launch_commands(recipe: str = RECIPE_FILE, *, model: str, num_gpus: int = 2) -> dict[str, str]:
    """Shell commands (run from the launch kit's folder) for each way of launching ``recipe``."""
    if num_gpus < 2:
        raise ConfigError("num_gpus must be 2 or more for the multi-GPU commands")
    train = ["-m", "grpo_lite", "train", recipe]

    def accelerate(mode: str, processes: int, extra: list[str], runs: str | None = None) -> str:
        # several processes agree on no fresh folder of their own: each mode's runs go to one named here
        folder = ["--output-dir", f"outputs/{runs or mode}"]
        return shlex.join(["accelerate", "launch", "--config_file", f"accelerate/{mode}.yaml", "--num_processes", str(processes),
                           *train, *folder, *extra])

    trainers = ",".join(str(i) for i in range(1, num_gpus))
    return {
        "single_gpu": shlex.join(["grpo-lite", "train", recipe]),
        "ddp": accelerate("ddp", num_gpus, MULTI_GPU),
        "zero2": accelerate("zero2", num_gpus, MULTI_GPU),
        "zero3": accelerate("zero3", num_gpus, ZERO3),
        "vllm_server": shlex.join(["trl", "vllm-serve", "--model", model]),
        "vllm_trainers": f"CUDA_VISIBLE_DEVICES={trainers} " + accelerate("ddp", num_gpus - 1, VLLM_SERVER, "vllm-trainers"),
    }


def recipe_from_run(run_dir: str | Path) -> RunSettings:
    """The settings of the run in ``run_dir``, from the run record (``run.yaml``) that :func:`grpo_lite.train`
    wrote, with reward weights a ``RewardSet`` chose made explicit (dataset not included)."""
    record = read_run(run_dir)
    settings = record.settings
    if settings.reward_weights is None and record.chosen.get("reward_weights") is not None:
        settings = dataclasses.replace(settings, reward_weights=record.chosen["reward_weights"])
    return settings


def write_launch_kit(source: Any, out_dir: str | Path, *, dataset=None, heldout=None, num_gpus: int = 2,
                     overwrite: bool = False) -> Path:
    """Write ``recipe.yaml``, ``accelerate/*.yaml`` and ``LAUNCH.md`` (the commands) into ``out_dir``.

    ``source``: run settings, a recipe dict, a recipe YAML path, or the output dir of a finished
    :func:`train` run. ``dataset``: a prepared ``datasets.Dataset`` (``prompt`` column) to ship as
    ``dataset.jsonl``, for runs whose data lives only in a notebook; ``heldout`` likewise, as ``heldout.jsonl``.
    Rewards imported from a file (``path/to/file.py:function``) are shipped beside the recipe. An ``out_dir`` holding
    a launch kit already is refused unless ``overwrite=True``. The recipe has no output_dir: each run of it on one GPU
    gets a fresh ``outputs/<model>-<n>``, and the commands for several processes name one folder per way of launching.
    """
    out = Path(out_dir)
    held = sorted(name for name in KIT_FILES if (out / name).exists())
    if held and not overwrite:
        raise ConfigError(f"{out} already holds a launch kit ({', '.join(held)}): write it into another folder (--out), or "
                          "replace it with overwrite=True (--overwrite)")
    if isinstance(source, RunSettings):
        settings = source
    elif isinstance(source, dict):
        settings = RunSettings.from_dict({**source, "output_dir": None}, "the recipe").validate("the recipe")
    elif Path(source).is_dir():
        settings = recipe_from_run(source)
        evaluated = read_run(source).chosen.get("heldout_rows")
        if evaluated and heldout is None and (settings.heldout is None or settings.heldout.data is None):
            logger.warning(f"the run evaluated {evaluated} held-out rows, which the launch kit cannot take from run.yaml: "
                           "pass heldout=<the held-out dataset> to ship them")
    else:
        settings = read_recipe(source)
    if settings.dataset is None and dataset is None:
        raise ConfigError("the run has no dataset: pass dataset=<the prepared dataset> to ship it with the launch kit")
    _check_importable(settings)
    commands = launch_commands(RECIPE_FILE, model=settings.model, num_gpus=num_gpus)
    (out / "accelerate").mkdir(parents=True, exist_ok=True)  # once the source is read: a bad one leaves no folder
    settings = dataclasses.replace(
        settings, rewards=[_shipped(reference, out) for reference in settings.rewards],
        **map_rollout_options(settings.rollout_references(), lambda reference, _: _shipped(reference, out)))
    if dataset is not None:
        dataset.to_json(str(out / "dataset.jsonl"))
        settings = dataclasses.replace(settings, dataset={"path": "dataset.jsonl", "prepared": True})
    if heldout is not None:
        heldout.to_json(str(out / "heldout.jsonl"))
        settings = dataclasses.replace(settings, heldout=dataclasses.replace(
            settings.heldout or Heldout(), data={"path": "heldout.jsonl", "prepared": True}))
    elif settings.heldout is not None and settings.heldout.data is None:  # rows run.yaml cannot hold, warned above
        settings = dataclasses.replace(settings, heldout=None)
    recipe = dataclasses.replace(settings, output_dir=None).to_dict()
    (out / RECIPE_FILE).write_text(yaml.safe_dump(recipe, sort_keys=False))
    for mode in ACCELERATE_MODES:
        (out / "accelerate" / f"{mode}.yaml").write_text(yaml.safe_dump(accelerate_config(mode, num_gpus), sort_keys=True))
    (out / "LAUNCH.md").write_text(_launch_doc(commands, num_gpus))
    return out


def _shipped(reference: Any, out: Path) -> Any:
    """A reward, tool, environment or rollout function imported from a file, as the kit's recipe names it: the file
    copied beside the recipe, which ``grpo-lite train`` reads such files relative to; any other reference as it is."""
    if (parts := split_file_reference(reference)) is None:
        return reference
    source, function = parts
    shutil.copyfile(source, out / Path(source).name)
    return f"{Path(source).name}:{function}"


def _check_importable(settings: RunSettings) -> None:
    """Every reward, tool, environment and rollout function the kit's run names can be imported there: none is the
    notebook's or script's own (``__main__:name``, which only its session imports), and each imports here."""
    from rewards import resolve_rewards
    from rewards.registry import is_session_reference

    named = [(f"rewards[{i}]", reference) for i, reference in enumerate(settings.rewards)]
    map_rollout_options(settings.rollout_references(), lambda reference, where: named.append((where, reference)))
    session = [(where, reference) for where, reference in named if is_session_reference(reference)]
    if session:
        listed = "; ".join(f"{where} {reference!r}" for where, reference in session)
        raise ConfigError(f"{listed}: defined in the notebook or script that trained the run, which the launch kit's run "
                          "cannot import: move it into a .py file (my_code.py next to the kit) and name it "
                          f"'my_code.py:{session[0][1].partition(':')[2]}'")
    settings.rollouts()  # a tool or environment named by a bare name, or made in a call, is refused, with the fix
    for reference in settings.rewards:
        try:
            resolve_rewards(reference)
        except ValueError as error:
            raise ConfigError(f"{error}; the launch kit's run could not load it") from None


def _launch_doc(commands: dict[str, str], num_gpus: int) -> str:
    return f"""# Launching this run

Run these from this folder. `{RECIPE_FILE}` is the run; the `accelerate/` files configure {num_gpus} processes.

One GPU (Unsloth when installed):

    {commands["single_gpu"]}

{num_gpus} GPUs, data parallel (DDP; the transformers backend, since Unsloth runs on one GPU):

    {commands["ddp"]}

DeepSpeed ZeRO-2 (optimizer and gradients sharded) / ZeRO-3 (weights sharded too; no 4-bit):

    {commands["zero2"]}
    {commands["zero3"]}

vLLM generation server on GPU 0, training on the others (start the server first, wait for it to listen):

    CUDA_VISIBLE_DEVICES=0 {commands["vllm_server"]}
    {commands["vllm_trainers"]}
"""
