import json
import re

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


# --- one meaning for a value, whichever way it came in ---------------------------------------------------------------

def _missing_spellings():
    import numpy as np
    import pandas as pd

    return {"None": None, "float NaN": float("nan"), "numpy NaN": np.nan, "numpy float32 NaN": np.float32("nan"),
            "pandas NA": pd.NA, "pandas NaT": pd.NaT, "numpy NaT": np.datetime64("NaT")}


MISSING = _missing_spellings()


@pytest.mark.parametrize("spelling", MISSING, ids=list(MISSING))
@pytest.mark.parametrize("source", ["rows", "DataFrame"])
def test_a_missing_gold_answer_is_none_however_it_is_spelt(spelling, source):
    import pandas as pd

    rows = [{"question": "What is 2+2?", "answer": "4", "note": "kept"}, {"question": "What is 3+3?", "answer": MISSING[spelling],
                                                                         "note": MISSING[spelling]}]
    ds = prepare_dataset(rows if source == "rows" else pd.DataFrame(rows), system_prompt=None)
    assert ds["answer"] == ["4", None] and ds["note"] == ["kept", None]


@pytest.mark.parametrize("text, gold", [("nan", "nan"), ("NA", "NA"), ("None", "None"), ("N/A", "N/A"), ("", None), ("  ", None)])
@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_text_in_a_file_is_what_was_written_and_only_an_empty_cell_or_null_is_missing(text, gold, suffix, tmp_path):
    """A written "nan" or "None" may be an answer; an empty CSV cell, JSON's null or NaN and a missing key are none; blank
    text is no gold answer (rewards.extract.gold_text)."""
    path = tmp_path / f"data.{suffix}"
    if suffix == "csv":
        path.write_text(f"question,answer,note\nq0,{text},{text}\nq1,,\nq2,7,x\n")
    else:
        path.write_text("\n".join(json.dumps(row) for row in ({"question": "q0", "answer": text, "note": text},
                                                               {"question": "q1", "answer": None}, {"question": "q2", "answer": 7, "note": "x"}))
                        + '\n{"question": "q3", "answer": NaN, "note": NaN}\n')
    ds = prepare_dataset(path, system_prompt=None)
    assert ds["answer"][:3] == [gold, None, "7"] and ds["note"][1] is None
    assert ds["note"][0] == (text if text.strip() or suffix == "jsonl" else None if not text else text)
    if suffix == "jsonl":
        assert ds["answer"][3] is None and ds["note"][3] is None


def test_a_csv_column_of_numbers_with_an_empty_cell_stays_numbers(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("question,answer,level,weight\nq0,4,1,0.5\nq1,,,\nq2,10,3,2.5\n")
    ds = prepare_dataset(path, system_prompt=None)
    assert ds["answer"] == ["4", None, "10"]  # not "4.0", as a float column would give
    assert ds["level"] == [1, None, 3] and ds["weight"] == [0.5, None, 2.5]


def test_nan_in_a_float_column_of_a_dataset_is_none():
    ds = prepare_dataset(Dataset.from_list([{"question": "a", "answer": "1", "score": 0.5}, {"question": "b", "answer": "2",
                                                                                            "score": float("nan")}]))
    assert ds["score"] == [0.5, None]


def test_a_missing_gold_answer_reaches_the_rewards_as_none_and_scores_not_applicable():
    import pandas as pd

    from rewards import check_rewards, numeric_correctness_reward

    seen = []

    def golds(completions, answer, **kwargs):
        seen.extend(answer)
        return [0.0] * len(completions)

    frame = pd.DataFrame({"prompt": ["2+2?", "3+3?"], "completion": ["<answer>4</answer>", "<answer>6</answer>"],
                          "answer": ["4", float("nan")]})
    report = check_rewards([numeric_correctness_reward, golds], frame)
    assert seen == ["4", None] and report.scores("numeric_correctness_reward")[1] is None  # not applicable: no gold
    assert [row["gold"] for row in report.rows] == ["4", None]


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("name, text, said", [
    ("data.csv", "question,answer,answer\nq,1,2\n", r"data\.csv: the header names column 'answer' twice \(columns 2 and 3\)"),
    ("data.csv", 'question,"answer",notes,answer\nq,1,x,2\n', r"data\.csv: the header names column 'answer' twice \(columns 2 and 4\)"),
    ("data.jsonl", '{"question": "q", "answer": "1"}\n{"question": "q", "answer": "1", "answer": "2"}\n',
     r"data\.jsonl, line 2: key 'answer' appears twice in one object"),
    ("data.jsonl", '{"question": "q", "answer": "1", "test_cases": [{"output": "1", "output": "2"}]}\n',
     r"data\.jsonl, line 1: key 'output' appears twice"),
    ("data.json", '[{"question": "q", "question": "p", "answer": "1"}]', r"data\.json: key 'question' appears twice"),
], ids=["csv", "csv quoted", "jsonl", "jsonl nested", "json"])
def test_a_column_named_twice_is_refused_naming_the_column_and_the_file(name, text, said, tmp_path):
    with pytest.raises(DatasetError, match=said):
        prepare_dataset(_write(tmp_path, name, text))


def test_a_dataframe_with_two_columns_of_one_name_is_refused():
    import pandas as pd

    frame = pd.DataFrame([["q", "1", "2"]], columns=["question", "answer", "answer"])
    with pytest.raises(DatasetError, match="two columns named 'answer'"):
        prepare_dataset(frame)


NESTED = {
    "an int and a text inside test cases": ([{"input": "1", "output": 2}], [{"input": "1", "output": "x"}],
                                            r"\[\{input: str, output: int\}\].*\[\{input: str, output: str\}\]"),
    "test cases and a text": ([{"assert": "f() == 1"}], "assert f() == 1", r"\[\{assert: str\}\].* holds str"),
    "numbers and texts in lists": ([1, 2], ["x"], r"\[int\].*\[str\]"),
    "a list of an int and a text": ([3], [1, "a"], r"holds \[int, str\], which Arrow cannot store"),
}


@pytest.mark.parametrize("case", NESTED, ids=list(NESTED))
@pytest.mark.parametrize("source", ["rows", "jsonl", "DataFrame"])
def test_nested_values_arrow_cannot_store_as_one_type_are_kept_as_json_text_and_said(case, source, tmp_path, caplog):
    import pandas as pd

    first, second, said = NESTED[case]
    rows = [{"question": "q0", "answer": "1", "test_cases": first}, {"question": "q1", "answer": "2"},
            {"question": "q2", "answer": "3", "test_cases": second}]
    data = {"rows": rows, "DataFrame": pd.DataFrame(rows),
            "jsonl": _write(tmp_path, "data.jsonl", "".join(json.dumps(row) + "\n" for row in rows))}[source]
    ds = prepare_dataset(data)
    assert [None if v is None else json.loads(v) for v in ds["test_cases"]] == [first, None, second]
    where = r"data\.jsonl, line 3" if source == "jsonl" else "row 2"
    assert re.search(rf"column 'test_cases': .*{said}.*kept as JSON text", caplog.text)
    assert re.search(rf"{where} holds", caplog.text)


def test_test_cases_kept_as_json_text_are_read_by_the_code_rewards():
    from rewards.code import parse_test_cases

    ds = prepare_dataset([{"question": "q0", "answer": None, "test_cases": [{"input": "1", "output": 2}]},
                          {"question": "q1", "answer": None, "test_cases": [{"input": "1", "output": "2"}]}], answer=None)
    assert [parse_test_cases(v) for v in ds["test_cases"]] == [[{"input": "1", "output": 2}], [{"input": "1", "output": "2"}]]


@pytest.mark.parametrize("values, said", [
    ((1, "hard"), r"column 'level': row 0 holds int and row 2 holds str, which Arrow cannot store as one type: its numbers"),
    ((2**70, 1), r"column 'level': row 0 holds int, which Arrow cannot store: its numbers are kept as text"),
], ids=["int and text", "an int too big"])
def test_numbers_arrow_cannot_store_with_the_rest_are_kept_as_text_and_said(values, said, caplog):
    rows = [{"question": "q0", "answer": "1", "level": values[0]}, {"question": "q1", "answer": "2"},
            {"question": "q2", "answer": "3", "level": values[1]}]
    assert prepare_dataset(rows)["level"] == [str(values[0]), None, str(values[1])]
    assert re.search(said, caplog.text)


@pytest.mark.parametrize("values, said", [
    ((True, "yes"), r"column 'level': row 0 holds bool and row 2 holds str, which Arrow cannot store as one type"),
    ((True, 2), r"column 'level': row 0 holds bool and row 2 holds int"),
], ids=["true and text", "true and a number"])
def test_other_values_arrow_cannot_store_as_one_type_are_refused_naming_the_column_and_rows(values, said):
    rows = [{"question": "q0", "answer": "1", "level": values[0]}, {"question": "q1", "answer": "2"},
            {"question": "q2", "answer": "3", "level": values[1]}]
    with pytest.raises(DatasetError, match=said):
        prepare_dataset(rows)


def test_a_prompt_column_arrow_cannot_store_is_refused_not_turned_into_text():
    from grpo_lite.data.prepare import as_dataset

    rows = [{"prompt": [{"role": "user", "content": "hi", "name": 1}]}, {"prompt": [{"role": "user", "content": "hi", "name": "x"}]}]
    with pytest.raises(DatasetError, match="column 'prompt': row 0 holds .* and row 1 holds .*give the column values of one type"):
        as_dataset(rows)
