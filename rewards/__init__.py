"""rewards: TRL-compatible reward functions that are right, and a lab to see what they do.

Every reward is ``f(prompts=None, completions=..., **kwargs) -> list[float | None]``: completions may be
strings or chat message lists, dataset columns (``answer``, ``test_cases``) arrive as keyword lists, and
``None`` marks a completion the reward does not apply to (TRL skips it). Names are stable: TRL logs each
as ``rewards/<name>/mean``.

    from rewards import GSM8K_REWARDS, check_rewards
    check_rewards(GSM8K_REWARDS, [{"completion": "<answer>4</answer>", "answer": "4"}])
    trainer = GRPOTrainer(..., reward_funcs=GSM8K_REWARDS)
"""

from .check import Problem, RewardReport, check_rewards
from .code import (
    AsyncCodeExecutionReward,
    CodeBlockFormat,
    CodeExecutionReward,
    code_block_format_reward,
    code_execution_reward,
    code_generation_reward,
    no_syntax_error_reward,
)
from .combine import AdaptiveReward, Combined, RewardSet, Weighted, reward_name, weighted
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
    CODE_GENERATION_REWARDS,
    GSM8K_REWARDS,
    MATH_REASONING_REWARDS,
    QA_REWARDS,
    REWARD_PRESETS,
    SUMMARIZATION_REWARDS,
    math_problem_reward,
)
from .registry import available, get_reward, import_reward, resolve, resolve_rewards
from .style import (
    NgramRepetitionPenalty,
    citation_reward,
    ngram_repetition_penalty,
    no_repetition_penalty,
    reasoning_quality_reward,
    reasoning_steps_reward,
)

# In the order a user meets them: rewards by kind, then combining them, presets and names, then the lab.
__all__ = [
    # correctness: is the final answer right?
    "exact_match_reward",
    "numeric_correctness_reward",
    "math_equivalence_reward",
    "multiple_choice_reward",
    "int_answer_reward",
    "fuzzy_match_reward",
    "NumericCorrectness",
    "MathEquivalence",
    # format
    "soft_xml_format_reward",
    "strict_xml_format_reward",
    "incremental_format_reward",
    "xml_count_reward",
    "think_format_reward",
    "tag_count_reward",
    "json_format_reward",
    "IncrementalFormat",
    "TagCount",
    "ThinkFormat",
    # length
    "ideal_length_reward",
    "min_length_reward",
    "max_length_penalty",
    "cosine_length_reward",
    "soft_overlong_punishment",
    "IdealLength",
    "MinLength",
    "MaxLengthPenalty",
    "CosineLengthReward",
    "SoftOverlongPunishment",
    "len_reward",
    "LenReward",
    # style
    "reasoning_quality_reward",
    "reasoning_steps_reward",
    "citation_reward",
    "no_repetition_penalty",
    "ngram_repetition_penalty",
    "NgramRepetitionPenalty",
    # code (sandboxed execution)
    "code_block_format_reward",
    "no_syntax_error_reward",
    "CodeBlockFormat",
    "code_execution_reward",
    "code_generation_reward",
    "CodeExecutionReward",
    "AsyncCodeExecutionReward",
    # combining
    "RewardSet",
    "weighted",
    "Weighted",
    "Combined",
    "AdaptiveReward",
    "math_problem_reward",
    # presets and names
    "REWARD_PRESETS",
    "MATH_REASONING_REWARDS",
    "GSM8K_REWARDS",
    "CODE_GENERATION_REWARDS",
    "SUMMARIZATION_REWARDS",
    "QA_REWARDS",
    "resolve",
    "resolve_rewards",
    "import_reward",
    "get_reward",
    "available",
    "reward_name",
    # the reward lab
    "check_rewards",
    "RewardReport",
    "Problem",
]
