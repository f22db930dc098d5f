"""A GRPO script as its user wrote it (the seed template, an Unsloth notebook, TRL's quick start) means on grpo-lite
what it meant where it was written: renamed and removed fields are carried over and said once, Unsloth's batch rule
applies on every backend, and what a preset changes from TRL's defaults is said and recorded."""

import contextlib
import dataclasses
from pathlib import Path

import pytest
import yaml
from ports.checks import changes_table
from stacks import prompts_trl_generates_from, removed_here

from grpo_lite import prepare_dataset, train
from grpo_lite.data.prepare import DatasetError
from grpo_lite.machine import stack
from grpo_lite.run.porting import port_overrides, still_a_field
from grpo_lite.run.presets import TRAINING_PRESETS, preset_values, trl_defaults, unavailable_values
from grpo_lite.run.settings import ConfigError, RunSettings, resolve_options

pytestmark = pytest.mark.seam  # .ci/run runs it on the newest releases too

# templates/basic_grpo_training.py's GRPOConfig(...) arguments, literally, but for the machine and the test's size:
# bf16=True and report_to="wandb" (a GPU and an account), num_generations=16 and max_completion_length=786.
SEED_TEMPLATE = dict(learning_rate=5e-6, adam_beta1=0.9, adam_beta2=0.99, weight_decay=0.1, warmup_ratio=0.1,
                     lr_scheduler_type="cosine", logging_steps=1, per_device_train_batch_size=1, gradient_accumulation_steps=4,
                     num_generations=4, max_prompt_length=256, max_completion_length=8, num_train_epochs=1, save_steps=100,
                     max_grad_norm=0.1, log_on_each_node=False, overwrite_output_dir=True)
# Carried over where the installed TRL and transformers removed them; a release that still has one takes it as written
# (the T4 notebook stack has all three: TRL 0.22 cuts long prompts itself).
TRANSLATED = {key: value for key, value in {"warmup_ratio": ("warmup_steps", 0.1), "max_prompt_length": None,
                                            "overwrite_output_dir": None}.items() if not still_a_field(key)}


def length_reward(completions, **kwargs):
    return [len(c[0]["content"]) % 3 / 2 for c in completions]


def _dataset(tokenizer, long_rows=1):
    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(4)]
    rows += [{"question": "Add these numbers: " + " + ".join(["1"] * 400), "answer": "400"}] * long_rows
    return prepare_dataset(rows, tokenizer=tokenizer)


def _differs_from_trl(config, output_dir, preset="cpu-smoke"):
    """Fields where the config trained with differs from TRL's GRPOConfig built with nothing but output_dir and what a
    CPU needs (so derived fields such as logging_dir compare equal), leaving out the generation batch, which TRL derives
    from the per-device batch and gradient_accumulation_steps; and what the table also says: a preset value the installed
    GRPOConfig has no field for, and report_to where TRL's default is None (transformers 4: every installed
    integration, which resolves to none here, as "none" does)."""
    from trl import GRPOConfig

    plain = GRPOConfig(output_dir=str(output_dir), use_cpu=True, bf16=False)
    # a renamed field's deprecated alias mirrors the name the installed release reads: one setting (stack.RENAMED_FIELDS)
    differs = {f.name for f in dataclasses.fields(GRPOConfig)
               if f.init and stack.field_name(f.name) == f.name and getattr(config, f.name) != getattr(plain, f.name)}
    if trl_defaults()["report_to"] is None and preset != "trl":
        differs.add("report_to")
    # transformers 4 stamps logging_dir's default with the time it was made
    return differs - {"generation_batch_size", "steps_per_generation", "logging_dir"} | set(unavailable_values(preset))


@pytest.mark.parametrize("preset", ["cpu-smoke", "trl"])
def test_the_seed_template_trains_on_the_first_try(tiny_model, tmp_path, capsys, preset):
    model, tokenizer = tiny_model
    capsys.readouterr()
    result = train(model, tokenizer, _dataset(tokenizer), [length_reward], preset=preset, output_dir=tmp_path,
                   dashboard=False, max_steps=2, **SEED_TEMPLATE)
    err = capsys.readouterr().err
    assert [m["step"] for m in result.metrics if "loss" in m][-1] == 2
    # the 400-number prompt is over max_prompt_length=256: kept, and cut by TRL or, where TRL removed the field, grpo-lite
    assert len(result.trainer.train_dataset) == 5

    said = [line for line in err.splitlines() if line.startswith("grpo-lite: ")]
    for old in SEED_TEMPLATE:  # each carried over said once, naming its new form; one the installed release has, never
        assert len([line for line in said if line.startswith((f"grpo-lite: {old}=", f"grpo-lite: {old} -> "))]) == (old in TRANSLATED), old
    assert ("grpo-lite: warmup_ratio=0.1 -> warmup_steps=0.1 (warmup_steps: 0.1 in a run YAML)" in err) == ("warmup_ratio" in TRANSLATED)
    assert ("max_prompt_length=256 -> a prompt over 256 tokens, as the chat template renders it, is cut to its last 256 "
            "for generation and training, as TRL before 0.28 cut it: TRL removed max_prompt_length" in err) == (
        "max_prompt_length" in TRANSLATED)
    cutter = "" if "max_prompt_length" in TRANSLATED else f"TRL {stack.installed('trl')} "
    assert f"grpo-lite: {cutter}cuts 1 of 5 prompts on the left to their last max_prompt_length=256 tokens" in err
    assert ("overwrite_output_dir=True: dropped: transformers 5 removed it" in err) == ("overwrite_output_dir" in TRANSLATED)
    assert "per_device_train_batch_size=1 ->" not in err  # 1 x 4 accumulation steps holds a group of 4
    assert "did you mean" not in err

    record = yaml.safe_load((tmp_path / "run.yaml").read_text())
    assert record["overrides"] == {"max_steps": 2, **SEED_TEMPLATE}  # as the user wrote them
    translated = {"warmup_ratio": {"warmup_steps": 0.1}, "max_prompt_length": {"cut_prompts_to": 256}, "overwrite_output_dir": None}
    assert record["chosen"].get("translated", {}) == {key: value for key, value in translated.items() if key in TRANSLATED}
    config = record["grpo_config"]
    for key, value in {"max_steps": 2, **SEED_TEMPLATE}.items():
        if key in TRANSLATED:
            assert TRANSLATED[key] is None or config[TRANSLATED[key][0]] == TRANSLATED[key][1], key
            assert key not in config
        else:
            assert config[key] == value, key
    sources = record["chosen"]["sources"]
    carried = {new for key, new in TRANSLATED.items() if new}
    assert {key for key, source in sources.items() if source == "user"} == {*SEED_TEMPLATE, "max_steps", *(n for n, _ in carried)} - set(TRANSLATED)

    table = changes_table(err)  # exactly the fields the user did not set whose value differs from TRL's default
    user = {key for key, source in sources.items() if source == "user"}
    assert set(table) == _differs_from_trl(result.trainer.args, tmp_path, preset) - user | {"use_cpu", "bf16"}
    assert set(table) <= {key for key, source in sources.items() if source in ("preset", "machine")} | set(unavailable_values(preset))
    if preset == "trl":  # TRL's defaults but for what a CPU needs
        assert set(table) == {"use_cpu", "bf16"} and table["bf16"][:2] == ["None", "False"]
        assert "no GPU here" in table["bf16"][2]
    else:
        assert table["beta"] == ["0.0", "0.04", "grpo-lite's base: KL on"]
        assert table["save_total_limit"][:2] == ["None", "2"] and table["use_cpu"][2] == "preset cpu-smoke"


def test_the_changes_table_lists_exactly_what_differs_from_trl(tiny_model, tmp_path, capsys):
    """No user overrides but the run's length: every other field differing from TRL's GRPOConfig is in the table."""
    model, tokenizer = tiny_model
    capsys.readouterr()
    result = train(model, tokenizer, _dataset(tokenizer, long_rows=0), [length_reward], preset="cpu-smoke",
                   output_dir=tmp_path, dashboard=False, max_steps=1)
    table = changes_table(capsys.readouterr().err)
    expected = _differs_from_trl(result.trainer.args, tmp_path) - {"max_steps"} | {"use_cpu", "bf16"}
    assert set(table) == expected
    defaults = trl_defaults()
    assert all(table[key][0] == str(defaults[key]) for key in table if key in defaults)
    for key in unavailable_values("cpu-smoke"):  # a preset value the installed TRL has no field for: said, not set
        assert table[key][:2] == ["(no such field)", "not set"] and "cannot apply" in table[key][2], table[key]
    assert yaml.safe_load((tmp_path / "run.yaml").read_text())["chosen"]["sources"] == {
        **dict.fromkeys(preset_values("cpu-smoke"), "preset"), "max_steps": "user"}


def test_an_unsloth_notebook_batch_is_raised_to_num_generations(tiny_model, tmp_path, capsys):
    model, tokenizer = tiny_model
    capsys.readouterr()
    train(model, tokenizer, _dataset(tokenizer, long_rows=0), [length_reward], preset="cpu-smoke", output_dir=tmp_path,
          dashboard=False, max_steps=1, per_device_train_batch_size=1, num_generations=4)
    err = capsys.readouterr().err
    assert err.count("grpo-lite: per_device_train_batch_size=1 -> 4: the generation batch") == 1
    assert "as Unsloth's GRPOConfig does" in err
    record = yaml.safe_load((tmp_path / "run.yaml").read_text())
    assert record["overrides"]["per_device_train_batch_size"] == 1  # as asked
    assert record["grpo_config"]["per_device_train_batch_size"] == 4 and record["grpo_config"]["generation_batch_size"] == 4
    assert record["chosen"]["sources"]["per_device_train_batch_size"] == "batch rule"
    assert "per_device_train_batch_size" not in changes_table(err)  # the user set it: said on its own line


@pytest.mark.parametrize("overrides, batch", [
    ({"per_device_train_batch_size": 1, "num_generations": 8}, 8),
    ({"per_device_train_batch_size": 6, "num_generations": 4}, 4),  # Unsloth's rule sets num_generations, down too
    ({"per_device_train_batch_size": 1, "gradient_accumulation_steps": 4, "num_generations": 4}, 1),
    ({"num_generations": 3}, 3),  # cpu-smoke's batch of 4
])
def test_the_batch_rule_is_unsloths(overrides, batch):
    assert resolve_options("cpu-smoke", **overrides)["per_device_train_batch_size"] == batch


def test_the_batch_rule_counts_processes(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert resolve_options("cpu-smoke", per_device_train_batch_size=2, num_generations=4)["per_device_train_batch_size"] == 2
    assert resolve_options("cpu-smoke", per_device_train_batch_size=3, num_generations=4)["per_device_train_batch_size"] == 4


def test_a_batch_that_cannot_be_fixed_is_still_refused():
    with pytest.raises(ConfigError, match=r"must be divisible by num_generations=4"):
        resolve_options("cpu-smoke", per_device_train_batch_size=3, steps_per_generation=1, num_generations=4)


@removed_here("warmup_ratio", "logging_dir", "max_prompt_length")
def test_what_cannot_be_translated_is_refused_at_once_with_its_fix():
    settings = RunSettings(model="tiny", rewards=["numeric_correctness_reward"], preset="cpu-smoke",
                           overrides={"warmup_ratio": 0.1, "warmup_steps": 5, "logging_dir": "tb", "max_prompt_length": -3,
                                      "vllm_device": "cuda:1", "num_generation": 4})
    with pytest.raises(ConfigError) as refused:
        settings.validate()
    lines = str(refused.value).splitlines()
    assert len(lines) == 5 and lines[:4] == [
        "the run: warmup_ratio=0.1 and warmup_steps=5 both given: warmup_ratio is the old name of warmup_steps; keep warmup_steps",
        "the run: max_prompt_length=-3: give the longest prompt in tokens (e.g. 256), or null for no limit",
        "the run: logging_dir: transformers 5 removed it; TensorBoard writes under output_dir unless the "
        "TENSORBOARD_LOGGING_DIR environment variable names another folder",
        "the run: vllm_device: TRL removed it; vLLM runs in the training process (vllm_mode='colocate') or as a server "
        "(vllm_mode='server', started with `trl vllm-serve`)",
    ]
    assert lines[4].startswith("the run: 'num_generation' is not a GRPOConfig option; did you mean ")


@pytest.mark.parametrize("old, value, new", [
    pytest.param(old, value, new, marks=removed_here(old) if old in stack.CHANGED_FIELDS else ()) for old, value, new in [
        ("evaluation_strategy", "steps", {"eval_strategy": "steps"}), ("no_cuda", True, {"use_cpu": True}),
        ("per_gpu_train_batch_size", 4, {"per_device_train_batch_size": 4}), ("max_new_tokens", 64, {"max_completion_length": 64}),
        ("include_inputs_for_metrics", True, {"include_for_metrics": ["inputs"]}), ("push_to_hub_token", "t", {"hub_token": "t"}),
        ("use_mps_device", True, None), ("overwrite_output_dir", True, None), ("max_prompt_length", None, None),
    ]
])
def test_renamed_fields_are_carried_over(old, value, new):
    ported = port_overrides("cpu-smoke", {old: value})
    assert ported.translated == {old: new} and not ported.problems and len(ported.notes) == 1
    assert ported.overrides == (new or {})
    resolve_options("cpu-smoke", **{old: value})  # and GRPOConfig takes the result


def test_rows_with_images_and_a_text_tokenizer_are_refused_before_the_run(tiny_model, tmp_path):
    model, tokenizer = tiny_model
    from PIL import Image

    Image.new("RGB", (8, 8)).save(tmp_path / "cat.png")  # an image that reads: rows with images are checked first
    dataset = _dataset(tokenizer).add_column("image", [str(tmp_path / "cat.png")] * 5)
    with pytest.raises(DatasetError, match=r"^the rows have images \(column 'image'\), and \w+ is a text tokenizer: pass "
                                           r"the vision model's processor \(transformers.AutoProcessor\), as load_model returns it with the model"):
        train(model, tokenizer, dataset, [length_reward], preset="cpu-smoke", output_dir=tmp_path / "run",
              dashboard=False, max_steps=1, max_prompt_length=8)
    assert not (tmp_path / "run").exists()  # refused before the run was written, let alone trained


# nb/gpt-oss-(20B)-GRPO.ipynb @ bdda2efc, cells 35 and 56-58, which install trl==0.22.2: the limit is the raw prompt's
# length + 1, under the length gpt-oss's chat template renders it to (its system header comes first).
GPT_OSS_PROMPT = """
Create a new fast matrix multiplication function using only native Python code.
You are given a list of list of numbers.
Output your new function in backticks using the format below:
```python
def matmul(A, B):
    return ...
```
""".strip()
GPT_OSS_ROWS = 4


def _rendered_ids(tokenizer, messages):
    """The prompt's tokens as TRL renders and tokenizes it (the generation prompt included, no special tokens added)."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


@pytest.fixture
def gpt_oss_notebook(tmp_path):
    """The notebook's model (the tiny Qwen2 with gpt-oss's chat template), loaded with its max_seq_length=768, its
    prompts, its max_prompt_length (the raw prompt's length + 1) and the prompt's tokens as the template renders it."""
    from datasets import Dataset

    from grpo_lite import load_model
    from grpo_lite.model.tiny import build_tiny_model

    template = (Path(__file__).parent / "data" / "chat_templates" / "gpt-oss.jinja").read_text()
    model, tokenizer = load_model(str(build_tiny_model(tmp_path / "gpt-oss", chat_template=template)), lora_rank=8,
                                  max_seq_length=GPT_OSS_MAX_SEQ_LENGTH)
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": GPT_OSS_PROMPT.strip()}], "answer": 0}] * GPT_OSS_ROWS)
    maximum_length = len(tokenizer(GPT_OSS_PROMPT.strip())["input_ids"])
    rendered = _rendered_ids(tokenizer, dataset[0]["prompt"])
    assert len(rendered) > maximum_length + 1  # the header the raw length leaves out
    return model, tokenizer, dataset, maximum_length + 1, rendered


GPT_OSS_MAX_SEQ_LENGTH = 768
# the notebook's GRPOConfig but for the machine, the steps and num_generations=2 in a batch of 2 (Unsloth's batch rule)
GPT_OSS_RUN = dict(preset="cpu-smoke", dashboard=False, max_steps=2, num_generations=2, per_device_train_batch_size=2,
                   temperature=1.0, learning_rate=5e-5, weight_decay=0.001, warmup_ratio=0.1, lr_scheduler_type="linear",
                   logging_steps=1, save_steps=100, report_to="none")
# the last raw + 1 tokens of the prompt as gpt-oss's template renders it: its header and the first words are cut
GPT_OSS_CUT = (" multiplication function using only native Python code.\nYou are given a list of list of "
               "numbers.\nOutput your new function in backticks using the format below:\n```python\ndef matmul(A, B):\n"
               "    return ...\n```<|end|><|start|>assistant")


@contextlib.contextmanager
def prompts_trained_on():
    """Record the prompt token ids of each row GRPOTrainer computes the loss on (its log-probability pass), padding left
    out: ``compute_loss(model, inputs)`` with ``prompt_ids`` and ``prompt_mask`` in TRL 0.22 and 1.15 alike."""
    from trl import GRPOTrainer

    trained: list[list[int]] = []
    real = GRPOTrainer.compute_loss

    def recording(self, model, inputs, *args, **kwargs):
        for ids, mask in zip(inputs["prompt_ids"], inputs["prompt_mask"]):
            trained.append(ids[mask.bool()].tolist())
        return real(self, model, inputs, *args, **kwargs)

    GRPOTrainer.compute_loss = recording
    try:
        yield trained
    finally:
        GRPOTrainer.compute_loss = real


def test_the_gpt_oss_notebooks_raw_prompt_limit_cuts_prompts_on_the_left_and_trains_on_both_stacks(gpt_oss_notebook, tmp_path,
                                                                                                  capsys):
    model, tokenizer, dataset, max_prompt_length, rendered = gpt_oss_notebook
    max_completion_length = GPT_OSS_MAX_SEQ_LENGTH - max_prompt_length  # the notebook's arithmetic, cell 58
    with prompts_trl_generates_from(model) as asked, prompts_trained_on() as trained:
        result = train(model, tokenizer, dataset, [length_reward], output_dir=tmp_path / "run", max_prompt_length=max_prompt_length,
                       max_completion_length=max_completion_length, **GPT_OSS_RUN)
    assert [m["step"] for m in result.metrics if "loss" in m] == [1, 2]
    assert len(result.trainer.train_dataset) == GPT_OSS_ROWS  # no row dropped
    # each prompt generated from and trained on is the rendered prompt's last raw + 1 tokens: the header is gone
    cut = rendered[-max_prompt_length:]
    assert asked and all(ids == cut for ids in asked)
    assert trained and all(ids == cut for ids in trained)
    assert tokenizer.decode(cut) == GPT_OSS_CUT  # the same text on both stacks
    cutter = f"TRL {stack.installed('trl')} " if still_a_field("max_prompt_length") else ""
    assert (f"grpo-lite: {cutter}cuts {GPT_OSS_ROWS} of {GPT_OSS_ROWS} prompts on the left to their last "
            f"max_prompt_length={max_prompt_length} tokens, the chat template's header first (they are {len(rendered)} "
            f"tokens as it renders them); max_prompt_length={len(rendered)} keeps them whole") in capsys.readouterr().err


def test_the_trl_preset_is_trls_defaults():
    assert TRAINING_PRESETS["trl"] == {}
    import torch

    options, defaults = resolve_options("trl"), trl_defaults()
    for_this_machine = {} if torch.cuda.is_available() else {"use_cpu": True, "bf16": False}
    # nothing of grpo-lite's: TRL's values (pinned where Unsloth's GRPOConfig replaced TRL's) and what a CPU needs
    assert {k: v for k, v in options.items() if k not in for_this_machine} == {k: defaults[k] for k in options if k not in for_this_machine}
    assert {k: options[k] for k in for_this_machine} == for_this_machine


@removed_here("warmup_ratio", "max_prompt_length", "overwrite_output_dir", "no_cuda")
def test_a_run_yaml_and_set_flags_carry_the_old_fields_over():
    """A notebook's GRPOConfig keywords pasted into a run YAML's overrides, or given as --set, pass the validator."""
    document = yaml.safe_load("model: tiny\nrewards: [numeric_correctness_reward]\npreset: cpu-smoke\noverrides:\n"
                              "  warmup_ratio: 0.1\n  max_prompt_length: 256\n  per_device_train_batch_size: 1\n"
                              "  num_generations: 8\n  overwrite_output_dir: true\n")
    settings = RunSettings.from_dict(document)
    assert settings.problems() == []
    settings = settings.with_setting("evaluation_strategy=steps").with_setting("no_cuda=true")
    assert settings.problems() == []
    ported = port_overrides(settings.preset, settings.overrides)
    assert ported.overrides == {"warmup_steps": 0.1, "per_device_train_batch_size": 8, "num_generations": 8,
                                "eval_strategy": "steps", "use_cpu": True}
    assert ported.cut_prompts_to == 256 and len(ported.notes) == 6
