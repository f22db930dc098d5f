"""Input read by its declared shape, through the Python API (the command line's lines are in test_bad_input.py).

Every setting declares its shape and fix, and a value of another shape is refused with that fix, naming the setting;
a run YAML is read strictly (a key given twice, NaN, a string where a mapping belongs); prepared rows are checked before
a chat template renders them; rewards keep a name each and come from files; a pandas DataFrame goes where rows go;
``plan`` checks its ranges; and every refusal is a UserError.
"""

import ast
import functools
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from grpo_lite import evaluate, load_model, plan, prepare_dataset, read_metrics, rescore_run, train
from grpo_lite.data.prepare import DatasetError
from grpo_lite.errors import NotFound, UserError
from grpo_lite.guards.user_code import guard
from grpo_lite.launch.cli import main
from grpo_lite.launch.kit import write_launch_kit
from grpo_lite.launch.recipe import apply_settings, read_recipe
from grpo_lite.machine import stack
from grpo_lite.machine.planner import PlanError
from grpo_lite.run.config import make_config
from grpo_lite.run.record import read_run
from grpo_lite.run.settings import ConfigError, Heldout, LoadSettings, RunSettings, declared
from grpo_lite.shapes import Declared
from rewards import check_rewards, resolve_rewards
from rewards.combine import reward_name

ROOT = Path(__file__).resolve().parents[1]
ROWS = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(8)]
QUICK = dict(preset="cpu-smoke", max_steps=1, num_generations=4, per_device_train_batch_size=4, max_completion_length=8,
             dashboard=False)
RECIPE = {"model": "tiny", "dataset": {"builtin": "arithmetic"}, "rewards": ["numeric_correctness_reward"],
          "preset": "cpu-smoke"}


@pytest.fixture
def dataset():
    return prepare_dataset(ROWS, system_prompt=None)


# --- each setting by its declared shape ------------------------------------------------------------------------------

@pytest.mark.parametrize("cls, prefix", [(RunSettings, ""), (LoadSettings, "load."), (Heldout, "heldout.")])
def test_every_setting_declares_its_shape_and_is_refused_by_its_fix(cls, prefix):
    """A value of no shape any setting takes (a set) is refused, for each field, with the fix the field declares."""
    for name, shape in declared(cls).items():
        assert isinstance(shape, Declared)
        if name == "data" or (cls is RunSettings and name in ("load", "heldout")):
            continue  # any object from Python: a dataset; a section's class
        base = {"model": "tiny", "rewards": ["exact_match_reward"], "preset": "cpu-smoke"} if cls is RunSettings else {}
        section = cls(**{**base, name: {"a set"}})
        settings = section if cls is RunSettings else RunSettings(model="tiny", rewards=["exact_match_reward"],
                                                                  preset="cpu-smoke", **{prefix[:-1]: section})
        fix = shape.fix or f"use {shape.wants()}" if shape.choices() else shape.fix or f"give {shape.wants()}"
        assert f"{prefix}{name}={{'a set'}}: {fix}" in settings.problems(), (name, settings.problems())


def test_grpo_config_fields_take_their_shape_from_grpo_config_s_own_types():
    problems = RunSettings(model="tiny", rewards=["exact_match_reward"], preset="cpu-smoke", overrides={
        "logging_first_step": "yes", "seed": 1.5, "warmup_steps": "soon", "report_to": {"a": 1},
        "lr_scheduler_type": "cosin", "max_completion_length": None}).problems()
    warmup = "a number" if stack.newer("warmup_steps_ratio") else "a whole number"  # transformers 4: steps, no ratio
    assert problems == ["logging_first_step='yes': use true or false", "seed=1.5: give a whole number",
                        f"warmup_steps='soon': give {warmup}", "report_to={'a': 1}: give null, text or a list of text",
                        problems[4], "max_completion_length=None: give a positive number of tokens (e.g. 256)"]
    assert problems[4].startswith("lr_scheduler_type='cosin': use linear, cosine") and "; did you mean cosine," in problems[4]


@pytest.mark.parametrize("keywords, said", [
    ({"learning_rate": math.nan}, "learning_rate=nan: give a number (NaN and infinity are not numbers a run can use)"),
    ({"beta": math.inf}, "beta=inf: give a number (NaN and infinity are not numbers a run can use)"),
    ({"reward_timeout": math.inf}, "reward_timeout=inf: give the seconds one reward call may take"),
    ({"reward_weights": {"numeric_correctness_reward": 2.0}}, "reward_weights={'numeric_correctness_reward': 2.0}: give one "
                                                              "number per reward function"),
    ({"rewards": {"numeric_correctness_reward": 2.0}}, "rewards={'numeric_correctness_reward': 2.0}: give reward or preset "
                                                       "names"),
    ({"heldout_n": -1, "heldout": "rows"}, "heldout.n=-1: give how many held-out rows to evaluate"),
    ({"overwrite": "yes"}, "overwrite='yes': use true or false"),
    ({"output_dir": 3}, "output_dir=3: give the folder for the run's files"),
    ({"max_completion_length": None}, "max_completion_length=None: give a positive number of tokens"),
    ({"num_generations": None}, "num_generations=None: GRPO compares completions within a group"),
    ({"deepspeed": "ds_config.json"}, "GRPOConfig rejected deepspeed='ds_config.json'"),
], ids=["nan", "inf-beta", "inf-timeout", "weights-a-mapping", "rewards-a-mapping", "heldout-n", "overwrite", "output-dir",
        "completion-length-none", "generations-none", "deepspeed"])
def test_train_refuses_by_the_declared_shape_before_writing(keywords, said, tiny_model, dataset, tmp_path):
    model, tokenizer = tiny_model
    keywords = {**QUICK, "output_dir": tmp_path / "run", **keywords}
    if keywords.get("heldout") == "rows":
        keywords["heldout"] = dataset
    rewards = keywords.pop("rewards", "numeric_correctness_reward")
    with pytest.raises(ConfigError, match=re.escape(said)):
        train(model, tokenizer, dataset, rewards, **keywords)
    assert not (tmp_path / "run" / "run.yaml").exists()


def test_load_model_refuses_by_the_declared_shape(tiny_model_dir):
    with pytest.raises(ConfigError, match=re.escape("load_model: target_modules=None: give module names")):
        load_model(str(tiny_model_dir), target_modules=None)
    with pytest.raises(ConfigError, match=re.escape("load_model: lora_dropout=nan: give a dropout between 0 and 1")):
        load_model(str(tiny_model_dir), lora_dropout=math.nan)


# --- the run YAML, read strictly -------------------------------------------------------------------------------------

def _recipe(tmp_path, text: str) -> Path:
    (tmp_path / "run.yaml").write_text(text)
    return tmp_path / "run.yaml"


def test_a_key_given_twice_is_refused_with_its_line(tmp_path):
    text = "model: tiny\nrewards: [exact_match_reward]\nload:\n  lora_rank: 8\n  lora_rank: 16\n"
    with pytest.raises(ConfigError, match=re.escape("run.yaml, line 5: 'lora_rank' is given twice (first on line 4); keep one")):
        read_recipe(_recipe(tmp_path, text))
    merged = "defaults: &d {max_steps: 5}\nmodel: tiny\nrewards: [exact_match_reward]\noverrides: {<<: *d, max_steps: 9}\n"
    with pytest.raises(ConfigError, match="unknown setting 'defaults'"):  # a merge key overridden is YAML's meaning, not a twice
        read_recipe(_recipe(tmp_path, merged))


def test_a_data_section_given_as_a_path_is_its_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.jsonl").write_text("".join(f'{{"question": "{r["question"]}", "answer": "{r["answer"]}"}}\n' for r in ROWS))
    _recipe(tmp_path, "model: tiny\nrewards: [numeric_correctness_reward]\npreset: cpu-smoke\ndataset: train.jsonl\n"
                      "heldout: train.jsonl\n")
    settings = read_recipe("run.yaml")
    assert settings.dataset == {"path": "train.jsonl"} and settings.heldout.data == {"path": "train.jsonl"}
    assert settings.problems() == []
    _recipe(tmp_path, yaml.safe_dump(RECIPE))
    assert apply_settings(read_recipe("run.yaml"), ["dataset=train.jsonl"]).dataset == {
        "path": "train.jsonl"}  # the new file replaces the built-in, as dataset.path=train.jsonl does


def test_numbers_written_as_text_are_read_as_numbers_in_every_section(tmp_path):
    text = ("model: tiny\nrewards: [exact_match_reward]\npreset: cpu-smoke\nreward_timeout: 1e3\nreward_weights: [2e0]\n"
            "load: {lora_dropout: 5e-2, lora_rank: '8'}\nheldout: {builtin: arithmetic, n: '20'}\noverrides: {beta: 4e-2}\n")
    settings = read_recipe(_recipe(tmp_path, text))
    assert (settings.reward_timeout, settings.reward_weights, settings.load.lora_dropout, settings.load.lora_rank,
            settings.heldout.n, settings.overrides["beta"]) == (1000.0, [2.0], 0.05, 8, 20, 0.04)
    nan = read_recipe(_recipe(tmp_path, "model: tiny\nrewards: [exact_match_reward]\noverrides: {beta: nan}\n"))
    assert nan.overrides["beta"] == "nan"  # text that is no finite number stays text, and is refused as text
    assert "beta='nan': give a number" in nan.problems()


# --- prepared rows ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("prompt, said", [
    ([], "the chat prompt is empty (no messages)"),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "  "}],
     "the chat prompt is empty (message 1, the user's, has no text)"),
    ([{"role": "system", "content": "Be brief."}], "the chat prompt has no user message (roles: system)"),
    ("", "the prompt is empty"),
], ids=["no-messages", "blank-user", "no-user", "empty-text"])
def test_prepared_rows_with_an_empty_prompt_are_refused_before_the_chat_template(prompt, said, tiny_model, dataset, tmp_path):
    model, tokenizer = tiny_model
    rows = [{"prompt": [{"role": "user", "content": r["question"]}] if isinstance(prompt, list) else r["question"],
             "answer": r["answer"]} for r in ROWS]
    rows[5]["prompt"] = prompt
    from datasets import Dataset

    def no_template(*args, **kwargs):
        raise AssertionError("the chat template rendered a row the check should have refused")

    tokenizer.apply_chat_template = no_template  # the row is refused before any template renders it
    with pytest.raises(DatasetError, match=re.escape(f"row 5, column 'prompt': {said}")):
        train(model, tokenizer, Dataset.from_list(rows), "numeric_correctness_reward", output_dir=tmp_path / "run", **QUICK)
    assert not (tmp_path / "run").exists()


# --- reward identity -------------------------------------------------------------------------------------------------

def test_two_anonymous_rewards_keep_a_curve_each_and_are_said(tiny_model, dataset, tmp_path, caplog):
    model, tokenizer = tiny_model
    rewards = [lambda completions, **kw: [1.0] * len(completions), lambda completions, **kw: [0.0] * len(completions)]
    with caplog.at_level("INFO", logger="grpo_lite"):
        result = train(model, tokenizer, dataset, rewards, output_dir=tmp_path, **QUICK)
    record = read_metrics(tmp_path)[-1]
    assert (record["rewards/<lambda>/mean"], record["rewards/<lambda>_2/mean"]) == (1.0, 0.0)
    assert result.trainer.reward_func_names == ["<lambda>", "<lambda>_2"]  # TRL's own reading, on either end
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("rewards of one name")]
    assert said == ["rewards of one name are logged apart (rewards/<name>/mean): '<lambda>' as <lambda>, <lambda>_2; give "
                    "them names of their own (def, or __name__)"]
    assert read_run(tmp_path).reward_names == ["<lambda>", "<lambda>_2"]


def test_two_partials_of_one_function_are_told_apart_in_the_lab_and_by_trl(tmp_path):
    def exact(completions, answer, bonus=0.0, **kwargs):
        return [float(c == a) + bonus for c, a in zip(completions, answer)]

    partials = [functools.partial(exact, bonus=0.0), functools.partial(exact, bonus=1.0)]
    report = check_rewards(partials, [{"prompt": "p", "completion": "4", "answer": "4"}])
    assert report.functions == ["exact", "exact_2"] and report.scores("exact_2") == [2.0]
    guarded = [guard(f, name=n) for f, n in zip(partials, report.functions)]
    # TRL's own reading: get_callable_name from TRL 1.9 (tests/test_reward_compat.py holds reward_name to it), __name__ before
    assert [reward_name(g) for g in guarded] == [g.__name__ for g in guarded] == ["exact", "exact_2"]


REWARD_FILE = "def judge(completions, **kwargs):\n    return [float(len(str(c)) % 2) for c in completions]\n"


def test_a_reward_file_is_imported_from_its_path_everywhere(tiny_model, dataset, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "my_rewards.py").write_text(REWARD_FILE)
    model, tokenizer = tiny_model
    result = train(model, tokenizer, dataset, ["lab/my_rewards.py:judge"], output_dir="run", **QUICK)  # a Python string
    assert "rewards/judge/mean" in result.metrics[-1]
    assert read_run("run").settings.rewards == ["lab/my_rewards.py:judge"]  # recorded so that it imports again
    (tmp_path / "lab" / "run.yaml").write_text(yaml.safe_dump({**RECIPE, "rewards": ["my_rewards.py:judge"]}))
    assert read_recipe("lab/run.yaml").rewards == ["lab/my_rewards.py:judge"]  # beside the YAML first
    settings = apply_settings(read_recipe("lab/run.yaml"), ["rewards=[lab/my_rewards.py:judge]"])  # --set
    assert settings.problems() == []
    (tmp_path / "rows.jsonl").write_text('{"completion": "ab", "answer": "4"}\n')
    assert main(["score", "--data", "rows.jsonl", "--rewards", "lab/my_rewards.py:judge"]) == 0
    assert "judge" in capsys.readouterr().out
    kit = write_launch_kit("run", tmp_path / "kit", dataset=dataset)
    assert yaml.safe_load((kit / "recipe.yaml").read_text())["rewards"] == ["my_rewards.py:judge"]
    assert (kit / "my_rewards.py").read_text() == REWARD_FILE  # shipped beside the recipe, which reads it from there


def test_a_reward_file_that_is_not_there_names_the_close_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_rewards.py").write_text(REWARD_FILE)
    with pytest.raises(UserError, match=re.escape("reward './my_rewrds.py:judge': no file './my_rewrds.py'; did you mean "
                                                  "my_rewards.py?")):
        resolve_rewards("./my_rewrds.py:judge")
    with pytest.raises(UserError, match=re.escape("reward 'my_rewards.py:jduge': file 'my_rewards.py' has no 'jduge'; did you "
                                                  "mean judge?")):
        resolve_rewards("my_rewards.py:jduge")


# --- what the field's users pass -------------------------------------------------------------------------------------

def test_a_data_frame_goes_where_rows_go(tiny_model, tmp_path):
    model, tokenizer = tiny_model
    frame = pd.DataFrame(ROWS)
    prepared = prepare_dataset(frame, system_prompt=None)
    assert prepared["question"] == [r["question"] for r in ROWS] and prepared["answer"] == [r["answer"] for r in ROWS]
    rows = [{"completion": "<answer>4</answer>", "answer": "4"}, {"completion": "<answer>5</answer>", "answer": "4"}]
    lab = check_rewards("exact_match_reward", pd.DataFrame(rows))
    assert lab.scores("exact_match_reward") == check_rewards("exact_match_reward", rows).scores("exact_match_reward")
    assert len(lab.rows) == 2  # rows, not the column names
    result = train(model, tokenizer, prepared.to_pandas(), ("numeric_correctness_reward",), output_dir=tmp_path / "run",
                   heldout=prepared.to_pandas(), heldout_n=2, reward_weights=np.array([2.0]), **QUICK)
    assert result.metrics and result.evaluation.base.n == 2
    assert read_run(result.output_dir).settings.reward_weights == [2.0]  # a tuple and an array, as lists
    assert evaluate(model, tokenizer, prepared.to_pandas(), heldout_n=2, max_completion_length=4, progress=None).n == 2
    from_frame = rescore_run(tmp_path / "run", "numeric_correctness_reward", pd.DataFrame(ROWS))
    assert from_frame.rows == rescore_run(tmp_path / "run", "numeric_correctness_reward", ROWS).rows and from_frame.rows


@pytest.mark.parametrize("keywords, said", [
    ({"max_prompt_tokens": -5}, "plan: max_prompt_tokens=-5: give the longest prompt in tokens, 1 or more"),
    ({"max_completion_length": 0}, "plan: max_completion_length=0: give the tokens per completion, 1 or more"),
    ({"num_generations": 1}, "plan: num_generations=1: GRPO compares completions within a group, so use 2 or more"),
    ({"lora_rank": 0}, "plan: lora_rank=0: give a LoRA rank of 1 or more"),
    ({"gpu": -16}, "plan: gpu=-16: give a GPU's name"),
    ({"gpu_memory_utilization": 1.5}, "plan: gpu_memory_utilization=1.5: give vLLM's share of the GPU between 0 and 1"),
    ({"max_prompt_tokens": 256.5}, "plan: max_prompt_tokens=256.5: give the longest prompt in tokens, 1 or more"),
], ids=["negative-prompt", "zero-completion", "one-generation", "zero-rank", "negative-gpu", "vllm-share", "fraction"])
def test_plan_checks_its_ranges(keywords, said):
    with pytest.raises(PlanError, match=re.escape(said)):
        plan("Qwen2.5-1.5B", **keywords)


def test_every_refusal_is_a_user_error(tmp_path, tiny_model):
    from grpo_lite import show_run
    from grpo_lite.model.inference import generate
    from grpo_lite.model.tiny import build_tokenizer
    from grpo_lite.monitor.dashboard import LiveDashboard
    from rewards.advantages import group_advantages
    from rewards.combine import Combined, RewardSet
    from rewards.length import IdealLength

    model, tokenizer = tiny_model
    refusals = {
        "an unknown reward": lambda: resolve_rewards("exact_mach_reward"),
        "rewards as a mapping": lambda: resolve_rewards({"exact_match_reward": 2.0}),
        "a reward of no kind": lambda: resolve_rewards([3]),
        "a reward option": lambda: IdealLength(ideal_words=0),
        "an empty RewardSet": lambda: RewardSet(),
        "an empty Combined": lambda: Combined(name="total"),
        "the lab with no rows": lambda: check_rewards("exact_match_reward", []),
        "the lab with a string": lambda: check_rewards("exact_match_reward", "rows.jsonl"),
        "an advantage setting": lambda: group_advantages(__import__("torch").zeros(2, 1), 2, scale_rewards="none!"),
        "a run folder without a record": lambda: read_run(tmp_path),
        "a run folder without metrics": lambda: show_run(tmp_path),
        "a dashboard view": lambda: LiveDashboard(view="widget"),
        "a dashboard share": lambda: LiveDashboard(max_overhead=2),
        "a tiny vocabulary": lambda: build_tokenizer(vocab_size=3),
        "a prompt of no kind": lambda: generate(model, tokenizer, [42]),
        "generate's adapter": lambda: generate(model, tokenizer, ["hi"], adapter="off"),
    }
    for what, refuse in refusals.items():
        try:
            refuse()
        except UserError:
            continue
        raise AssertionError(f"{what} was not refused")
    with pytest.raises(NotFound):
        read_run(tmp_path)


# A raise of a plain library exception left in the packages is one of these: a reward call's own fault (the guard
# scores that batch None and says why), a check that fails inside the code grader's sandbox, or an invariant of
# grpo-lite's own code. None refuses what a user gave.
NOT_REFUSALS = {
    ("rewards/extract.py", "TypeError"), ("rewards/length.py", "ValueError"), ("rewards/correctness.py", "ValueError"),
    ("rewards/code.py", "ValueError"), ("rewards/grading.py", "TypeError"),
    ("grpo_lite/data/arithmetic.py", "ValueError"), ("grpo_lite/monitor/figure.py", "ValueError"),
    ("grpo_lite/guards/time_limit.py", "ValueError"), ("grpo_lite/guards/time_limit.py", "RuntimeError"),
    ("grpo_lite/monitor/stop_button.py", "RuntimeError"),
    # the game's sandbox refusing what the model's strategy answered; an environment's tool, or the acting demo's
    # calculator, answering the model's move (TRL records it as a failed call and shows the model the message)
    ("rewards/game_play.py", "TypeError"), ("grpo_lite/environments/gymnasium_env.py", "ValueError"),
    ("grpo_lite/data/calculator.py", "ValueError"),
    ("grpo_lite/environments/episode.py", "ValueError"), ("grpo_lite/environments/http_env.py", "ValueError"),
}


def test_no_refusal_raises_a_plain_library_exception():
    found = set()
    for folder in ("grpo_lite", "rewards"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name):
                    if node.exc.func.id in ("ValueError", "TypeError", "KeyError", "FileNotFoundError", "RuntimeError"):
                        found.add((str(path.relative_to(ROOT)), node.exc.func.id))
    assert found <= NOT_REFUSALS, sorted(found - NOT_REFUSALS)


def test_make_config_names_the_option_grpo_config_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"GRPOConfig rejected accelerator_config='': FileNotFoundError"):
        make_config("cpu-smoke", output_dir=tmp_path, accelerator_config="")
