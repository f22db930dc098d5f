"""What scores and metrics say about a GRPO run: one table of diagnoses, each with its threshold and fix.

The reward lab (:func:`rewards.check_rewards`), ``grpo_lite.evaluation.group_preview``, ``grpo_lite.rescore_run`` and the
live health monitor (``grpo_lite.monitor.health``) all judge from :data:`DIAGNOSES`, so a problem gets the
same name and the same fix wherever it is found. A batch of completions (lab, preview, rescore) is judged
once; the live monitor judges a stream of steps, and ``window`` says how many steps in a row it needs.
docs/monitoring.md lists the table and is checked against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

TIE = 1e-6  # an advantage closer to 0 than this is 0: the completion teaches nothing


@dataclass(frozen=True)
class Diagnosis:
    """One documented problem: its thresholds (by metric), the steps the live monitor looks at, and the fix."""

    name: str
    when: str  # the condition; {window} and {<metric>} (with "/" written "_") are filled from the fields below
    fix: str
    thresholds: Mapping[str, float]
    window: int = 1  # live stream: steps the condition must hold in a row (for trends: the span judged)

    @property
    def condition(self) -> str:
        return self.when.format(window=self.window, **{k.replace("/", "_"): v for k, v in self.thresholds.items()})


DIAGNOSES = (
    Diagnosis("no_signal",
              "reward_std < {reward_std} for {window} steps in a row, or frac_reward_zero_std >= {frac_reward_zero_std} "
              "(the share of groups whose completions all score the same)",
              "give partial credit so completions of a prompt score differently, raise temperature or "
              "num_generations, or use prompts the model sometimes gets right",
              {"reward_std": 0.1, "frac_reward_zero_std": 0.5}, window=3),
    Diagnosis("kl_high", "kl > {kl}", "halve learning_rate or raise beta", {"kl": 0.5}),
    Diagnosis("reward_not_improving",
              "after {window} steps, the mean reward of the last third of the last {window} steps <= the first third, "
              "and the mean of the last {window} steps <= the mean of the {window} before them",
              "check the rewards in the reward lab; raise learning_rate; make the task easier or the reward more graded",
              {"invariants/reward_trend": 0.0}, window=30),
    Diagnosis("truncated", "completions/clipped_ratio > {completions_clipped_ratio}",
              "raise max_completion_length, or reward shorter answers (soft_overlong_punishment)",
              {"completions/clipped_ratio": 0.5}),
    Diagnosis("constant_reward", "a reward function's std is 0 and its mean unchanged for the first {window} steps",
              "this reward gives no signal: run it through rewards.check_rewards on real completions",
              {"rewards/<name>/std": 0.0}, window=10),
    Diagnosis("nan", "loss or grad_norm is NaN or infinite",
              "lower learning_rate, keep max_grad_norm set, and use bf16 rather than fp16", {}),
    Diagnosis("kl_absent", "no kl metric (beta is 0, so no reference model)",
              "set beta=0.04 (the grpo-lite default) to see how far the policy drifts", {}),
    Diagnosis("zero_grad", "grad_norm <= {grad_norm} from step {window} on",
              "nothing learns: check that rewards differ within groups and that the model has trainable (LoRA) weights",
              {"grad_norm": 0.0}, window=3),
    Diagnosis("advantage_not_centered",
              "invariants/within_group_adv_sum_absmax > {invariants_within_group_adv_sum_absmax}",
              "advantages of a group must sum to ~0: keep a prompt's num_generations completions together in the batch",
              {"invariants/within_group_adv_sum_absmax": 0.01}),
    Diagnosis("empty_completion_mask", "invariants/completion_tokens <= {invariants_completion_tokens}",
              "no completion token is trained on: raise max_completion_length or set mask_truncated_completions=False",
              {"invariants/completion_tokens": 0.0}),
    Diagnosis("kl_dominates",
              "invariants/kl_share > {invariants_kl_share} (beta * kl outweighs the mean absolute advantage)",
              "lower beta or learning_rate: the KL term pins the policy to the reference",
              {"invariants/kl_share": 0.5}),
    # what only episodes show (a run with tools: TRL's tools/* and grpo_lite.monitor.samples' episodes/* metrics)
    Diagnosis("turn_limit", "episodes/turn_limit >= {episodes_turn_limit} (every episode ended with a call left unanswered)",
              "every episode is cut off before the model answers: raise max_tool_calling_iterations or "
              "max_completion_length, or reward episodes that end with an answer",
              {"episodes/turn_limit": 1.0}),
    Diagnosis("tool_always_fails", "tools/failure_frequency >= {tools_failure_frequency} for {window} steps in a row "
              "(every tool call failed)",
              "read the tool results in samples.jsonl's episodes: the model names a tool that does not exist, passes "
              "arguments it cannot take, or the tool raises; fix the tool or its docstring, or reward well-formed calls",
              {"tools/failure_frequency": 1.0}, window=3),
    Diagnosis("no_tool_calls", "tools/call_frequency <= {tools_call_frequency} for {window} steps in a row in a run with tools",
              "the model never calls its tools: check that the chat template shows them, start from a model made for "
              "tool calls, or reward episodes that call one",
              {"tools/call_frequency": 0.0}, window=3),
)
DIAGNOSIS = {diagnosis.name: diagnosis for diagnosis in DIAGNOSES}


@dataclass(frozen=True)
class Finding:
    """A judgement on a batch of completions: the diagnosis (``kind``), what was seen, and what to do."""

    kind: str
    message: str
    suggestion: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.message} -> {self.suggestion}"


def finding(kind: str, message: str) -> Finding:
    """A :class:`Finding` of one of the :data:`DIAGNOSES`, with its fix as the suggestion."""
    return Finding(kind, message, DIAGNOSIS[kind].fix)


def is_correct(score: float | None) -> bool:
    """A correctness reward's score counts as a right answer when it is above 0 (pass@k, accuracy)."""
    return score is not None and score > 0


def is_no_signal(share: float) -> bool:
    """Too many groups of a batch teach nothing (TRL's ``frac_reward_zero_std``)."""
    return share >= DIAGNOSIS["no_signal"].thresholds["frac_reward_zero_std"]


def is_truncated(share: float) -> bool:
    """Too many completions hit max_completion_length (TRL's ``completions/clipped_ratio``)."""
    return share > DIAGNOSIS["truncated"].thresholds["completions/clipped_ratio"]
