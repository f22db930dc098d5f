"""preview() on a real model's completions, the notebook browser's controls, and re-scoring a finished run."""

import json
import subprocess
import sys
import zlib

import pytest
import torch

from grpo_lite import load_model, prepare_dataset, preview, rescore_run, train
from grpo_lite.data.arithmetic import heldout_arithmetic_problems
from grpo_lite.launch.demo import DEMO_MODEL_DIR
from grpo_lite.monitor.samples import read_samples
from rewards.advantages import as_reward_matrix, group_advantages


def text(completion):
    return completion[0]["content"] if isinstance(completion, list) else completion


def longer_is_better(completions, **kwargs):
    return [len(text(c)) / 50 for c in completions]


def shorter_is_better(completions, **kwargs):
    return [-len(text(c)) / 50 for c in completions]


def constant(completions, **kwargs):
    return [1.0] * len(completions)


@pytest.fixture(scope="module")
def demo_model():
    torch.set_num_threads(1)
    return load_model(str(DEMO_MODEL_DIR), lora_rank=None, backend="cpu")


@pytest.fixture(scope="module")
def questions():
    return prepare_dataset(heldout_arithmetic_problems(6), system_prompt=None)


@pytest.fixture(scope="module")
def report(demo_model, questions):
    model, tokenizer = demo_model
    return preview(model, tokenizer, questions, ["numeric_correctness_reward", "soft_xml_format_reward", longer_is_better,
                   shorter_is_better], n_prompts=4, num_generations=6, max_completion_length=48)


def test_groups_have_the_requested_size_and_trls_advantages(report):
    assert len(report.groups) == 4 and all(len(g) == 6 for g in report.groups)
    assert [len(c.token_ids) > 0 for c in report.completions] == [True] * 24
    for members in report.groups:
        scores = [[report.lab.rows[i]["scores"][name] for i in members] for name in report.functions]
        expected, _ = group_advantages(as_reward_matrix(scores), 6)
        assert [report.lab.rows[i]["advantage"] for i in members] == pytest.approx(expected.tolist(), abs=1e-4)


def test_planted_length_paying_and_opposed_rewards_are_flagged(report):
    kinds = {(f.kind, f.message.split(" ")[0]) for f in report.findings}
    assert ("pays_for_length", "longer_is_better") in kinds
    assert any(f.kind == "opposed_rewards" and "longer_is_better and shorter_is_better" in f.message for f in report.findings)
    assert all(f.suggestion for f in report.findings)


def test_pass_at_k_is_reported_next_to_greedy_accuracy(report):
    assert report.correctness == ["numeric_correctness_reward"]
    passes = report.pass_at_k("numeric_correctness_reward")
    assert list(passes) == [1, 2, 4, 6] and passes[1] <= passes[2] <= passes[4] <= passes[6] <= 1
    assert report.greedy_accuracy("numeric_correctness_reward") is not None
    assert "pass@6" in str(report) and "greedy accuracy" in str(report)


def test_tied_groups_are_counted(tiny_model):
    model, tokenizer = tiny_model  # random weights: every sampled completion differs
    questions = prepare_dataset([{"question": f"Spell {w}", "answer": w} for w in ["cat", "dog", "owl", "bee"]], system_prompt=None)
    tie_on = {"Spell dog", "Spell bee"}

    def ties_on_two_prompts(completions, prompts, **kwargs):
        return [1.0 if p[-1]["content"] in tie_on else zlib.crc32(text(c).encode()) % 97 / 97
                for c, p in zip(completions, prompts)]

    planted = preview(model, tokenizer, questions, [ties_on_two_prompts], n_prompts=4, num_generations=4,
                      max_completion_length=16, greedy=False)
    assert [planted.no_signal(g) for g in range(4)] == [False, True, False, True] and planted.no_signal_share == 0.5
    assert any(f.kind == "no_signal" and "50% of a batch would teach nothing" in f.message for f in planted.findings)
    everything_ties = preview(model, tokenizer, questions, [constant], n_prompts=3, num_generations=4, max_completion_length=8,
                              greedy=False)
    assert everything_ties.no_signal_share == 1.0


def test_truncation_is_counted_in_tokens(demo_model, questions):
    model, tokenizer = demo_model
    short = preview(model, tokenizer, questions, [constant], n_prompts=2, num_generations=4, max_completion_length=3, greedy=False)
    assert short.truncated_share == 1.0 and all(len(c.token_ids) == 3 for c in short.completions)
    assert any(f.kind == "truncated" for f in short.findings)


def test_rescore_uses_the_rewards_as_defined_now(report, monkeypatch):
    main = sys.modules["__main__"]

    def edited(completions, **kwargs):  # what the user's reward cell defines after an edit
        return [2.0] * len(completions)

    edited.__module__, edited.__name__ = "__main__", "shorter_is_better"
    monkeypatch.setattr(main, "shorter_is_better", edited, raising=False)
    original = report.rewards[3]
    monkeypatch.setattr(original, "__module__", "__main__")
    again = report.rescore()
    assert again.lab.scores("shorter_is_better") == [2.0] * 24
    assert again.completions is report.completions, "the same completions, scored again"
    assert not any(f.kind == "opposed_rewards" and "shorter_is_better" in f.message for f in again.findings)


def test_the_browser_moves_filters_and_rescores(report, monkeypatch):
    from grpo_lite.evaluation.preview_browser import PreviewBrowser

    browser = PreviewBrowser(report)
    assert "group 0 (1 of 4)" == browser.position.value and "grpo-lite-preview-group" in browser.body.value
    browser.next()
    assert browser.position.value.startswith("group 1 ")
    browser.previous()
    browser.previous()
    assert browser.position.value.startswith("group 3 "), "previous wraps around"
    browser.set_filter("rewards disagree")
    assert browser.shown == [g for g in range(4) if report.disagree(g)]
    browser.set_filter("truncated")
    assert browser.shown == [g for g in range(4) if report.truncated(g)]
    browser.set_filter("all groups")
    browser.rescore()
    assert browser.status.value.startswith("re-scored with numeric_correctness_reward")


def test_rescoring_a_finished_run(tiny_model, tmp_path):
    model, tokenizer = tiny_model
    rows = [{"question": f"Spell {w}", "answer": w} for w in ["cat", "dog", "owl", "bee"] * 4]
    dataset = prepare_dataset(rows, system_prompt=None)
    train(model, tokenizer, dataset, [longer_is_better], preset="cpu-smoke", output_dir=tmp_path, max_steps=2,
          num_generations=4, per_device_train_batch_size=8, max_completion_length=12, dashboard=False)
    samples = read_samples(tmp_path)
    assert samples[0]["prompt"] in dataset["prompt"], "samples.jsonl keeps the chat prompt as the trainer got it"
    result = rescore_run(tmp_path, [shorter_is_better])
    assert [r["old"] for r in result.rows] == [s["advantage"] for s in samples]
    moved = [r for r in result.rows if abs(r["old"]) > 1e-6]
    assert moved and len(result.flipped) == len(moved), "the opposite reward pushes every completion the other way"
    with pytest.raises(ValueError, match="read the 'answer' column.*pass dataset="):
        rescore_run(tmp_path, ["exact_match_reward"])
    exact = rescore_run(tmp_path, ["exact_match_reward"], dataset)
    assert len(exact.rows) == len(samples) and all(r["scores"]["exact_match_reward"] is not None for r in exact.rows)

    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    done = subprocess.run([sys.executable, "-m", "grpo_lite", "score", "--run", str(tmp_path), "--rewards",
                           "exact_match_reward", "--dataset", str(data)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"Re-scored {len(samples)} completions" in " ".join(done.stdout.split())


def test_the_browser_escapes_completions(report):
    import dataclasses

    from grpo_lite.evaluation.preview_browser import group_html
    from grpo_lite.model.inference import Completion

    hostile = dataclasses.replace(report, completions=[Completion("<script>alert(1)</script>", (1, 2), False),
                                                       *report.completions[1:]])
    page = group_html(hostile, 0)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_rescore_reads_prompts_as_kept_and_as_older_files_flattened_them(tmp_path):
    from grpo_lite.run.files import SAMPLES_FILE, write_jsonl

    messages = [{"role": "system", "content": "Answer with the word."}, {"role": "user", "content": "Spell cat"}]
    flattened = "system: Answer with the word.\nuser: Spell cat"
    seen = []

    def reads_prompts(completions, prompts, **kwargs):
        seen.extend(prompts)
        return [float(len(c)) for c in completions]

    reports = {}
    for form, prompt in (("kept", messages), ("flattened", flattened)):
        (tmp_path / form).mkdir()
        write_jsonl(tmp_path / form / SAMPLES_FILE, [{"step": 1, "prompt": prompt, "completion": c, "advantage": 0.0}
                                                     for c in ("<answer>cat</answer>", "<answer>kat</answer>", "dog")])
        reports[form] = rescore_run(tmp_path / form, ["exact_match_reward", reads_prompts],
                                    [{"question": "Spell cat", "answer": "cat"}])
    assert [r["scores"] for r in reports["kept"].rows] == [r["scores"] for r in reports["flattened"].rows]
    assert reports["kept"].rows[0]["scores"]["exact_match_reward"] > reports["kept"].rows[1]["scores"]["exact_match_reward"]
    assert seen[:3] == [messages] * 3, "a reward reads the prompt as training passed it"
