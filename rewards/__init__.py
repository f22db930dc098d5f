"""rewards: TRL-compatible reward functions that are right, and a lab to see what they do.

Every reward is ``f(prompts=None, completions=..., **kwargs) -> list[float | None]``: completions may be
strings or chat message lists, dataset columns (``answer``, ``test_cases``) arrive as keyword lists, and
``None`` marks a completion the reward does not apply to (TRL skips it). Names are stable: TRL logs each
as ``rewards/<name>/mean``.

    from rewards import GSM8K_REWARDS, check_rewards
    check_rewards(GSM8K_REWARDS, [{"completion": "<answer>4</answer>", "answer": "4"}])
    trainer = GRPOTrainer(..., reward_funcs=GSM8K_REWARDS)

The package exports the reward functions, the presets, ``check_rewards``, ``RewardSet`` / ``weighted``,
``resolve_rewards`` and ``GameReward`` (made for the user's game). The rest lives in its module: the classes behind the
configurable rewards (``rewards.length.IdealLength(ideal_words=...)``, ``rewards.correctness.NumericCorrectness``, ...),
``rewards.combine`` (``AdaptiveReward``, ``Combined``, ``reward_name``), ``rewards.registry`` (``REWARDS``,
``resolve``) and ``rewards.check`` (``RewardReport``, ``Problem``). docs/rewards.md lists them all.
"""

from .check import check_rewards
from .code import code_block_format_reward, code_execution_reward, code_generation_reward, no_syntax_error_reward
from .combine import RewardSet, weighted
from .correctness import (
    exact_match_reward,
    fuzzy_match_reward,
    int_answer_reward,
    math_equivalence_reward,
    multiple_choice_reward,
    numeric_correctness_reward,
)
from .format import (
    incremental_format_reward,
    json_format_reward,
    soft_xml_format_reward,
    strict_xml_format_reward,
    tag_count_reward,
    think_format_reward,
    xml_count_reward,
)
from .games import GameReward
from .length import cosine_length_reward, ideal_length_reward, len_reward, max_length_penalty, min_length_reward, soft_overlong_punishment
from .presets import (
    CODE_GENERATION_REWARDS,
    GSM8K_REWARDS,
    MATH_REASONING_REWARDS,
    QA_REWARDS,
    REWARD_PRESETS,
    SUMMARIZATION_REWARDS,
    math_problem_reward,
)
from .registry import resolve_rewards
from .style import citation_reward, ngram_repetition_penalty, no_repetition_penalty, reasoning_quality_reward, reasoning_steps_reward

# In the order a user meets them: rewards by kind, then combining them, presets, the lookup and the lab.
__all__ = [
    # correctness: is the final answer right?
    "exact_match_reward",
    "numeric_correctness_reward",
    "math_equivalence_reward",
    "multiple_choice_reward",
    "int_answer_reward",
    "fuzzy_match_reward",
    # format
    "soft_xml_format_reward",
    "strict_xml_format_reward",
    "incremental_format_reward",
    "xml_count_reward",
    "think_format_reward",
    "tag_count_reward",
    "json_format_reward",
    # length
    "ideal_length_reward",
    "min_length_reward",
    "max_length_penalty",
    "cosine_length_reward",
    "soft_overlong_punishment",
    "len_reward",
    # style
    "reasoning_quality_reward",
    "reasoning_steps_reward",
    "citation_reward",
    "no_repetition_penalty",
    "ngram_repetition_penalty",
    # code (sandboxed execution)
    "code_block_format_reward",
    "no_syntax_error_reward",
    "code_execution_reward",
    # games: the model's function plays a game in the sandbox (configured with the game, so a class)
    "GameReward",
    # combined rewards, and weights for TRL's reward_weights
    "math_problem_reward",
    "code_generation_reward",
    "RewardSet",
    "weighted",
    # presets, and the one lookup from whatever names rewards to (functions, weights)
    "REWARD_PRESETS",
    "MATH_REASONING_REWARDS",
    "GSM8K_REWARDS",
    "CODE_GENERATION_REWARDS",
    "SUMMARIZATION_REWARDS",
    "QA_REWARDS",
    "resolve_rewards",
    # the reward lab
    "check_rewards",
]
