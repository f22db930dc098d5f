"""Reward functions as users bring them, for tests/test_reward_compat.py.

``trl.rewards`` is imported as installed. The others are written here to the calling shapes and behaviours of
widely copied reward functions (signatures, the columns they read, chat or plain completions, ``None`` for
rows they skip, module-level state, prints, math-verify with its default signal timeouts), each naming the
source it follows. They are not copies: this project does not vendor others' code.
"""

import asyncio
import math
import re

from latex2sympy2_extended import NormalizationConfig
from math_verify import LatexExtractionConfig, parse, verify

# TRL's GRPOTrainer docs, "Using a custom reward function", Examples 1-6
# (https://github.com/huggingface/trl/blob/main/docs/source/grpo_trainer.md, Apache-2.0)


def token_count_reward(completion_ids, **kwargs):
    """Example 1: longer completions, in tokens."""
    return [float(len(ids)) for ids in completion_ids]


def char_count_reward(completions, **kwargs):
    """Example 1.1: longer completions, in characters (plain-text completions)."""
    return [float(len(text)) for text in completions]


def think_answer_format_reward(completions, **kwargs):
    """Example 2: the <think>...</think><answer>...</answer> shape, chat completions."""
    texts = [messages[0]["content"] for messages in completions]
    return [1.0 if re.match(r"^<think>.*?</think><answer>.*?</answer>$", text) else 0.0 for text in texts]


def boxed_reference_reward(completions, ground_truth, **kwargs):
    """Example 3: the \\boxed{} content against a ``ground_truth`` column (plain-text completions)."""
    found = [re.search(r"\\boxed\{(.*?)\}", text) for text in completions]
    return [1.0 if (m.group(1) if m else "") == truth else 0.0 for m, truth in zip(found, ground_truth)]


def math_task_reward(prompts, completions, task, **kwargs):
    """Example 4: scores the rows of its own task, None for the others."""
    return [(1.0 if "4" in str(completion) else -1.0) if kind == "math" else None
            for completion, kind in zip(completions, task)]


def coding_task_reward(prompts, completions, task, **kwargs):
    """Example 4's other half: only the coding rows."""
    return [(1.0 if "def " in str(completion) else -1.0) if kind == "coding" else None
            for completion, kind in zip(completions, task)]


async def async_nonempty_reward(prompts, completions, **kwargs):
    """Example 5: an async reward awaiting I/O."""
    await asyncio.sleep(0.01)
    return [1.0 if completion else 0.0 for completion in completions]


def logging_reference_reward(completions, ground_truth, log_extra=None, log_metric=None, **kwargs):
    """Example 6: logs extra columns and a metric through the trainer's callables."""
    extracted = [m.group(1) if (m := re.search(r"(\d+)", text)) else None for text in completions]
    rewards = [1.0 if e == truth else 0.0 for e, truth in zip(extracted, ground_truth)]
    if log_extra:
        log_extra("golden_answer", list(ground_truth))
        log_extra("extracted_answer", [e or "[none]" for e in extracted])
    if log_metric:
        log_metric("accuracy", sum(rewards) / len(rewards))
    return rewards


def curriculum_reward(completions, trainer_state, **kwargs):
    """``trainer_state`` (docs: "dynamic reward functions, such as curriculum learning")."""
    strict = trainer_state.global_step >= 2
    return [0.0 if strict and len(str(c)) > 20 else 0.5 for c in completions]


# open-r1, src/open_r1/rewards.py (https://github.com/huggingface/open-r1, Apache-2.0): chat completions, a
# ``solution`` column, math-verify's parse/verify with their default (signal.alarm) timeouts.

_BOXED_ANSWER = [LatexExtractionConfig(
    normalization_config=NormalizationConfig(nits=False, malformed_operators=False, basic_latex=True,
                                             equations=True, boxed="all", units=True),
    boxed_match_priority=0, try_extract_without_anchor=False)]


def _contents(completions):
    return [messages[0]["content"] for messages in completions]


def _is_correct(content, solution):
    gold = parse(solution, extraction_mode="first_match")
    if not gold:
        return None
    return verify(gold, parse(content, extraction_config=_BOXED_ANSWER, extraction_mode="first_match"))


def accuracy_reward(completions, solution, **kwargs):
    """1.0 / 0.0 by math-verify; None where the gold solution does not parse."""
    rewards = []
    for content, sol in zip(_contents(completions), solution):
        correct = _is_correct(content, sol)
        rewards.append(None if correct is None else float(correct))
    return rewards


def len_reward(completions, solution, **kwargs):
    """Kimi k1.5's length reward over the batch: shorter is better, and wrong answers never gain."""
    contents = _contents(completions)
    correct = [_is_correct(c, s) in (True, None) for c, s in zip(contents, solution)]
    lengths = [len(c) for c in contents]
    shortest, longest = min(lengths), max(lengths)
    if shortest == longest:
        return [0.0] * len(completions)
    scaled = [0.5 - (n - shortest) / (longest - shortest) for n in lengths]
    return [float(s if ok else min(0, s)) for s, ok in zip(scaled, correct)]


def get_cosine_scaled_reward(min_value_wrong=-1.0, max_value_wrong=-0.5, min_value_correct=0.5,
                             max_value_correct=1.0, max_len=1000):
    """A closure, as open-r1 builds it: correct answers earn more when short, wrong ones lose less when long."""

    def cosine_scaled_reward(completions, solution, **kwargs):
        rewards = []
        for content, sol in zip(_contents(completions), solution):
            correct = _is_correct(content, sol)
            if correct is None:
                rewards.append(1.0)
                continue
            low, high = (min_value_correct, max_value_correct) if correct else (max_value_wrong, min_value_wrong)
            cosine = math.cos(len(content) / max_len * math.pi)
            rewards.append(float(low + 0.5 * (high - low) * (1.0 + cosine)))
        return rewards

    return cosine_scaled_reward


def format_reward(completions, **kwargs):
    return [1.0 if re.match(r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$", c, re.DOTALL | re.MULTILINE) else 0.0
            for c in _contents(completions)]


def tag_count_reward(completions, **kwargs):
    tags = ("<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>")
    return [sum(0.25 for tag in tags if c.count(tag) == 1) for c in _contents(completions)]


def reasoning_steps_reward(completions, **kwargs):
    pattern = r"(Step \d+:|^\d+\.|\n-|\n\*|First,|Second,|Next,|Finally,)"
    return [min(1.0, len(re.findall(pattern, c)) / 3) for c in _contents(completions)]


# Unsloth's GRPO notebooks (https://github.com/unslothai/notebooks, LGPL-3.0): Llama 3.1 (8B) GRPO's
# GSM8K rewards and Qwen3 (4B) GRPO's regex rewards, with an ``answer`` column, prints and a module-level counter.

REASONING_START, REASONING_END, SOLUTION_START, SOLUTION_END = "<start_working_out>", "<end_working_out>", "<SOLUTION>", "</SOLUTION>"
_MATCH_FORMAT = re.compile(rf"{REASONING_END}.*?{SOLUTION_START}(.+?){SOLUTION_END}[\s]*$", flags=re.MULTILINE | re.DOTALL)
_MATCH_NUMBERS = re.compile(SOLUTION_START + r".*?[\s]{0,}([-]?[\d\.\,]{1,})", flags=re.MULTILINE | re.DOTALL)
PRINTED_TIMES = 0
PRINT_EVERY_STEPS = 5


def _xml_answer(text):
    return text.split("<answer>")[-1].split("</answer>")[0].strip()


def correctness_reward_func(prompts, completions, answer, **kwargs):
    responses = _contents(completions)
    print("-" * 20, f"Question:\n{prompts[0][-1]['content']}", f"\nAnswer:\n{answer[0]}", f"\nResponse:\n{responses[0]}")
    return [2.0 if _xml_answer(r) == a else 0.0 for r, a in zip(responses, answer)]


def int_reward_func(completions, **kwargs):
    return [0.5 if _xml_answer(r).isdigit() else 0.0 for r in _contents(completions)]


def strict_format_reward_func(completions, **kwargs):
    pattern = r"^<reasoning>\n.*?\n</reasoning>\n<answer>\n.*?\n</answer>\n$"
    return [0.5 if re.match(pattern, r) else 0.0 for r in _contents(completions)]


def soft_format_reward_func(completions, **kwargs):
    return [0.5 if re.match(r"<reasoning>.*?</reasoning>\s*<answer>.*?</answer>", r) else 0.0 for r in _contents(completions)]


def _count_xml(text):
    count = 0.125 * (text.count("<reasoning>\n") == 1) + 0.125 * (text.count("\n</reasoning>\n") == 1)
    if text.count("\n<answer>\n") == 1:
        count += 0.125 - len(text.split("\n</answer>\n")[-1]) * 0.001
    if text.count("\n</answer>") == 1:
        count += 0.125 - (len(text.split("\n</answer>")[-1]) - 1) * 0.001
    return count


def xmlcount_reward_func(completions, **kwargs):
    return [_count_xml(c) for c in _contents(completions)]


def match_format_exactly(completions, **kwargs):
    return [3.0 if _MATCH_FORMAT.search(r) is not None else 0.0 for r in _contents(completions)]


def match_format_approximately(completions, **kwargs):
    return [sum(0.5 if r.count(tag) == 1 else -1.0 for tag in (REASONING_END, SOLUTION_START, SOLUTION_END))
            for r in _contents(completions)]


def check_answer(prompts, completions, answer, **kwargs):
    scores = []
    for response, truth in zip(_contents(completions), answer):
        guess = m.group(1) if (m := _MATCH_FORMAT.search(response)) else None
        if guess is None:
            scores.append(-2.0)
        elif guess == truth:
            scores.append(5.0)
        elif guess.strip() == truth.strip():
            scores.append(3.5)
        else:
            try:
                ratio = float(guess) / float(truth)
                scores.append(2.0 if 0.9 <= ratio <= 1.1 else 1.5 if 0.8 <= ratio <= 1.2 else -2.5)
            except (ValueError, ZeroDivisionError):
                scores.append(-4.5)
    return scores


def check_numbers(prompts, completions, answer, **kwargs):
    global PRINTED_TIMES
    responses = _contents(completions)
    guesses = [m.group(1) if (m := _MATCH_NUMBERS.search(r)) else None for r in responses]
    if PRINTED_TIMES % PRINT_EVERY_STEPS == 0:
        print("*" * 20 + f"Question:\n{prompts[0][-1]['content']}", f"\nResponse:\n{responses[0]}")
    PRINTED_TIMES += 1
    scores = []
    for guess, truth in zip(guesses, answer):
        if guess is None:
            scores.append(-2.5)
            continue
        try:
            scores.append(3.5 if float(guess.strip().replace(",", "")) == float(truth.strip()) else -1.5)
        except ValueError:
            scores.append(0)
    return scores


# The GRPO recipe grpo-lite implements (its templates/basic_grpo_training.py):
# three chat rewards, weights summing to 3.0.


def incremental_format_reward_func(completions, **kwargs):
    rewards = []
    for text in _contents(completions):
        score = sum(0.125 for tag in ("<reasoning>", "</reasoning>", "<answer>", "</answer>") if tag in text)
        if "</answer>" in text:
            score -= 0.001 * len(text.split("</answer>")[-1].strip())
        rewards.append(score)
    return rewards


def format_reward_func(completions, **kwargs):
    return [0.5 if re.search(r"<reasoning>.*?</reasoning>\s*<answer>.*?</answer>", r, re.DOTALL) else 0.0
            for r in _contents(completions)]


def recipe_correctness_reward_func(prompts, completions, answer, **kwargs):
    """The recipe's ``correctness_reward_func`` (renamed here only because Unsloth's notebook has one too)."""
    return [2.0 if _xml_answer(r) == a else 0.0 for r, a in zip(_contents(completions), answer)]
