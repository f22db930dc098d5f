import pytest

from grpo_lite import prepare_dataset
from grpo_lite.data.prepare import DatasetError
from grpo_lite.evaluation.scoring import compare, evaluate, pass_at_k, score
from grpo_lite.model.inference import generate

RIGHT = "<reasoning>2 + 2 = 4</reasoning>\n<answer>4</answer>"
WRONG_FORMATTED = "<reasoning>guess</reasoning>\n<answer>5</answer>"
RIGHT_UNFORMATTED = "the answer is 6"


@pytest.fixture
def rows():
    data = [{"question": "2 + 2?", "answer": "4"}, {"question": "2 + 3?", "answer": "5"}, {"question": "3 + 3?", "answer": "6"}]
    return [dict(row) for row in prepare_dataset(data, system_prompt=None)]


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(4, 0, 1) == 0.0 and pass_at_k(4, 4, 2) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # C(3,2)/C(4,2) pairs miss the right one
    with pytest.raises(ValueError, match="heldout_samples"):
        pass_at_k(2, 1, 4)


def test_score_counts_fixed_completions_by_hand(rows):
    async def length_reward(completions, **kwargs):  # as a TRL reward: chat messages for chat prompts, async awaited
        return [float(len(c[0]["content"])) for c in completions]

    completions = [RIGHT, "<reasoning>x</reasoning>\n<answer>7</answer>", RIGHT_UNFORMATTED]
    sampled = [[RIGHT, "no", "no", "no"], ["no"] * 4, [RIGHT_UNFORMATTED] * 2 + ["no"] * 2]
    report = score(rows, completions, [length_reward], sampled=sampled)

    assert report.n == 3
    assert report.accuracy == pytest.approx(2 / 3)  # rows 0 and 2 are right
    assert report.format_rate == pytest.approx(2 / 3)  # rows 0 and 1 have <reasoning>/<answer>
    assert report.mean_rewards == {"length_reward": pytest.approx(sum(map(len, completions)) / 3)}
    assert report.pass_at_k[1] == pytest.approx((1 / 4 + 0 + 2 / 4) / 3)
    assert report.pass_at_k[4] == pytest.approx(2 / 3)
    assert [e["correct"] for e in report.examples] == [True, False, True]
    assert report.as_dict()["pass_at_k"]["2"] == pytest.approx((0.5 + 0 + (1 - 1 / 6)) / 3)
    assert "accuracy" in str(report) and "pass@4" in str(report)


def test_correctness_function_is_a_parameter(rows):
    def always_wrong(completions, **kwargs):
        return [0.0] * len(completions)

    assert score(rows, [RIGHT] * 3, correctness=always_wrong).accuracy == 0.0
    assert score(rows, ["<answer>4</answer>", "<answer>5</answer>", "<answer>6</answer>"]).accuracy == 1.0


def test_a_word_answer_is_correct_by_exact_match_and_a_number_by_value():
    rows = prepare_dataset([{"question": "What colour?", "answer": "red"}, {"question": "How many?", "answer": "3"}],
                           system_prompt=None)
    assert score(rows, ["The answer is Red.", "The answer is 3.0."]).accuracy == 1.0
    assert score(rows, ["The answer is blue.", "The answer is three."]).accuracy == 0.0


def test_compare_shows_both_and_the_rows_that_changed(rows):
    base = score(rows, ["no", "no", "no"])
    trained = score(rows, [RIGHT, "no", WRONG_FORMATTED])
    comparison = compare(base, trained)
    assert len(comparison.changed_examples()) == 2
    text = str(comparison)
    assert "base" in text and "trained" in text and "+0.333" in text and "(right, formatted)" in text


def test_missing_answer_column_is_named(rows):
    with pytest.raises(ValueError, match="'answer' column"):
        score([{"prompt": rows[0]["prompt"]}], [RIGHT])


def test_generate_is_batch_independent_and_takes_strings_and_messages(tiny_model):
    model, tokenizer = tiny_model
    prompts = [[{"role": "user", "content": "What is 2 + 2?"}], "plain text prompt", [{"role": "user", "content": "Hi"}]]
    together = generate(model, tokenizer, prompts, max_completion_length=6)
    alone = [generate(model, tokenizer, [p], max_completion_length=6)[0] for p in prompts]
    assert together == alone and len(together) == 3 and all(isinstance(t, str) for t in together)
    sampled = generate(model, tokenizer, prompts[:1], max_completion_length=6, do_sample=True, num_return_sequences=3)
    assert len(sampled) == 3
    with pytest.raises(DatasetError, match="chat messages"):
        generate(model, tokenizer, [42])


def test_evaluate_runs_the_real_model_and_scores_its_own_text(tiny_model):
    model, tokenizer = tiny_model
    data = [{"question": f"{i} + {i}?", "answer": str(2 * i)} for i in range(5)]
    dataset = prepare_dataset(data, system_prompt=None)
    import torch

    random_state = torch.random.get_rng_state()
    report = evaluate(model, tokenizer, dataset, "soft_xml_format_reward", heldout_n=4, heldout_samples=2, max_completion_length=8)
    assert report.n == 4 and set(report.pass_at_k) == {1, 2}
    assert torch.equal(torch.random.get_rng_state(), random_state), "seeded sampling moved the caller's random stream"
    rows = [dict(row) for row in dataset.select(range(4))]
    greedy = generate(model, tokenizer, [row["prompt"] for row in rows], max_completion_length=8)
    assert [e["completion"] for e in report.examples] == greedy
    rescored = score(rows, greedy, "soft_xml_format_reward")
    assert (report.accuracy, report.format_rate, report.mean_rewards) == (rescored.accuracy, rescored.format_rate, rescored.mean_rewards)


def test_train_evaluates_a_heldout_split_before_and_after(tiny_model, tmp_path):
    import json

    from grpo_lite import train

    model, tokenizer = tiny_model
    rows = [{"question": f"{i} + {i}?", "answer": str(2 * i)} for i in range(12)]
    dataset, heldout = prepare_dataset(rows[:8], system_prompt=None), prepare_dataset(rows[8:], system_prompt=None)
    with pytest.raises(ValueError, match="heldout has no 'answer' column"):
        train(model, tokenizer, dataset, "soft_xml_format_reward", heldout=heldout.remove_columns("answer"),
              output_dir=tmp_path)

    result = train(model, tokenizer, dataset, "soft_xml_format_reward", heldout=heldout, heldout_n=3, heldout_samples=2,
                   output_dir=tmp_path, preset="cpu-smoke", max_steps=2, num_generations=4,
                   per_device_train_batch_size=4, max_completion_length=8, dashboard=False)

    saved = json.loads((tmp_path / "eval.json").read_text())
    assert saved == {"before": result.evaluation.base.as_dict(), "after": result.evaluation.trained.as_dict()}
    assert saved["before"]["n"] == saved["after"]["n"] == 3
    assert set(saved["before"]["pass_at_k"]) == set(saved["after"]["pass_at_k"]) == {"1", "2"}
    assert set(saved["after"]["mean_rewards"]) == {"soft_xml_format_reward"}
    greedy_after = generate(result.model, tokenizer, [row["prompt"] for row in heldout.select(range(3))], max_completion_length=8)
    assert [e["completion"] for e in result.evaluation.trained.examples] == greedy_after
