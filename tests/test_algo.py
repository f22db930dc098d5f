"""The reference loss (tests/reference_loss.py) against TRL itself: same rewards -> same advantages, same batch -> same loss."""

import pytest
import torch
from reference_loss import aggregate, clipped_surrogate, grpo_loss, k3_kl, per_token_logps
from stacks import newer_only

from grpo_lite import prepare_dataset, train
from grpo_lite.monitor.samples import batch_samples
from rewards import check_rewards, fuzzy_match_reward
from rewards.advantages import as_reward_matrix, group_advantages
from rewards.calling import as_trl_completion


def length_reward(completions, **kwargs):
    return [len(c[0]["content"]) / 8 for c in completions]


def vowel_reward(completions, **kwargs):
    text = [c[0]["content"] for c in completions]
    return [None if i % 3 == 0 else sum(ch in "aeiou" for ch in t) / 4 for i, t in enumerate(text)]


@pytest.fixture
def prompts():
    return prepare_dataset([{"question": f"Say {w}", "answer": w} for w in "abcdefgh"], system_prompt=None)


@pytest.mark.parametrize(
    "options",
    [
        {"scale_rewards": "group"},
        {"scale_rewards": "batch", "reward_weights": [2.0, 0.5]},
        {"scale_rewards": "none"},
        pytest.param({"multi_objective_aggregation": "normalize_then_sum", "reward_weights": [1.0, 3.0]},
                     marks=newer_only("multi_objective_aggregation")),
    ],
)
def test_lab_advantages_equal_the_advantages_trl_logs(tiny_model, prompts, tmp_path, options):
    """A real GRPOTrainer run with a library reward; the reward lab, fed the same completions, must give
    every completion the advantage TRL logged for it."""
    model, tokenizer = tiny_model
    result = train(
        model, tokenizer, prompts, [fuzzy_match_reward, vowel_reward], output_dir=tmp_path, preset="cpu-smoke",
        max_steps=1, num_generations=4, per_device_train_batch_size=8, max_completion_length=10, **options,
    )
    logs = result.trainer._logs
    rows = [  # the batch as samples.jsonl records it: the prompts as the dataset gave them, on every TRL
        {"prompt": row["prompt"], "completion": as_trl_completion(row["prompt"], row["completion"]),
         "answer": row["prompt"][-1]["content"].removeprefix("Say ")}
        for row in batch_samples(result.trainer, step=1)
    ]
    report = check_rewards(
        [fuzzy_match_reward, vowel_reward], rows, reward_weights=options.get("reward_weights"),
        scale_rewards=options.get("scale_rewards", "group"),
        multi_objective_aggregation=options.get("multi_objective_aggregation", "sum_then_normalize"),
    )
    assert report.ok, [str(p) for p in report.problems]
    assert len(report.rows) == 8 and {row["group"] for row in report.rows} == {0, 1}
    assert report.scores("fuzzy_match_reward") == pytest.approx(list(logs["rewards"]["fuzzy_match_reward"]))
    lab = torch.tensor([row["advantage"] for row in report.rows], dtype=torch.float64)
    torch.testing.assert_close(lab, torch.tensor(list(logs["advantages"]), dtype=torch.float64), atol=1e-4, rtol=1e-4)


def test_reference_advantages_center_each_group():
    matrix = as_reward_matrix([[1.0, 0.0, 0.5, 0.5, 2.0, None, 0.0, 1.0]])
    advantages, zero_std = group_advantages(matrix, 4)
    assert abs(advantages[:4].sum()) < 1e-9 and abs(advantages[4:].sum()) < 1e-9
    assert not zero_std.any()


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
def test_reference_loss_equals_trls_loss_on_a_fixed_batch(tiny_model, prompts, tmp_path, loss_type):
    from trl import GRPOTrainer

    from grpo_lite.run.config import make_config
    from grpo_lite.training.trl_compat import enable_cpu_logprobs

    enable_cpu_logprobs()
    model, tokenizer = tiny_model
    config = make_config("cpu-smoke", output_dir=tmp_path, loss_type=loss_type, beta=0.04, max_completion_length=6,
                         num_generations=4, per_device_train_batch_size=4, epsilon=0.1, epsilon_high=0.3)
    trainer = GRPOTrainer(model=model, reward_funcs=[length_reward], args=config, train_dataset=prompts, processing_class=tokenizer)
    trainer.current_gradient_accumulation_steps = 1
    generator = torch.Generator().manual_seed(0)
    batch, prompt_len, completion_len = 4, 5, 6
    prompt_ids = torch.randint(3, 200, (batch, prompt_len), generator=generator)
    completion_ids = torch.randint(3, 200, (batch, completion_len), generator=generator)
    completion_mask = torch.ones(batch, completion_len, dtype=torch.long)
    completion_mask[1, 4:] = 0
    completion_mask[3, 2:] = 0  # ragged lengths make the aggregations differ
    advantages = torch.tensor([1.2, -0.4, 0.3, -1.1])
    old = -torch.rand(batch, completion_len, generator=generator) * 3 - 4  # far enough from the policy to clip
    ref = -torch.rand(batch, completion_len, generator=generator) * 3 - 4
    inputs = {
        "prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids), "completion_ids": completion_ids,
        "completion_mask": completion_mask, "advantages": advantages, "old_per_token_logps": old,
        "ref_per_token_logps": ref, "num_items_in_batch": completion_mask.sum(),
    }
    trainer.model.train()
    trl_loss = trainer._compute_loss(trainer.model, inputs)

    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
    with torch.no_grad():
        logits = trainer.model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).logits
    logps = per_token_logps(logits[:, prompt_len - 1 : -1], completion_ids, temperature=config.temperature)
    ours = grpo_loss(  # TRL before 1.x corrects no KL for the old policy: its config has no use_bias_correction_kl
        logps, old, advantages, completion_mask, ref_logps=ref, beta=0.04, epsilon_low=0.1, epsilon_high=0.3,
        bias_correction_kl=getattr(config, "use_bias_correction_kl", False),
        loss_type=loss_type, max_completion_length=6, active_tokens_in_generation_batch=int(completion_mask.sum()),
    )
    torch.testing.assert_close(ours, trl_loss.detach().float(), atol=1e-5, rtol=1e-4)


def test_log_probs_are_log_softmax_and_never_positive():
    logits = torch.tensor([[[2.0, 0.5, -1.0], [30.0, 0.0, 0.0]]])
    tokens = torch.tensor([[1, 0]])
    logps = per_token_logps(logits, tokens)
    expected = torch.log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(logps, expected)
    assert (logps <= 0).all() and logps[0, 1] > -1e-6  # the dominant token's log-prob is ~0


def test_k3_is_zero_at_equality_and_positive_otherwise():
    a = torch.tensor([-1.0, -2.0, -0.5])
    assert torch.equal(k3_kl(a, a), torch.zeros(3))
    assert (k3_kl(a, a + torch.tensor([0.3, -0.7, 0.1])) > 0).all()


def test_clipping_stops_the_ratio_past_epsilon_for_positive_advantages():
    logps, old = torch.tensor([[0.0]]), torch.tensor([[-1.0]])  # ratio e ~ 2.72
    assert clipped_surrogate(logps, old, torch.tensor([1.0]), 0.2, 0.2).item() == pytest.approx(-1.2)
    assert clipped_surrogate(logps, old, torch.tensor([-1.0]), 0.2, 0.2).item() == pytest.approx(torch.e, rel=1e-5)


def test_aggregations_differ_as_documented_on_ragged_lengths():
    loss = torch.tensor([[1.0, 1.0, 1.0, 1.0], [4.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    assert aggregate(loss, mask, "grpo").item() == pytest.approx(2.5)  # (1 + 4) / 2 sequences
    assert aggregate(loss, mask, "bnpo").item() == pytest.approx(8 / 5)  # 8 over 5 tokens
    assert aggregate(loss, mask, "dr_grpo", max_completion_length=8).item() == pytest.approx(8 / 16)
    with pytest.raises(ValueError, match="covers grpo"):
        aggregate(loss, mask, "sapo")


def test_group_advantages_sum_to_zero_per_group_and_flag_tied_groups():
    rewards = torch.tensor([[1.0], [2.0], [3.0], [5.0], [5.0], [5.0]])
    advantages, zero_std = group_advantages(rewards, 3)
    sums = advantages.view(2, 3).sum(dim=1)
    assert sums.abs().max() < 1e-9
    assert zero_std.tolist() == [False] * 3 + [True] * 3
    with pytest.raises(ValueError, match="do not split into groups"):
        group_advantages(rewards, 4)
