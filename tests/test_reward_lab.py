"""The reward lab finds broken rewards and no-signal groups before any GPU time is spent."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rewards import RewardSet, check_rewards, numeric_correctness_reward, soft_xml_format_reward, weighted

pytestmark = pytest.mark.stack_free  # nothing here reaches transformers, TRL, PEFT or datasets

RIGHT = "<reasoning>\n3 + 4 = 7\n</reasoning>\n<answer>\n7\n</answer>"
WRONG = "<reasoning>\n3 + 4 = 8\n</reasoning>\n<answer>\n8\n</answer>"
ROWS = [
    {"prompt": "What is 3 + 4?", "completion": RIGHT, "answer": "7"},
    {"prompt": "What is 3 + 4?", "completion": WRONG, "answer": "7"},
    {"prompt": "What is 3 + 4?", "completion": "7", "answer": "7"},
    {"prompt": "What is 2 + 2?", "completion": [{"role": "assistant", "content": "<answer>4</answer>"}], "answer": None},
]


def always_one(completions, **kwargs):
    return [1.0] * len(completions)


def crashes_on_none(completions, answer, **kwargs):
    return [float(a.strip() in str(c)) for c, a in zip(completions, answer)]


def drops_one(completions, **kwargs):
    return [0.5] * (len(completions) - 1)


def returns_nan(completions, **kwargs):
    return [float("nan")] + [0.0] * (len(completions) - 1)


def no_dotall(completions, **kwargs):
    return [0.5 if re.search(r"<reasoning>.*</reasoning>", str(c)) else 0.0 for c in completions]


def test_a_healthy_set_scores_parses_and_computes_advantages():
    report = check_rewards([soft_xml_format_reward, numeric_correctness_reward], ROWS)
    assert report.ok and report.problems == []
    assert report.scores("numeric_correctness_reward") == [2.0, 0.0, 0.0, None]
    assert [row["parsed"] for row in report.rows] == ["7", "8", None, "4"]
    assert [row["gold"] for row in report.rows] == ["7", "7", "7", None]
    assert [row["total"] for row in report.rows] == [2.5, 0.5, 0.0, 0.0]
    advantages = [row.get("advantage") for row in report.rows]
    assert advantages[0] > 0 > advantages[2] and advantages[3] is None  # row 3 is alone in its group
    assert abs(sum(advantages[:3])) < 1e-6


def test_planted_constant_crashing_and_wrong_length_rewards_are_flagged():
    report = check_rewards([soft_xml_format_reward, always_one, crashes_on_none, drops_one, returns_nan], ROWS)
    assert not report.ok
    by_kind = {(p.kind, p.function) for p in report.problems}
    assert ("constant_reward", "always_one") in by_kind
    assert ("wrong_length", "drops_one") in by_kind
    assert ("not_a_number", "returns_nan") in by_kind
    crash = [p for p in report.problems if p.kind == "exception"]
    assert [(p.function, p.row) for p in crash] == [("crashes_on_none", 3)]
    assert "AttributeError" in crash[0].message
    text = str(report)
    assert "always_one" in text and "row 3" in text


def test_a_regex_without_dotall_shows_up_as_a_constant_reward():
    report = check_rewards([no_dotall, numeric_correctness_reward], ROWS)
    assert ("constant_reward", "no_dotall") in {(p.kind, p.function) for p in report.problems}


def test_groups_where_every_completion_ties_are_flagged():
    rows = [{"prompt": "q", "completion": WRONG, "answer": "7"}] * 3 + [{"prompt": "r", "completion": RIGHT, "answer": "7"},
                                                                        {"prompt": "r", "completion": WRONG, "answer": "7"}]
    report = check_rewards([numeric_correctness_reward], rows)
    tied = [p for p in report.problems if p.kind == "no_signal"]
    assert len(tied) == 1 and "group 0" in tied[0].message
    assert report.ok  # a warning about signal, not an error


def test_unreadable_completions_and_bad_input_are_reported():
    report = check_rewards([soft_xml_format_reward], [{"completion": 42}, {"completion": "<answer>1</answer>"}])
    assert [(p.kind, p.row) for p in report.problems if p.kind == "unreadable_completion"] == [("unreadable_completion", 0)]
    with pytest.raises(ValueError, match=r"rows \[0\] have no completion \(the rows' columns: text\)"):
        check_rewards([soft_xml_format_reward], [{"text": "x"}])
    with pytest.raises(ValueError, match=r"rows \[1\] have no completion \(the rows' columns: completion, answer\)"):
        check_rewards([soft_xml_format_reward], [{"completion": "x", "answer": "1"}, {"completion": None, "answer": "2"}])
    with pytest.raises(ValueError, match="reward_weights has 1 values for 2"):
        check_rewards([soft_xml_format_reward, always_one], ROWS, reward_weights=[1.0])


def test_report_renders_in_a_notebook_and_a_terminal():
    report = check_rewards("gsm8k", ROWS)
    html = report._repr_html_()
    assert "numeric" in html and "xml count" in html and "<pre" in html
    assert "Reward lab: 4 rows x 5 functions" in str(report)


def test_a_reward_sets_weights_count_in_the_lab_as_in_training():
    weighted_set = RewardSet(weighted(numeric_correctness_reward, 2.0), soft_xml_format_reward)
    report = check_rewards(weighted_set, ROWS)
    assert report.settings["reward_weights"] == [2.0, 1.0]
    explicit = check_rewards([numeric_correctness_reward, soft_xml_format_reward], ROWS, reward_weights=[2.0, 1.0])
    unweighted = check_rewards([numeric_correctness_reward, soft_xml_format_reward], ROWS)
    advantages = [row.get("advantage") for row in report.rows]
    assert advantages == [row.get("advantage") for row in explicit.rows]
    assert [row["total"] for row in report.rows] != [row["total"] for row in unweighted.rows]


def test_star_import_exports_rewards_not_submodules():
    import builtins

    namespace: dict = {}
    exec("from rewards import *", namespace)
    assert "format" not in namespace and "check" not in namespace and "sandbox" not in namespace
    assert namespace["soft_xml_format_reward"] is soft_xml_format_reward and format is builtins.format


def _score(args, cwd):
    command = [str(Path(sys.executable).with_name("grpo-lite")), "score", *args]  # the console script, as a user runs it
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=cwd)


def test_score_cli_takes_presets_and_the_users_own_rewards_by_import_path(tmp_path):
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    (tmp_path / "my_module.py").write_text(
        "def my_reward(completions, **kwargs):\n    return [float(len(str(c)) % 3) for c in completions]\n"
    )
    done = _score(["--rewards", "gsm8k,my_module:my_reward", "--data", "samples.jsonl"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "4 rows x 6 functions" in done.stdout and "no problems found" in done.stdout  # gsm8k is 5, plus my_reward


@pytest.mark.slow
def test_score_cli_fails_on_broken_rewards_and_bad_files(tmp_path):
    (tmp_path / "broken.jsonl").write_text('{"completion": "x"}\nnot json\n{"completion": "y"}\n')
    done = _score(["--rewards", "math", "--data", "broken.jsonl"], tmp_path)
    assert done.returncode == 2 and "grpo-lite: broken.jsonl, line 2: not JSON" in done.stderr
    (tmp_path / "rows.jsonl").write_text(json.dumps(ROWS[0]) + "\n")
    done = _score(["--rewards", "numeric_corectness_reward", "--data", "rows.jsonl"], tmp_path)
    assert done.returncode == 2 and "did you mean numeric_correctness_reward" in done.stderr
    (tmp_path / "crash.py").write_text("def crash(completions, **kwargs):\n    raise KeyError('gold')\n")
    done = _score(["--rewards", "crash:crash", "--data", "rows.jsonl"], tmp_path)
    assert done.returncode == 1 and "KeyError" in done.stdout


def test_rows_whose_gold_a_correctness_reward_cannot_read_are_named():
    from rewards import math_equivalence_reward

    rows = [{"prompt": "Capital of France?", "completion": "<answer>Paris</answer>", "answer": "Paris"},
            {"prompt": "Capital of France?", "completion": "<answer>Rome</answer>", "answer": "Paris"},
            {"prompt": "Half of 1?", "completion": "<answer>0.5</answer>", "answer": "\\frac{1}{2}"}]
    report = check_rewards([math_equivalence_reward, soft_xml_format_reward], rows)
    unreadable = [(p.function, p.row) for p in report.problems if p.kind == "unreadable_gold"]
    assert unreadable == [("math_equivalence_reward", 0), ("math_equivalence_reward", 1)]
    assert report.ok, "a warning about the data, not a broken reward"
    assert "cannot read the gold answer 'Paris'" in str(report)
