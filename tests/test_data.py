import json

import pytest
from datasets import Dataset
from stacks import newer_only

from grpo_lite import REASONING_SYSTEM_PROMPT, load_builtin, prepare_dataset
from grpo_lite.data.prepare import DatasetError


def test_rows_become_chat_prompts_with_gsm8k_answers_extracted():
    ds = prepare_dataset([{"question": "Half of 84?", "answer": "84 / 2 = 42\n#### 42", "level": 1}])
    row = ds[0]
    assert row["prompt"] == [
        {"role": "system", "content": REASONING_SYSTEM_PROMPT},
        {"role": "user", "content": "Half of 84?"},
    ]
    assert row["answer"] == "42"
    assert row["solution"].endswith("#### 42")
    assert row["level"] == 1  # other columns reach the reward functions


def test_a_gold_column_of_another_name_keeps_its_name_and_values_beside_the_extracted_answer():
    # open-r1 / TRL datasets hold the gold in ``solution`` (read by accuracy_reward(completions, solution, **kwargs));
    # it used to be replaced by ``answer`` and the question column dropped.
    rows = [{"problem": "Half of 84?", "solution": "84 / 2 = 42\n#### 42", "expert": 7}, {"problem": "2 + 2?", "solution": 4, "expert": 8}]
    for source in (rows, Dataset.from_list([{**row, "solution": str(row["solution"])} for row in rows])):
        ds = prepare_dataset(source, question="problem", answer="solution")
        assert ds["answer"] == ["42", "4"] and ds["problem"] == ["Half of 84?", "2 + 2?"] and ds["expert"] == [7, 8]
        assert [str(s) for s in ds["solution"]] == ["84 / 2 = 42\n#### 42", "4"]  # unchanged, not the extracted gold
    numbers = prepare_dataset([{**row, "solution": i + 40} for i, row in enumerate(rows)], question="problem", answer="solution")
    assert numbers["solution"] == [40, 41] and numbers["answer"] == ["40", "41"]  # its type too


def test_the_gsm8k_full_text_never_overwrites_a_users_own_solution_column():
    rows = [{"question": "Half of 84?", "answer": "84 / 2 = 42\n#### 42", "solution": "$42$"}]
    for source in (rows, Dataset.from_list(rows)):
        ds = prepare_dataset(source)
        assert (ds[0]["answer"], ds[0]["solution"]) == ("42", "$42$")


@newer_only("trl_math_rewards")
def test_trls_accuracy_reward_trains_on_the_users_solution_column(tiny_model, tmp_path):
    # trl.rewards.accuracy_reward(completions, solution, **kwargs) parses the gold with math-verify (installed here,
    # CPU only). With the solution column renamed to answer, each call raised TypeError (missing 'solution'), which
    # grpo-lite's reward guard scores None: the step's mean reward was None instead of a score.
    from trl.rewards import accuracy_reward

    from grpo_lite import train

    model, tokenizer = tiny_model
    rows = [{"problem": f"What is {i} + {i}?", "solution": f"${2 * i}$"} for i in range(4)]
    dataset = prepare_dataset(rows, question="problem", answer="solution")
    result = train(model, tokenizer, dataset, [accuracy_reward], output_dir=tmp_path, preset="cpu-smoke", max_steps=1,
                   num_generations=4, per_device_train_batch_size=4, max_completion_length=8, dashboard=False)
    scored = [(m["step"], m["rewards/accuracy_reward/mean"]) for m in result.metrics if "rewards/accuracy_reward/mean" in m]
    assert len(scored) == 1 and scored[0][0] == 1 and isinstance(scored[0][1], float) and 0.0 <= scored[0][1] <= 1.0


@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_reads_csv_and_jsonl_with_custom_columns(tmp_path, suffix):
    rows = [{"q": "What is 2+3?", "expert_answer": "5"}, {"q": "What is 7-2?", "expert_answer": "5"}]
    path = tmp_path / f"data.{suffix}"
    if suffix == "csv":
        path.write_text("q,expert_answer\n" + "".join(f"{r['q']},{r['expert_answer']}\n" for r in rows))
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = prepare_dataset(path, question="q", answer="expert_answer", system_prompt=None)
    assert [r["prompt"] for r in ds] == [[{"role": "user", "content": r["q"]}] for r in rows]
    assert ds["answer"] == ["5", "5"]


def test_dataset_input_and_no_answer_column():
    ds = prepare_dataset(Dataset.from_list([{"question": "Write hello", "test_cases": "[]"}]), answer=None)
    assert "answer" not in ds.column_names and ds[0]["test_cases"] == "[]"


def test_missing_column_names_it_and_lists_what_exists():
    with pytest.raises(DatasetError, match=r"column 'answer' \(the answer\) is missing.*\['question', 'gold'\]"):
        prepare_dataset([{"question": "x", "gold": "1"}])


@pytest.mark.parametrize(
    "rows, message",
    [
        ([{"question": "ok", "answer": "1"}, {"question": None, "answer": "2"}], r"row 1, column 'question': the question is empty"),
        ([{"question": "   ", "answer": "2"}], r"row 0, column 'question': the question is empty"),
        ([{"question": "ok", "answer": "1"}, {"question": "ok", "answer": "2"}, {"question": 3, "answer": "3"}],
         r"row 2, column 'question': expected text, got int"),
        ([{"question": "ok", "answer": ["1"]}], r"row 0, column 'answer': expected text or a number, got list"),
        (["not a dict"], r"row 0 is a str"),
        ([], "no rows"),
    ],
)
def test_bad_rows_are_named(rows, message):
    with pytest.raises(DatasetError, match=message):
        prepare_dataset(rows)


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        prepare_dataset(tmp_path / "nope.jsonl")
    (tmp_path / "data.parquetx").write_text("")
    with pytest.raises(DatasetError, match="use a .csv, .jsonl"):
        prepare_dataset(tmp_path / "data.parquetx")


def test_prompt_length_report_and_long_prompt_filter(tiny_model, capsys):
    _, tokenizer = tiny_model
    rows = [{"question": "short?", "answer": "1"}, {"question": "long " * 100, "answer": "2"}]
    ds = prepare_dataset(rows, tokenizer=tokenizer, max_prompt_tokens=200)
    out = capsys.readouterr().err
    assert "prompt tokens over 2 rows" in out and "dropped 1 of 2 prompts over 200 tokens" in out
    assert ds["answer"] == ["1"]
    with pytest.raises(DatasetError, match=r"row 1: the prompt is \d+ tokens, over max_prompt_tokens=200"):
        prepare_dataset(rows, tokenizer=tokenizer, max_prompt_tokens=200, on_long_prompt="error")
    with pytest.raises(DatasetError, match="needs a tokenizer"):
        prepare_dataset(rows, max_prompt_tokens=200)


def test_builtin_arithmetic_is_deterministic_and_correct():
    rows = load_builtin("arithmetic")
    assert rows == load_builtin("arithmetic") and len(rows) == 200
    ds = prepare_dataset(rows)
    assert all(a.lstrip("-").isdigit() for a in ds["answer"])
    with pytest.raises(DatasetError, match="no built-in dataset 'nope'"):
        load_builtin("nope")
