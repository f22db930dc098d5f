"""Group-relative advantages: what each completion's rewards turn into inside GRPOTrainer.

For each prompt the trainer samples G completions, scores each with every reward function, and pushes a
completion up or down by how it compares with its group:

    r_i = sum_k w_k * reward_k(i)                 (sum_then_normalize, the default)
    A_i = (r_i - mean(r_group)) / (std(r_group) + 1e-4)

``scale_rewards="batch"`` divides by the std over the whole batch instead, ``"none"`` does not divide.
``normalize_then_sum`` normalises each reward function within its group first, then sums and normalises
over the batch. ``None`` scores are skipped (NaN-aware means); a completion no function could score gets
advantage 0. This mirrors ``GRPOTrainer._generate_and_score_completions`` in TRL 1.15, including its
unbiased (n-1) standard deviation and its 1e-4 epsilon; the tests check it against TRL's own numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .errors import RewardError

EPSILON = 1e-4
SCALE_REWARDS = ("group", "batch", "none")
AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")


def _nanstd(values: torch.Tensor, dim=None, keepdim: bool = False) -> torch.Tensor:
    """Unbiased standard deviation ignoring NaNs (TRL's ``nanstd``)."""
    mean = torch.nanmean(values, dim=dim, keepdim=True)
    variance = torch.nanmean((values - mean) ** 2, dim=dim, keepdim=True)
    count = torch.sum(~torch.isnan(values), dim=dim, keepdim=True)
    variance = variance * count / (count - 1)
    std = torch.sqrt(variance)
    return std if keepdim else std.squeeze(dim) if dim is not None else std.reshape(())


def as_reward_matrix(scores_per_func: Sequence[Sequence[float | None]]) -> torch.Tensor:
    """``[function][completion]`` scores (None allowed) -> a ``(completions, functions)`` float tensor."""
    columns = [[float("nan") if s is None else float(s) for s in scores] for scores in scores_per_func]
    return torch.tensor(columns, dtype=torch.float64).T


def group_advantages(
    rewards_per_func: torch.Tensor,
    num_generations: int,
    *,
    weights: Sequence[float] | None = None,
    scale_rewards: str = "group",
    aggregation: str = "sum_then_normalize",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages for a batch laid out group after group (G rows per prompt, as TRL lays it out).

    Args:
        rewards_per_func: ``(N, K)`` scores of K reward functions for N completions; NaN = not applicable.
        num_generations: G, the group size; N must be a multiple of it.
        weights: per-function weights (TRL's ``reward_weights``); all 1.0 by default.

    Returns ``(advantages, zero_std)``: ``(N,)`` advantages and a ``(N,)`` mask of completions whose group
    (or batch) had no reward spread, i.e. carries no learning signal.

    >>> rewards = torch.tensor([[1.0], [0.0], [0.0], [0.0]])
    >>> advantages, zero_std = group_advantages(rewards, num_generations=2)
    >>> [round(a, 3) for a in advantages.tolist()], zero_std.tolist()
    ([0.707, -0.707, 0.0, 0.0], [False, False, True, True])
    """
    if scale_rewards not in SCALE_REWARDS:
        raise RewardError(f"scale_rewards={scale_rewards!r}: use one of {SCALE_REWARDS}")
    if aggregation not in AGGREGATIONS:
        raise RewardError(f"aggregation={aggregation!r}: use one of {AGGREGATIONS}")
    rewards_per_func = rewards_per_func.to(torch.float64)
    n, k = rewards_per_func.shape
    if n % num_generations:
        raise RewardError(f"{n} completions do not split into groups of num_generations={num_generations}")
    w = torch.ones(k, dtype=torch.float64) if weights is None else torch.tensor(list(weights), dtype=torch.float64)
    if w.numel() != k:
        raise RewardError(f"{w.numel()} weights for {k} reward functions")
    unscorable = torch.isnan(rewards_per_func).all(dim=1)

    if aggregation == "sum_then_normalize":
        rewards = (rewards_per_func * w).nansum(dim=1)
        rewards[unscorable] = torch.nan
        grouped = rewards.view(-1, num_generations)
        mean = torch.nanmean(grouped, dim=1).repeat_interleave(num_generations)
        if scale_rewards == "batch":
            std = _nanstd(rewards).expand_as(rewards)
        else:
            std = _nanstd(grouped, dim=1).repeat_interleave(num_generations)
        advantages = rewards - mean
        if scale_rewards != "none":
            advantages = advantages / (std + EPSILON)
    else:
        grouped = rewards_per_func.view(-1, num_generations, k)
        normalized = (grouped - torch.nanmean(grouped, dim=1, keepdim=True)) / (
            _nanstd(grouped, dim=1, keepdim=True) + EPSILON
        )
        rewards = (normalized.view(-1, k) * w).nansum(dim=1)
        rewards[unscorable] = torch.nan
        std = _nanstd(rewards).expand_as(rewards)
        advantages = (rewards - torch.nanmean(rewards)) / (std + EPSILON)
    zero_std = torch.isclose(std, torch.zeros_like(std))
    return torch.nan_to_num(advantages, nan=0.0), zero_std
