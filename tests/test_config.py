import pytest
from stacks import removed_here

from grpo_lite.machine import stack
from grpo_lite.run.config import config_from_dict, config_to_dict, make_config
from grpo_lite.run.presets import BASE, TRAINING_PRESETS
from grpo_lite.run.record import RunRecord, read_run
from grpo_lite.run.settings import ConfigError, RunSettings, resolve_options


def test_cpu_preset_builds_a_valid_config_with_kl_on(tmp_path):
    config = make_config("cpu-smoke", output_dir=tmp_path)
    assert config.use_cpu and not config.bf16
    assert config.beta == 0.04  # TRL's default is 0.0, which hides KL
    assert config.learning_rate == 1e-3 and config.logging_steps == 1


@pytest.mark.parametrize("name", sorted(set(TRAINING_PRESETS) - {"trl"}))  # trl: TRL's defaults (tests/test_porting.py)
def test_every_preset_has_the_recipe_defaults_and_divisible_batches(name):
    options = resolve_options("cpu-smoke") if name == "cpu-smoke" else {**BASE, **TRAINING_PRESETS[name]}
    assert options["adam_beta2"] == 0.99 and options["max_grad_norm"] == 0.1 and options["lr_scheduler_type"] == "cosine"
    batch = options.get("per_device_train_batch_size", 8) * options.get("gradient_accumulation_steps", 1)
    assert batch % options["num_generations"] == 0
    if name == "t4-16gb":
        assert options["fp16"] and not options["bf16"]


def test_the_values_given_are_left_as_written_where_transformers_fills_them_in_place(tmp_path):
    # transformers 4.56.2's TrainingArguments.__post_init__ writes min_num_params, xla, ... into the fsdp_config dict
    # it is given (transformers/training_args.py); the user's dict, and what run.yaml records of it, stay as written
    given = {"fsdp_config": {}, "model_init_kwargs": {"torch_dtype": "float32"}}
    config = make_config("cpu-smoke", output_dir=tmp_path, **given)
    assert given == {"fsdp_config": {}, "model_init_kwargs": {"torch_dtype": "float32"}}
    recorded = config_to_dict(config)
    again = dict(recorded)
    config_from_dict(again)
    assert again == recorded


def test_overrides_win_and_unknown_fields_suggest_a_name(tmp_path):
    config = make_config("cpu-smoke", output_dir=tmp_path, max_steps=3, num_generations=2)
    assert config.max_steps == 3 and config.num_generations == 2
    with pytest.raises(ConfigError, match="'num_generation' is not a GRPOConfig option; did you mean num_generations"):
        make_config("cpu-smoke", num_generation=4)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"num_generations": 3, "generation_batch_size": 4}, r"must be divisible by num_generations=3"),
        ({"num_generations": 1}, "use 2 or more"),
        ({"beta": -0.1}, "must be >= 0"),
        ({"max_steps": None}, "max_steps=None: give a positive number of steps, or -1"),
        ({"max_prompt_length": 0}, "max_prompt_length=0: give the longest prompt in tokens"),
        pytest.param({"warmup_ratio": 0.1, "warmup_steps": 10}, "warmup_ratio is the old name of warmup_steps",
                     marks=removed_here("warmup_ratio")),
        pytest.param({"logging_dir": "tb"}, "TENSORBOARD_LOGGING_DIR", marks=removed_here("logging_dir")),
        ({"bf16": True}, "mixed precision needs a GPU"),
        ({"learning_rate": 0}, "must be positive"),
    ],
)
def test_invalid_combinations_fail_before_loading_with_a_fix(overrides, message):
    with pytest.raises(ConfigError, match=message):
        resolve_options("cpu-smoke", **overrides)


def test_an_8bit_optimizer_without_bitsandbytes_fails_before_loading(monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bitsandbytes" else find_spec(name, *a))
    with pytest.raises(ConfigError, match="needs bitsandbytes"):
        resolve_options("cpu-smoke", optim="adamw_8bit")


def test_unknown_preset():
    with pytest.raises(ConfigError, match="unknown preset 'h100'"):
        make_config("h100")


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the CPU machine's refusal")
def test_gpu_preset_on_cpu_is_refused():
    with pytest.raises(ConfigError, match="needs a GPU"):
        make_config("l4-24gb", optim="adamw_torch")


def test_config_round_trips_through_yaml(tmp_path):
    config = make_config("cpu-smoke", output_dir=tmp_path, max_steps=7, reward_weights=[2.0, 0.5])
    path = RunRecord(RunSettings(model="tiny", rewards=["a", "b"]), grpo_config=config_to_dict(config)).write(tmp_path / "run.yaml")
    record = read_run(path)
    assert record.settings.model == "tiny" and record.settings.rewards == ["a", "b"]
    again = config_from_dict(record.grpo_config)
    for key in ("max_steps", "beta", "learning_rate", "num_generations", "reward_weights", "use_cpu", "lr_scheduler_type"):
        assert getattr(again, key) == getattr(config, key), key


@pytest.mark.seam
@pytest.mark.parametrize("given", ["gradient_checkpointing", "activation_checkpointing"])
def test_checkpointing_asked_under_either_name_is_passed_and_recorded_under_the_one_transformers_reads(tmp_path, given):
    """transformers 5.23 reads activation_checkpointing and takes gradient_checkpointing, its old name, only where the new
    one is unset when the config is built (transformers/training_args.py): a config given both keeps the new one's value
    without a word. grpo-lite passes, records and reads back the installed release's name only."""
    from trl import GRPOConfig

    read = stack.field_name(given)
    assert read == ("activation_checkpointing" if stack.newer("activation_checkpointing") else "gradient_checkpointing")
    config = make_config("cpu-smoke", output_dir=tmp_path, **{given: True})  # the preset turns it off
    assert getattr(config, read) is True
    recorded = config_to_dict(config)
    assert recorded[read] is True and not {*stack.RENAMED_FIELDS, *stack.RENAMED_FIELDS.values()} - {
        read, stack.field_name("gradient_checkpointing_kwargs")} & set(recorded)
    other = "activation_checkpointing" if read == "gradient_checkpointing" else "gradient_checkpointing"
    assert getattr(config_from_dict({**recorded, other: True, read: False}), read) is False  # both: the name read wins
    assert getattr(config_from_dict({"use_cpu": True, "bf16": False, other: True}), read) is True  # another release's record
    if stack.newer("activation_checkpointing"):  # what grpo-lite keeps users from: the old name beside the new one
        assert GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, activation_checkpointing=False,
                          gradient_checkpointing=True).activation_checkpointing is False
    with pytest.raises(ConfigError, match="gradient_checkpointing=True and activation_checkpointing=False both given: "
                                          "gradient_checkpointing is the old name of activation_checkpointing"):
        make_config("cpu-smoke", output_dir=tmp_path, gradient_checkpointing=True, activation_checkpointing=False)


@pytest.mark.seam
@pytest.mark.parametrize("name", ["t4-16gb", "l4-24gb", "a100-80gb"])
def test_the_gpu_presets_turn_checkpointing_on_under_the_name_the_installed_transformers_reads(name):
    from grpo_lite.run.presets import preset_values

    values = preset_values(name)
    assert values[stack.field_name("gradient_checkpointing")] is True
    assert not {*stack.RENAMED_FIELDS, *stack.RENAMED_FIELDS.values()} - {stack.field_name("gradient_checkpointing")} & set(values)
