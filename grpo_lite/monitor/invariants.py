"""GRPO invariants, checked at every logged step and written next to TRL's metrics.

Cheap checks of what must hold when GRPO works (see tests/reference_loss.py and ``rewards.advantages``); most
"it does not learn" reports break one of them. Each value goes into the step's logs as
``invariants/<name>``, so metrics.jsonl keeps it and the health rules (:mod:`.health`) can warn:

- ``within_group_adv_sum_absmax``: the largest |sum of advantages| over the step's groups (should be ~0);
- ``advantage_abs_mean``: the mean |advantage|, the size of the policy term (0: nothing is pushed);
- ``kl_share``: beta * kl / (beta * kl + mean |advantage|): how much of the update the KL term drives;
- ``completion_tokens``: completion tokens per completion that the loss sees (0: the mask is empty);
- ``reward_trend``: mean reward of the last third minus the first third of the last 30 steps.

grad_norm > 0 is read from TRL's own ``grad_norm``.
"""

from __future__ import annotations

import torch

from rewards.diagnoses import DIAGNOSIS

from ..run.callbacks import RunCallback
from .health import metric, reward_trend

TREND_WINDOW = DIAGNOSIS["reward_not_improving"].window


def completion_tokens(logs: dict, mask_truncated_completions: bool) -> float | None:
    """Mean completion-mask sum per completion, from TRL's length metrics.

    TRL measures lengths before ``mask_truncated_completions`` zeroes the truncated rows, so with that
    option only the terminated completions (``1 - clipped_ratio`` of them) count.
    """
    if not mask_truncated_completions:
        return metric(logs, "completions/mean_length")
    terminated_length = metric(logs, "completions/mean_terminated_length")
    clipped = metric(logs, "completions/clipped_ratio")
    if terminated_length is None or clipped is None:
        return None
    return terminated_length * (1.0 - clipped)


class InvariantChecks(RunCallback):
    """Adds ``invariants/*`` to each step's logs; list it before :class:`MetricsLog` so they are recorded.

    It reads the advantages the trainer keeps (``trainer._logs``), so ``train()`` calls :meth:`attach`
    once the GRPOTrainer exists.
    """

    def __init__(self, trainer=None):
        self.trainer = trainer
        self.rewards: list[float | None] = []

    def attach(self, trainer) -> InvariantChecks:
        self.trainer = trainer
        return self

    def _advantages(self, group_size: int) -> torch.Tensor | None:
        """The latest whole groups of advantages as a ``(groups, group_size)`` tensor."""
        advantages = list(getattr(self.trainer, "_logs", {}).get("advantages", ()))
        whole = len(advantages) - len(advantages) % group_size
        if whole == 0:
            return None
        return torch.tensor(advantages[-whole:], dtype=torch.float64).view(-1, group_size)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "reward" not in logs:  # the end-of-training summary has no step metrics
            return
        self.rewards.append(metric(logs, "reward"))
        if len(self.rewards) > 4 * TREND_WINDOW:  # trimmed now and then: the trend reads the last window only
            del self.rewards[:-TREND_WINDOW]
        advantages = self._advantages(args.num_generations)
        if advantages is not None:
            adv_abs_mean = advantages.abs().mean().item()
            logs["invariants/within_group_adv_sum_absmax"] = advantages.sum(dim=1).abs().max().item()
            logs["invariants/advantage_abs_mean"] = adv_abs_mean
            kl = metric(logs, "kl")
            if args.beta and kl is not None:
                kl_term = args.beta * kl
                logs["invariants/kl_share"] = kl_term / (kl_term + adv_abs_mean) if kl_term + adv_abs_mean > 0 else 0.0
        tokens = completion_tokens(logs, args.mask_truncated_completions)
        if tokens is not None:
            logs["invariants/completion_tokens"] = tokens
        trend = reward_trend(self.rewards)
        if trend is not None:
            logs["invariants/reward_trend"] = trend
