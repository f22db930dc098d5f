"""Ready-made reward sets for common tasks, and the recipe's two combined rewards.

Each preset is a plain list of reward functions: pass it to ``grpo_lite.train(rewards=...)`` or straight
to ``trl.GRPOTrainer(reward_funcs=...)``. Scales follow the recipe: correctness 2.0, format 0.5,
length up to 0.3, style within +-0.3.
"""

from __future__ import annotations

from .code import CODE_GENERATION_REWARDS, code_generation_reward
from .combine import Combined
from .correctness import exact_match_reward, fuzzy_match_reward, int_answer_reward, numeric_correctness_reward
from .format import incremental_format_reward, soft_xml_format_reward, strict_xml_format_reward, xml_count_reward
from .length import ideal_length_reward, min_length_reward
from .style import citation_reward, no_repetition_penalty, reasoning_quality_reward

math_problem_reward = Combined(soft_xml_format_reward, exact_match_reward, name="math_problem_reward")
"""Format (0.5) plus exact answer (2.0): 2.5 at most."""

MATH_REASONING_REWARDS = [incremental_format_reward, soft_xml_format_reward, exact_match_reward, reasoning_quality_reward]
SUMMARIZATION_REWARDS = [ideal_length_reward, fuzzy_match_reward, no_repetition_penalty]
QA_REWARDS = [fuzzy_match_reward, min_length_reward, citation_reward]  # fuzzy, as the recipe advises for free text
GSM8K_REWARDS = [xml_count_reward, soft_xml_format_reward, strict_xml_format_reward, int_answer_reward, numeric_correctness_reward]

REWARD_PRESETS = {
    "math": MATH_REASONING_REWARDS,
    "gsm8k": GSM8K_REWARDS,
    "code": CODE_GENERATION_REWARDS,
    "summarization": SUMMARIZATION_REWARDS,
    "qa": QA_REWARDS,
}

__all__ = [
    "math_problem_reward",
    "code_generation_reward",
    "MATH_REASONING_REWARDS",
    "CODE_GENERATION_REWARDS",
    "SUMMARIZATION_REWARDS",
    "QA_REWARDS",
    "GSM8K_REWARDS",
    "REWARD_PRESETS",
]
