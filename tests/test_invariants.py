"""GRPO invariants from real tiny runs through grpo_lite.train, healthy and deliberately broken."""

import random

import pytest
from transformers import TrainerControl, TrainerState

from grpo_lite import prepare_dataset, read_metrics, train
from grpo_lite.monitor.health import replay
from grpo_lite.monitor.invariants import InvariantChecks
from grpo_lite.run.config import make_config
from rewards.diagnoses import DIAGNOSIS

QUICK = dict(preset="cpu-smoke", num_generations=4, per_device_train_batch_size=4, max_completion_length=12,
             save_steps=100, dashboard=False)


def length_reward(completions, **kwargs):
    return [len(c[0]["content"]) / 10 for c in completions]


def constant_reward(completions, **kwargs):
    return [1.0] * len(completions)


@pytest.fixture
def questions():
    return prepare_dataset([{"question": f"Spell {w}", "answer": w} for w in ["cat", "dog", "owl", "bee"] * 4],
                           system_prompt=None)


def rules(records, **options):
    return {w.rule for w in replay(records, **options)}


def test_a_real_run_writes_invariants_to_metrics_jsonl(tiny_model, questions, tmp_path):
    model, tokenizer = tiny_model
    train(model, tokenizer, questions, [length_reward], output_dir=tmp_path, max_steps=6, beta=0.04, **QUICK)
    records = read_metrics(tmp_path)
    assert [r["step"] for r in records] == list(range(1, 7))
    for record in records:
        assert record["invariants/within_group_adv_sum_absmax"] < DIAGNOSIS["advantage_not_centered"].thresholds[
            "invariants/within_group_adv_sum_absmax"]
        assert record["invariants/advantage_abs_mean"] > 0
        assert record["invariants/completion_tokens"] == record["completions/mean_length"]  # nothing masked
        assert 0 <= record["invariants/kl_share"] < DIAGNOSIS["kl_dominates"].thresholds["invariants/kl_share"]
    assert "invariants/reward_trend" in records[-1]
    assert {"advantage_not_centered", "empty_completion_mask", "kl_dominates", "zero_grad"}.isdisjoint(
        rules(records, beta=0.04))


def test_a_constant_reward_gives_zero_gradients_and_no_signal(tiny_model, questions, tmp_path):
    model, tokenizer = tiny_model
    train(model, tokenizer, questions, [constant_reward], output_dir=tmp_path, max_steps=4, beta=0.0, **QUICK)
    records = read_metrics(tmp_path)
    assert all(r["invariants/advantage_abs_mean"] == 0 and r["grad_norm"] == 0 for r in records)
    assert {"zero_grad", "no_signal", "kl_absent"} <= rules(records, beta=0.0)


def test_a_huge_beta_makes_the_kl_term_dominate(tiny_model, questions, tmp_path):
    model, tokenizer = tiny_model
    train(model, tokenizer, questions, [length_reward], output_dir=tmp_path, max_steps=4, beta=1e5, **QUICK)
    records = read_metrics(tmp_path)
    assert records[-1]["invariants/kl_share"] > DIAGNOSIS["kl_dominates"].thresholds["invariants/kl_share"]
    assert "kl_dominates" in rules(records, beta=1e5)


def test_masking_truncated_one_token_completions_empties_the_completion_mask(tiny_model, questions, tmp_path):
    model, tokenizer = tiny_model
    train(model, tokenizer, questions, [length_reward], output_dir=tmp_path, max_steps=2,
          **{**QUICK, "max_completion_length": 1}, mask_truncated_completions=True)
    records = read_metrics(tmp_path)
    assert all(r["invariants/completion_tokens"] == 0 and r["completions/mean_length"] == 1 for r in records)
    assert {"empty_completion_mask", "truncated"} <= rules(records)


def test_advantages_of_mixed_up_groups_are_not_centered(tiny_model, questions, tmp_path):
    model, tokenizer = tiny_model
    result = train(model, tokenizer, questions, [length_reward], output_dir=tmp_path, max_steps=1,
                   **{**QUICK, "per_device_train_batch_size": 8})  # two groups of 4
    trainer, checks = result.trainer, InvariantChecks().attach(result.trainer)
    advantages = trainer._logs["advantages"]

    logs = {"reward": 1.0}
    checks.on_log(trainer.args, trainer.state, TrainerControl(), logs=logs)
    assert logs["invariants/within_group_adv_sum_absmax"] < 1e-3

    mixed_up = sorted(advantages)  # completions of one prompt no longer sit together
    advantages.clear()
    advantages.extend(mixed_up)
    logs = {"reward": 1.0}
    checks.on_log(trainer.args, trainer.state, TrainerControl(), logs=logs)
    assert logs["invariants/within_group_adv_sum_absmax"] > 0.5
    assert "advantage_not_centered" in rules([{"step": 1, **logs}])


def test_a_falling_reward_gives_a_negative_trend(tmp_path):
    config, checks = make_config("cpu-smoke", output_dir=tmp_path), InvariantChecks()  # the trend needs no trainer
    rng = random.Random(0)
    records = []
    for step in range(1, 31):
        logs = {"reward": 1.0 - step / 30 + rng.uniform(-0.05, 0.05)}
        checks.on_log(config, TrainerState(global_step=step), TrainerControl(), logs=logs)
        records.append({"step": step, **logs})
    assert records[-1]["invariants/reward_trend"] < 0
    assert "reward_not_improving" in rules(records)
