"""One run record: what train() receives is what run.yaml holds, and the launch kit built from it is the same run."""

import dataclasses
import logging
import sys

import pytest
import torch
import yaml

from grpo_lite import load_model, prepare_dataset, train
from grpo_lite.launch.cli import build_parser, main
from grpo_lite.launch.kit import write_launch_kit
from grpo_lite.launch.recipe import read_recipe, run_recipe
from grpo_lite.run.presets import TRAINING_PRESETS
from grpo_lite.run.record import RunRecord, read_run
from grpo_lite.run.settings import ConfigError, Heldout, LoadSettings, RunSettings


def digit_reward(completions, answer, **kwargs):
    return [float(a in c[0]["content"]) for c, a in zip(completions, answer)]


def length_reward(completions, **kwargs):
    return [len(c[0]["content"]) / 10 for c in completions]


# Not the default of any setting, so a setting that a shape drops shows up as a difference; but bias: with beta != 0
# TRL's GRPOTrainer copies the LoRA config into a "ref" adapter (trl/trainer/grpo_trainer.py), and PEFT allows a bias on
# one adapter only, so a run with a trained bias and a KL term cannot start (tests/test_models.py checks bias reaches PEFT);
# and the language layers' attention, which the target modules name: without them no layer is left to adapt.
DEFAULT_HERE = {"bias", "finetune_language_layers", "finetune_attention_modules"}
LOAD = dict(backend="transformers", max_seq_length=512, load_in_4bit=False, fast_inference=False, lora_rank=4,
            lora_alpha=12, target_modules=["q_proj", "v_proj"], gpu_memory_utilization=0.3, seed=11,
            lora_dropout=0.05, bias="none", use_rslora=True, init_lora_weights="gaussian", modules_to_save=["lm_head"],
            layers_to_transform=[0], layers_pattern="layers", ensure_weight_tying=True,
            chat_template="{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:",
            from_pretrained={"attn_implementation": "eager"}, finetune_vision_layers=True, finetune_language_layers=True,
            finetune_attention_modules=True, finetune_mlp_modules=False)
TRAIN = dict(preset="cpu-smoke", reward_weights=[2.0, 0.5], reward_timeout=45.0, heldout_n=2, heldout_samples=2,
             overrides=dict(max_steps=1, num_generations=2, per_device_train_batch_size=2, max_completion_length=6,
                            learning_rate=3e-5, beta=0.02, temperature=0.7, seed=5))
HELDOUT = {"heldout_n": "n", "heldout_samples": "samples"}  # train()'s keywords for the fields of RunSettings.heldout
# The GRPOConfig fields that name where a run writes, which differ between two runs of the same settings.
WHERE = {"output_dir", "logging_dir", "run_name"}


def test_every_load_and_train_setting_differs_from_its_default():
    load_defaults, run_defaults, heldout_defaults = LoadSettings(), RunSettings(model="m", rewards=["r"]), Heldout()
    assert {name for name in LOAD if LOAD[name] == getattr(load_defaults, name)} == DEFAULT_HERE
    assert {f.name for f in dataclasses.fields(LoadSettings)} == set(LOAD)
    assert {name for name in TRAIN if name not in HELDOUT and TRAIN[name] == getattr(run_defaults, name)} == set()
    assert {name for name, field in HELDOUT.items() if TRAIN[name] == getattr(heldout_defaults, field)} == set()
    assert TRAIN["preset"] in TRAINING_PRESETS


def test_a_run_and_the_launch_kit_built_from_it_are_configured_identically(tiny_model_dir, tmp_path, caplog):
    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(4)]
    with caplog.at_level(logging.WARNING, logger="grpo_lite"):
        model, tokenizer = load_model(str(tiny_model_dir), **{k: v for k, v in LOAD.items() if k != "from_pretrained"},
                                      **LOAD["from_pretrained"])
    assert "gpu_memory_utilization=0.3 is ignored" in caplog.text  # an option this backend cannot use is said
    assert model.config._attn_implementation == "eager"
    dataset = prepare_dataset(rows, tokenizer=tokenizer)
    first = train(model, tokenizer, dataset, [digit_reward, length_reward], output_dir=tmp_path / "first",
                  dashboard=False, heldout=dataset, **{k: v for k, v in TRAIN.items() if k != "overrides"},
                  **TRAIN["overrides"])

    record = read_run(first.output_dir)
    assert record.settings.load == LoadSettings(**LOAD)
    assert {key: getattr(record.settings, key) for key in TRAIN if key not in HELDOUT} == {
        key: value for key, value in TRAIN.items() if key not in HELDOUT}
    assert {key: getattr(record.settings.heldout, field) for key, field in HELDOUT.items()} == {key: TRAIN[key] for key in HELDOUT}
    assert record.settings.rewards == [f"{__name__}:digit_reward", f"{__name__}:length_reward"]
    assert record.chosen["backend"] == "transformers" and record.chosen["preset"] == "cpu-smoke"

    kit = write_launch_kit(first.output_dir, tmp_path / "kit", dataset=dataset, heldout=dataset)
    again = run_recipe(read_recipe(kit / "recipe.yaml"), output_dir=tmp_path / "again")
    second = read_run(again.output_dir)
    assert second.settings == record.settings
    assert second.chosen == record.chosen
    differing = {key for key in record.grpo_config if record.grpo_config[key] != second.grpo_config[key]}
    assert differing <= WHERE
    lora, lora_again = first.model.peft_config["default"], again.model.peft_config["default"]
    assert (lora_again.r, lora_again.lora_alpha, lora_again.target_modules) == (4, 12, {"q_proj", "v_proj"})
    assert (lora.r, lora.lora_alpha, lora.target_modules) == (lora_again.r, lora_again.lora_alpha, lora_again.target_modules)
    peft_options = ("lora_dropout", "bias", "use_rslora", "init_lora_weights", "layers_to_transform", "layers_pattern",
                    "ensure_weight_tying")
    for config in (lora, lora_again):  # the LoRA options reach PEFT's LoraConfig, in the run and in its launch kit's rerun
        assert {name: getattr(config, name) for name in peft_options} == {name: LOAD[name] for name in peft_options}
        assert "lm_head" in config.modules_to_save or "lm_head" in (getattr(config, "modules_to_tie", None) or [])
    assert again.model.config._attn_implementation == "eager"
    assert again.evaluation.trained.n == first.evaluation.trained.n == 2 and 2 in again.evaluation.trained.pass_at_k


def test_run_yaml_round_trips(tmp_path):
    settings = RunSettings(model="m", rewards=["exact_match_reward"], load=LoadSettings(lora_rank=32),
                           reward_weights=[2.0], reward_timeout=None, overrides={"max_steps": 3})
    assert RunSettings.from_dict(yaml.safe_load(yaml.safe_dump(settings.to_dict()))) == settings
    RunRecord(settings, chosen={"backend": "unsloth"}, grpo_config={"beta": 0.04}).write(tmp_path / "run.yaml")
    record = read_run(tmp_path)
    assert record.settings == settings
    assert record.fixed() == {"model": "m", "backend": "unsloth", "lora_rank": 32, "rewards": ["exact_match_reward"],
                              "chat_template_kwargs": {}}
    assert record.grpo_config == {"beta": 0.04}


def test_unknown_settings_are_refused_with_the_close_names(tmp_path, capsys):
    recipe = tmp_path / "run.yaml"
    recipe.write_text("model: tiny\ndataset: {builtin: arithmetic}\nrewards: [r]\nrewards_weights: [1]\n")
    with pytest.raises(ConfigError, match="run.yaml: unknown setting 'rewards_weights'; did you mean reward_weights"):
        read_recipe(recipe)
    recipe.write_text("model: tiny\ndataset: {builtin: arithmetic}\nrewards: [r]\nload: {max_seq_len: 1024}\n")
    with pytest.raises(ConfigError, match="load: unknown setting 'max_seq_len'; did you mean max_seq_length"):
        read_recipe(recipe)
    recipe.write_text("model: tiny\ndataset: {builtin: arithmetic}\nrewards: [gsm8k]\nreward_weights: [1, 1]\n")
    with pytest.raises(ConfigError, match=r"reward_weights has 2 values for the 5 reward functions of \['gsm8k'\]"):
        read_recipe(recipe).validate()
    recipe.write_text("model: tiny\ndataset: {builtin: arithmetic}\nrewards: [gsm8k]\nreward_weights: [1, 1, 1, 1, 1]\n")
    read_recipe(recipe).validate()  # a preset stands for its functions, one weight each
    recipe.write_text("model: tiny\ndataset: {builtin: arithmetic}\nrewards: [gsm8kk]\npreset: cpu-smoke\n")
    assert main(["train", str(recipe)]) == 2  # before any model loads, in one line
    assert capsys.readouterr().err.strip().splitlines() == [
        "grpo-lite: the run: unknown reward 'gsm8kk'; did you mean gsm8k?; presets are ['code', 'gsm8k', 'math', 'qa', "
        "'summarization']; rewards.registry.REWARDS names every reward, and 'module:function' imports your own"]
    recipe.write_text("model: tiny\ndataset: {builtin: arithmetic}\nrewards: [a]\nheldout: {builtin: arithmetic, samples: 0}\n")
    with pytest.raises(ConfigError, match=r"heldout\.samples=0: give the sampled completions"):
        read_recipe(recipe).validate()


def test_train_help_lists_every_setting_with_its_help():
    train_parser = build_parser()._subparsers._group_actions[0].choices["train"]
    text = train_parser.format_help()
    for f in dataclasses.fields(RunSettings):
        assert f"  {f.name} " in text and f.metadata["help"][:30] in " ".join(text.split())
    for section, cls in (("load", LoadSettings), ("heldout", Heldout)):
        for f in dataclasses.fields(cls):
            assert f"  {section}.{f.name} " in text


def test_the_seed_decides_the_adapters_initial_weights_on_the_transformers_backend(tiny_model_dir):
    def lora_a(seed):
        model, _ = load_model(str(tiny_model_dir), backend="transformers", load_in_4bit=False, lora_rank=4, seed=seed)
        return next(p for n, p in model.named_parameters() if "lora_A" in n).detach().clone()

    assert torch.equal(lora_a(1), lora_a(1))
    assert not torch.equal(lora_a(1), lora_a(2))


def test_max_seq_length_is_enforced_on_the_transformers_backend(tiny_model_dir, tmp_path):
    model, tokenizer = load_model(str(tiny_model_dir), backend="transformers", load_in_4bit=False, lora_rank=4,
                                  max_seq_length=16)
    dataset = prepare_dataset([{"question": "What is 1 + 1?", "answer": "2"}] * 2, tokenizer=tokenizer)
    with pytest.raises(ValueError, match="exceeds the model's max_seq_length=16"):
        train(model, tokenizer, dataset, [digit_reward], preset="cpu-smoke", output_dir=tmp_path, dashboard=False,
              max_steps=1, num_generations=2, per_device_train_batch_size=2, max_completion_length=16)


def test_a_launch_kit_refuses_a_reward_it_could_not_import(tmp_path, monkeypatch):
    def made_in_a_function(completions, **kwargs):
        return [0.0] * len(completions)

    def numeric_correctness_reward(completions, **kwargs):  # a notebook's own, named as a built-in is
        return [1.0] * len(completions)

    from grpo_lite.run.record import reward_reference
    from rewards import resolve_rewards

    numeric_correctness_reward.__module__ = "__main__"
    numeric_correctness_reward.__qualname__ = "numeric_correctness_reward"
    monkeypatch.setattr(sys.modules["__main__"], "numeric_correctness_reward", numeric_correctness_reward, raising=False)
    made = reward_reference(made_in_a_function)
    assert made == f"{__name__}:{made_in_a_function.__qualname__}"  # no module holds it: reads back as nothing
    assert reward_reference(digit_reward) == f"{__name__}:digit_reward"
    notebook = reward_reference(numeric_correctness_reward)
    assert notebook == "__main__:numeric_correctness_reward"  # not the built-in's name, which reads back as the built-in
    assert resolve_rewards(notebook)[0] == [numeric_correctness_reward]  # in the session that made it, itself
    for reference, said in ((made, r"was made inside a function or a call, .* define it at the top level of a \.py file"),
                            (notebook, r"rewards\[0\] '__main__:numeric_correctness_reward': defined in the notebook or "
                                       r"script that trained the run, .* name it 'my_code\.py:numeric_correctness_reward'")):
        settings = RunSettings(model="m", rewards=[reference], dataset={"builtin": "arithmetic"})
        with pytest.raises(ValueError, match=said):
            write_launch_kit(settings, tmp_path / "kit")
        assert not (tmp_path / "kit").exists()


def test_from_pretrained_keywords_of_any_type_are_recorded(tiny_model_dir, tmp_path):
    model, tokenizer = load_model(str(tiny_model_dir), backend="transformers", load_in_4bit=False, lora_rank=4,
                                  dtype=torch.bfloat16)
    dataset = prepare_dataset([{"question": "What is 1 + 1?", "answer": "2"}] * 2, tokenizer=tokenizer)
    train(model, tokenizer, dataset, [digit_reward], preset="cpu-smoke", output_dir=tmp_path, dashboard=False,
          max_steps=1, num_generations=2, per_device_train_batch_size=2, max_completion_length=4)
    recorded = read_run(tmp_path).settings.load.from_pretrained
    assert recorded == {"dtype": "bfloat16"}
    model, _ = load_model(str(tiny_model_dir), backend="transformers", load_in_4bit=False, lora_rank=4, **recorded)
    assert model.dtype == torch.bfloat16  # the recorded name loads the same dtype
