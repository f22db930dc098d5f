import json

import pytest
from datasets import Dataset

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
