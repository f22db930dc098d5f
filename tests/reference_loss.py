"""One GRPO step's math, as TRL computes it, written to be read top to bottom: a reference, not the code
that trains. Training runs TRL's ``GRPOTrainer`` (Unsloth's when it is installed); tests/test_algo.py holds this
module equal to TRL's loss, so it stays a true description of what runs.

1. Sample G completions per prompt and score them with the reward functions.
2. Advantages: each completion's total reward relative to its group,
   ``A_i = (r_i - mean(group)) / (std(group) + 1e-4)`` (:func:`group_advantages`, shared with the reward lab).
3. Per-token log-probabilities of the completion tokens under the policy: ``log_softmax(logits / T)``
   gathered at the sampled tokens. Always <= 0 (:func:`per_token_logps`).
4. Clipped surrogate per token, with ratio ``rho = exp(logp - logp_old)``:
   ``-min(rho * A, clip(rho, 1 - eps_low, 1 + eps_high) * A)`` (:func:`clipped_surrogate`). With one
   optimisation pass per generation batch (``num_iterations=1``), ``logp_old = logp.detach()``: rho is 1,
   the loss value is ``-A`` per token and only its gradient moves the policy. That is why GRPO's loss
   sits near 0: watch reward and KL, not loss.
5. KL to the frozen reference model, per token, with the k3 estimator (always >= 0, unbiased):
   ``exp(ref - logp) - (ref - logp) - 1`` (:func:`k3_kl`), multiplied by rho when
   ``use_bias_correction_kl`` is on (TRL 1.15's default: the samples come from the old policy), added
   as ``beta * kl``. TRL skips it when ``beta == 0`` (its default), and then logs no ``kl``.
6. Aggregate tokens into one loss (:func:`aggregate`), by ``loss_type``:
   - ``grpo``: mean over each sequence's tokens, then over sequences (short answers weigh more per token);
   - ``bnpo``: mean over all active tokens of the local batch;
   - ``dr_grpo``: sum over tokens / (sequences x max_completion_length), a constant, so no length bias;
   - ``dapo`` (TRL's default): sum over tokens / active tokens in the whole generation batch.

The tests feed the same batch to this module and to TRL's ``GRPOTrainer._compute_loss`` and require the
same loss, for ``grpo``, ``bnpo``, ``dr_grpo`` and ``dapo``.
"""

from __future__ import annotations

import torch

from rewards.advantages import group_advantages

__all__ = ["group_advantages", "per_token_logps", "k3_kl", "clipped_surrogate", "aggregate", "grpo_loss"]


def per_token_logps(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``log p(token)`` at each position: logits ``(B, T, V)``, tokens ``(B, T)`` -> ``(B, T)``, all <= 0."""
    log_probs = torch.log_softmax(logits.float() / temperature, dim=-1)
    return log_probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def k3_kl(logps: torch.Tensor, ref_logps: torch.Tensor) -> torch.Tensor:
    """Per-token KL(policy || reference), k3 estimator: ``exp(d) - d - 1`` with ``d = ref - logp``."""
    delta = ref_logps - logps
    return torch.exp(delta) - delta - 1


def clipped_surrogate(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    epsilon_low: float = 0.2,
    epsilon_high: float = 0.2,
) -> torch.Tensor:
    """Per-token PPO-style clipped objective, negated into a loss. ``advantages`` is ``(B,)``."""
    ratio = torch.exp(logps - old_logps)
    clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)
    advantages = advantages.unsqueeze(1)
    return -torch.min(ratio * advantages, clipped * advantages)


def aggregate(
    per_token_loss: torch.Tensor,
    mask: torch.Tensor,
    loss_type: str = "dapo",
    *,
    max_completion_length: int | None = None,
    active_tokens_in_generation_batch: int | None = None,
) -> torch.Tensor:
    """Token losses ``(B, T)`` and completion mask -> one scalar, as ``loss_type`` says (see module doc)."""
    mask = mask.to(per_token_loss.dtype)
    masked = per_token_loss * mask
    if loss_type == "grpo":
        return (masked.sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if loss_type == "bnpo":
        return masked.sum() / mask.sum().clamp(min=1.0)
    if loss_type == "dr_grpo":
        if max_completion_length is None:
            raise ValueError("dr_grpo divides by max_completion_length: pass it")
        return masked.sum() / (per_token_loss.size(0) * max_completion_length)
    if loss_type == "dapo":
        tokens = mask.sum() if active_tokens_in_generation_batch is None else active_tokens_in_generation_batch
        return masked.sum() / max(float(tokens), 1.0)
    raise ValueError(f"loss_type={loss_type!r}: this reference covers grpo, bnpo, dr_grpo and dapo")


def grpo_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    ref_logps: torch.Tensor | None = None,
    beta: float = 0.0,
    bias_correction_kl: bool = True,
    epsilon_low: float = 0.2,
    epsilon_high: float = 0.2,
    loss_type: str = "dapo",
    max_completion_length: int | None = None,
    active_tokens_in_generation_batch: int | None = None,
) -> torch.Tensor:
    """The GRPO loss of one batch: clipped surrogate, plus ``beta`` times k3 KL, aggregated by ``loss_type``."""
    per_token_loss = clipped_surrogate(logps, old_logps, advantages, epsilon_low, epsilon_high)
    if beta != 0.0:
        if ref_logps is None:
            raise ValueError("beta > 0 needs ref_logps, the reference model's per-token log-probs")
        kl = k3_kl(logps, ref_logps)
        if bias_correction_kl:
            kl = kl * torch.exp(logps - old_logps)
        per_token_loss = per_token_loss + beta * kl
    return aggregate(
        per_token_loss,
        mask,
        loss_type,
        max_completion_length=max_completion_length,
        active_tokens_in_generation_batch=active_tokens_in_generation_batch,
    )
