"""Launch kits for more GPUs: configs that accelerate loads, commands that each tool's parser accepts."""

import shlex
from pathlib import Path

import pytest
import yaml
from accelerate.commands.config.config_args import load_config_from_file
from accelerate.commands.launch import launch_command_parser

from grpo_lite.launch.cli import build_parser
from grpo_lite.launch.kit import ACCELERATE_MODES, accelerate_config, write_launch_kit
from grpo_lite.launch.recipe import apply_settings, read_recipe

ROOT = Path(__file__).resolve().parents[1]
EXPECTED_TYPES = {"ddp": "MULTI_GPU", "zero2": "DEEPSPEED", "zero3": "DEEPSPEED"}


def _without_env(command: str) -> list[str]:
    argv = shlex.split(command)
    while argv and "=" in argv[0] and argv[0].split("=")[0].isupper():
        argv = argv[1:]
    return argv


def _parse_launch(command: str):
    argv = _without_env(command)
    if argv[:2] == ["accelerate", "launch"]:
        launch = launch_command_parser().parse_args(argv[2:])
        assert launch.module and launch.training_script == "grpo_lite"
        return launch, build_parser().parse_args(launch.training_script_args)
    assert argv[0] == "grpo-lite"
    return None, build_parser().parse_args(argv[1:])


@pytest.mark.parametrize("mode", sorted(ACCELERATE_MODES))
def test_shipped_accelerate_configs_load_and_match_the_generator(mode):
    path = ROOT / "examples" / "accelerate" / f"{mode}.yaml"
    assert yaml.safe_load(path.read_text()) == accelerate_config(mode, 2)
    assert load_config_from_file(str(path)).distributed_type.value == EXPECTED_TYPES[mode]


def test_launch_kit_writes_a_kit_whose_commands_parse(tmp_path):
    kit = write_launch_kit(ROOT / "examples" / "tiny_cpu.yaml", tmp_path / "kit", num_gpus=4)
    recipe = read_recipe(kit / "recipe.yaml")
    assert recipe.model == "tiny" and recipe.output_dir is None
    doc = (kit / "LAUNCH.md").read_text()
    commands = [line.strip() for line in doc.splitlines() if line.startswith("    ")]
    assert len(commands) == 6
    for command in commands:
        if "vllm-serve" in command:
            from trl.scripts.vllm_serve import make_parser

            argv = _without_env(command)
            assert argv[:2] == ["trl", "vllm-serve"]
            (served,) = make_parser().parse_args_and_config(argv[2:])
            assert served.model == "tiny"
            continue
        launch, train = _parse_launch(command)
        assert train.command == "train" and train.config == Path("recipe.yaml")
        if launch is not None:
            config = load_config_from_file(str(kit / launch.config_file))
            assert config.num_processes == 4
            applied = apply_settings(recipe, train.set)
            assert applied.load.backend == "transformers"  # Unsloth is single-GPU
    vllm_trainers = next(c for c in commands if c.startswith("CUDA_VISIBLE_DEVICES=1,2,3 "))
    launch, train = _parse_launch(vllm_trainers)
    assert launch.num_processes == 3
    assert apply_settings(recipe, train.set).overrides["vllm_mode"] == "server"


def test_write_launch_kit_from_a_notebook_run_ships_the_prepared_dataset(tmp_path):
    from grpo_lite import prepare_dataset
    from grpo_lite.run.config import config_to_dict, make_config

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # a run record as train() writes it, for a model load_model did not load (no load settings)
    (run_dir / "run.yaml").write_text(yaml.safe_dump({
        "model": "Qwen/Qwen2.5-0.5B-Instruct", "rewards": ["exact_match_reward"], "reward_weights": [2.0],
        "preset": "auto", "overrides": {"max_steps": 9}, "reward_timeout": 120.0,
        "chosen": {"backend": "unsloth", "lora_rank": 16},
        "grpo_config": config_to_dict(make_config("cpu-smoke", output_dir=run_dir))}))
    with pytest.raises(ValueError, match="pass dataset="):
        write_launch_kit(run_dir, tmp_path / "kit")
    dataset = prepare_dataset([{"question": "1+1?", "answer": "2"}])
    kit = write_launch_kit(run_dir, tmp_path / "kit", dataset=dataset)
    recipe = read_recipe(kit / "recipe.yaml")
    assert recipe.load is None and recipe.reward_weights == [2.0]  # a model load_model did not load has none
    assert recipe.overrides == {"max_steps": 9} and recipe.reward_timeout == 120.0
    assert recipe.dataset["prepared"] and Path(recipe.dataset["path"]) == kit / "dataset.jsonl"


def test_settings_route_to_sections_and_are_validated():
    from grpo_lite.run.settings import ConfigError, LoadSettings, RunSettings

    recipe = RunSettings(model="m", dataset={"builtin": "arithmetic"}, rewards=["r"], preset="cpu-smoke")
    applied = apply_settings(recipe, ["max_steps=5", "load.load_in_4bit=false", "dataset.max_prompt_tokens=64",
                                      "preset=cpu-smoke", "reward_timeout=30"])
    assert applied.overrides == {"max_steps": 5} and applied.reward_timeout == 30
    assert applied.load == LoadSettings(load_in_4bit=False) and applied.dataset["max_prompt_tokens"] == 64
    assert recipe.overrides == {} and recipe.load is None  # the original is left alone

    with pytest.raises(ConfigError, match="KEY=VALUE"):
        apply_settings(recipe, ["max_steps"])
    with pytest.raises(ConfigError, match="did you mean max_steps"):
        apply_settings(recipe, ["max_step=5"]).validate()
    with pytest.raises(ConfigError, match="unknown setting 'lora_rnak'; did you mean lora_rank"):
        apply_settings(recipe, ["load.lora_rnak=8"])


def test_reward_timeout_in_the_recipe_and_on_the_command_line(tmp_path):
    from grpo_lite.run.settings import ConfigError

    recipe = tmp_path / "run.yaml"
    recipe.write_text("model: tiny\ndataset: {builtin: arithmetic}\nrewards: [r]\npreset: cpu-smoke\nreward_timeout: 30\n")
    assert read_recipe(recipe).reward_timeout == 30
    recipe.write_text("model: tiny\ndataset: {builtin: arithmetic}\nrewards: [r]\npreset: cpu-smoke\nreward_timeout: -1\n")
    with pytest.raises(ConfigError, match="reward_timeout=-1: give the seconds one reward call may take"):
        read_recipe(recipe).validate()
    assert build_parser().parse_args(["train", "r.yaml", "--reward-timeout", "90"]).reward_timeout == 90.0
    assert build_parser().parse_args(["train", "r.yaml", "--reward-timeout", "none"]).reward_timeout is None
    assert "reward_timeout" not in vars(build_parser().parse_args(["train", "r.yaml"]))  # the recipe's value stays
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "r.yaml", "--reward-timeout", "0"])
    # the other kinds of user code's time limits, as the run YAML's settings
    given = build_parser().parse_args(["train", "r.yaml", "--tool-timeout", "5", "--rollout-timeout", "none"])
    assert (given.tool_timeout, given.rollout_timeout) == (5.0, None)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "r.yaml", "--tool-timeout", "-1"])
