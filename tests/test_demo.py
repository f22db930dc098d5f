"""The learning demo: the shipped model, a real GRPO run, held-out accuracy that rises, and questions kept apart."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from statistics import mean

import pytest

from grpo_lite import read_metrics
from grpo_lite.data.arithmetic import arithmetic_problems, heldout_arithmetic_problems
from grpo_lite.launch.demo import DEMO_MODEL_DIR, HELDOUT_QUESTIONS, run_demo
from grpo_lite.run.files import EVAL_FILE

ROOT = Path(__file__).resolve().parents[1]

# The CI run below (100 steps, 50 held-out questions, no sampling) measured on 2 CPU cores for seeds 0, 1 and 2:
# greedy accuracy 12% -> 42%, 40% and 44% (rises of 30, 28 and 32 points: mean 30, sd 2). The margin sits
# 13 points under the smallest rise; a run that only learned the format (as the earlier demo model did,
# losing 9 points) fails it.
MIN_ACCURACY_RISE = 0.15


def _training_script():
    spec = importlib.util.spec_from_file_location("train_demo_model", ROOT / "scripts" / "train_demo_model.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_demo_model_ships_as_safetensors_with_a_model_card():
    files = {path.name for path in DEMO_MODEL_DIR.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "README.md", "training_args.json"} <= files
    assert (DEMO_MODEL_DIR / "model.safetensors").stat().st_size < 8 * 2**20


def test_heldout_questions_are_not_in_the_training_set():
    train_questions = {row["question"] for row in arithmetic_problems()}
    heldout = heldout_arithmetic_problems(HELDOUT_QUESTIONS)
    assert len({row["question"] for row in heldout}) == HELDOUT_QUESTIONS
    assert not train_questions & {row["question"] for row in heldout}


def test_heldout_questions_are_not_in_the_demo_models_training_data():
    recipe = json.loads((DEMO_MODEL_DIR / "training_args.json").read_text())
    examples = _training_script().training_examples(recipe["examples"], recipe["seed"], recipe["worked_share"],
                                                    recipe["exact_guess_share"])
    heldout = {row["question"] for row in heldout_arithmetic_problems(HELDOUT_QUESTIONS)}
    assert len(examples) > 10_000 and not {question for question, _ in examples} & heldout


def test_the_teacher_rounds_bare_guesses_and_works_tagged_answers_exactly():
    script = _training_script()
    question = "Eli had 20 marbles and gave away 3. How many marbles are left?"
    assert script.solution(question, 17, worked=False, exact=False) == "The answer is 20."
    assert script.solution(question, 17, worked=False, exact=True) == "The answer is 17."
    assert script.solution(question, 17, worked=True, exact=False) == "<reasoning>\n20 - 3 = 17\n</reasoning>\n<answer>\n17\n</answer>"


def test_too_many_heldout_questions_are_refused(tmp_path):
    with pytest.raises(ValueError, match="use 1 to 200"):
        run_demo(tmp_path, heldout_n=HELDOUT_QUESTIONS + 1)


@pytest.mark.seam
@pytest.mark.slow
def test_demo_raises_heldout_accuracy_with_kl_on(tmp_path):
    report = run_demo(tmp_path, seed=0, heldout_n=50, heldout_samples=1, dashboard=False)

    assert report == json.loads((tmp_path / EVAL_FILE).read_text())
    before, after = report["before"], report["after"]
    assert after["accuracy"] - before["accuracy"] >= MIN_ACCURACY_RISE, report
    assert after["format_rate"] - before["format_rate"] >= 0.3, report
    records = read_metrics(tmp_path)
    assert any((r["kl"] or 0) > 0 for r in records), "the demo trains with KL on, so the dashboard has a KL curve"
    correctness = [r["rewards/numeric_correctness_reward/mean"] for r in records]
    third = len(correctness) // 3
    assert mean(correctness[-third:]) > mean(correctness[:third]), "the correctness curve rises during the run"


@pytest.mark.slow
def test_cli_demo_runs_offline_and_writes_its_output_dir(tmp_path):
    out = tmp_path / "demo"
    command = [sys.executable, "-m", "grpo_lite", "demo", "--output-dir", str(out), "--max-steps", "2", "--heldout-n", "4",
               "--heldout-samples", "2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / EVAL_FILE).read_text())
    assert report["after"]["n"] == 4 and {"accuracy", "format_rate", "pass_at_k"} <= set(report["after"])
    assert set(report["after"]["pass_at_k"]) == {"1", "2"}
    assert {"run.yaml", "metrics.jsonl", "model.safetensors"} <= {p.name for p in out.iterdir()}
    assert "held-out before and after training" in done.stderr and "pass@2" in done.stderr
