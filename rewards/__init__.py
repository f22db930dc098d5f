"""rewards: TRL-compatible reward functions that are right, and a lab to see what they do.

Every reward is ``f(prompts=None, completions=..., **kwargs) -> list[float | None]``: completions may be
strings or chat message lists, dataset columns (``answer``, ``test_cases``) arrive as keyword lists, and
``None`` marks a completion the reward does not apply to (TRL skips it). Names are stable: TRL logs each
as ``rewards/<name>/mean``.

    from rewards import GSM8K_REWARDS, check_rewards
    check_rewards(GSM8K_REWARDS, [{"completion": "<answer>4</answer>", "answer": "4"}])
    trainer = GRPOTrainer(..., reward_funcs=GSM8K_REWARDS)
"""

from .code import (
    CODE_GENERATION_REWARDS,
    AsyncCodeExecutionReward,
    CodeBlockFormat,
    CodeExecutionReward,
    code_block_format_reward,
    code_execution_reward,
    code_generation_reward,
    no_syntax_error_reward,
)
from .check import RewardReport, check_rewards, score_file
from .combine import AdaptiveReward, Combined, RewardSet, Weighted, weighted
from .correctness import (
    MathEquivalence,
    NumericCorrectness,
    exact_match_reward,
    fuzzy_match_reward,
    int_answer_reward,
    math_equivalence_reward,
    multiple_choice_reward,
    numeric_correctness_reward,
)
from .format import (
    IncrementalFormat,
    TagCount,
    ThinkFormat,
    incremental_format_reward,
    json_format_reward,
    soft_xml_format_reward,
    strict_xml_format_reward,
    tag_count_reward,
    think_format_reward,
    xml_count_reward,
)
from .length import (
    CosineLengthReward,
    IdealLength,
    LenReward,
    MaxLengthPenalty,
    MinLength,
    SoftOverlongPunishment,
    cosine_length_reward,
    ideal_length_reward,
    len_reward,
    max_length_penalty,
    min_length_reward,
    soft_overlong_punishment,
)
from .presets import (
    GSM8K_REWARDS,
    MATH_REASONING_REWARDS,
    PRESETS,
    QA_REWARDS,
    SUMMARIZATION_REWARDS,
    math_problem_reward,
)
from .registry import available, get_reward, resolve
from .style import (
    NgramRepetitionPenalty,
    citation_reward,
    ngram_repetition_penalty,
    no_repetition_penalty,
    reasoning_quality_reward,
    reasoning_steps_reward,
)


__all__ = [name for name in dir() if not name.startswith("_")]
