"""One validator and one "did you mean", whichever way a run is described: train()'s keywords, a run YAML, --set.

Each case is refused with the same line by all three, before a model loads (the YAML and --set ones load none), and
every problem of a run comes at once."""

import re

import pytest
import yaml

from grpo_lite import prepare_dataset, train
from grpo_lite.launch.cli import build_parser, main
from grpo_lite.run.presets import TRAINING_PRESETS
from grpo_lite.run.settings import ConfigError, RunSettings

RECIPE = {"model": "tiny", "dataset": {"builtin": "arithmetic"}, "rewards": ["numeric_correctness_reward"],
          "preset": "cpu-smoke"}
# (the --set flag, train()'s keywords, the recipe's change, the line each says)
CASES = [
    ("num_generation=4", {"num_generation": 4}, {"overrides": {"num_generation": 4}},
     "'num_generation' is not a GRPOConfig option; did you mean num_generations"),
    ("preset=t4", {"preset": "t4"}, {"preset": "t4"}, "unknown preset 't4'; did you mean t4-16gb?"),
    ("rewards=[numeric_corectness_reward]", {"rewards": ["numeric_corectness_reward"]},
     {"rewards": ["numeric_corectness_reward"]}, "unknown reward 'numeric_corectness_reward'; did you mean "
     "numeric_correctness_reward"),
    ("beta=-1", {"beta": -1}, {"overrides": {"beta": -1}}, "beta=-1: the KL coefficient must be >= 0"),
    ("reward_timeout=0", {"reward_timeout": 0}, {"reward_timeout": 0}, "reward_timeout=0: give the seconds"),
]


@pytest.mark.parametrize("flag, keywords, change, message", CASES, ids=[case[0] for case in CASES])
def test_python_yaml_and_set_are_refused_alike(flag, keywords, change, message, tiny_model, tmp_path, capsys):
    model, tokenizer = tiny_model
    dataset = prepare_dataset([{"question": "1+1?", "answer": "2"}] * 4, system_prompt=None)
    rewards = keywords.pop("rewards", ["numeric_correctness_reward"])
    with pytest.raises(ConfigError, match=re.escape(message)):
        train(model, tokenizer, dataset, rewards, output_dir=tmp_path / "python", dashboard=False,
              **{"preset": "cpu-smoke", **keywords})
    assert not (tmp_path / "python").exists()  # refused before the run folder exists

    recipe = tmp_path / "run.yaml"
    recipe.write_text(yaml.safe_dump({**RECIPE, **change}))
    assert main(["train", str(recipe), "--output-dir", str(tmp_path / "yaml")]) == 2
    assert message in capsys.readouterr().err

    recipe.write_text(yaml.safe_dump(RECIPE))
    assert main(["train", str(recipe), "--output-dir", str(tmp_path / "set"), "--set", flag]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "yaml").exists() and not (tmp_path / "set").exists()


def test_every_problem_of_a_run_is_named_at_once():
    settings = RunSettings(model="tiny", rewards=["gsm8kk"], preset="cpu-smoke", reward_timeout=-1,
                           overrides={"num_generation": 4, "vllm_device": "cuda:1"})
    with pytest.raises(ConfigError) as refused:
        settings.validate()
    lines = str(refused.value).splitlines()
    assert len(lines) == 4 and all(line.startswith("the run: ") for line in lines)
    assert ["reward_timeout=-1" in lines[0], "'num_generation'" in lines[1], "vllm_device: TRL removed it" in lines[2],
            "unknown reward 'gsm8kk'" in lines[3]] == [True] * 4


def test_help_names_only_presets_that_exist():
    commands = build_parser()._subparsers._group_actions[0].choices
    text = " ".join(" ".join(parser.format_help().split()) for parser in commands.values())
    named = set(re.findall(r"preset=([\w-]+)", text))
    listed = re.search(r"training preset \(([^)]*)\)", text).group(1).split(", ")
    assert named and named <= set(TRAINING_PRESETS)
    assert listed == ["auto", *TRAINING_PRESETS]


def test_trained_biases_with_kl_on_are_refused_before_loading():
    from grpo_lite.run.settings import LoadSettings

    settings = RunSettings(model="tiny", rewards=["numeric_correctness_reward"], preset="cpu-smoke",
                           load=LoadSettings(bias="all"))
    assert any("load.bias='all' with beta=0.04" in problem for problem in settings.problems())
    settings.overrides = {"beta": 0.0}
    assert settings.problems() == []
