"""Rewards pinned to the values the published GRPO reward suites expect.

Expected values come from open-r1's tests/test_rewards.py and TRL's tests/test_rewards.py; the comment
next to each names the file and test. grpo-lite pays 0.5 for a format and 2.0 for a correct answer where
the peers pay 1.0: those rows test the scaled value, and say so.
"""

import json
from collections import Counter

import pytest

import rewards
from rewards import len_reward, math_equivalence_reward, think_format_reward
from rewards.code import CodeBlockFormat
from rewards.format import ThinkFormat
from rewards.length import CosineLengthReward, LenReward
from rewards.registry import REWARDS
from rewards.style import NgramRepetitionPenalty

FORMAT_SCALE = 0.5  # peers pay 1.0 for a format
CORRECT_SCALE = 2.0  # peers pay 1.0 for a correct answer


def chat(texts):
    return [[{"role": "assistant", "content": text}] for text in texts]


def char_ids(texts):
    """Token ids one per character: open-r1's len_reward counts characters, grpo-lite counts tokens."""
    return [list(range(len(text))) for text in texts]


RIGHT, WRONG = r"\boxed{\frac{63}{400}}", r"\boxed{\frac{64}{400}}"
GOLD = r"\frac{63}{400}"
math_len_reward = LenReward(is_correct=math_equivalence_reward)  # open-r1 checks correctness with math-verify


@pytest.mark.parametrize("reward", [len_reward, math_len_reward], ids=["exact_match", "math_equivalence"])
def test_len_reward_matches_open_r1(reward):
    def scores(texts, golds):
        return reward(completions=chat(texts), answer=golds, completion_ids=char_ids(texts))

    longer_right, longer_wrong = RIGHT + "  " + "x" * 10, WRONG + "  " + "x" * 10
    # open-r1 test_rewards.py::test_same_length_responses
    assert scores([RIGHT, WRONG], [GOLD] * 2) == [0.0, 0.0]
    # open-r1 test_rewards.py::test_different_lengths_correct_answers: the shortest correct gets 0.5, and by
    # len_reward's formula (0.5 - (len - min) / (max - min)) the longest gets -0.5
    assert scores([RIGHT, longer_right], [GOLD] * 2) == [0.5, -0.5]
    # open-r1 test_rewards.py::test_different_lengths_incorrect_answers: wrong answers get min(0, lambda)
    assert scores([WRONG, longer_wrong], [GOLD] * 2) == [0.0, -0.5]
    # open-r1 test_rewards.py::test_mixed_correctness
    assert scores([RIGHT, longer_right, WRONG, longer_wrong], [GOLD] * 4) == [0.5, -0.5, 0.0, -0.5]


def test_len_reward_does_not_count_an_unreadable_gold_as_correct():
    texts = [r"\boxed{answer}", r"\boxed{answer} " + "x" * 10]
    golds = ["unparseable_latex"] * 2
    # open-r1 test_rewards.py::test_unparseable_solution expects [0.5, -0.5]: it counts an unparseable gold as
    # correct. grpo-lite does not pay for a gold it cannot read: exact match finds the answer wrong ...
    assert len_reward(completions=texts, answer=golds, completion_ids=char_ids(texts)) == [0.0, -0.5]
    # ... and math-verify's reward does not apply to a gold that is not math
    assert math_len_reward(completions=texts, answer=golds, completion_ids=char_ids(texts)) == [None, None]


def test_len_reward_ranks_each_prompt_group_separately():
    prompts = ["p"] * 2 + ["q"] * 2
    texts = ["<answer>4</answer>"] * 4
    ids = [[0] * 10, [0] * 20, [0] * 100, [0] * 200]
    assert len_reward(prompts=prompts, completions=texts, answer=["4"] * 4, completion_ids=ids) == [0.5, -0.5, 0.5, -0.5]
    # without prompts the whole batch is one group, as in open-r1
    assert len_reward(completions=texts, answer=["4"] * 4, completion_ids=ids) == [0.5, pytest.approx(0.447368), 0.026316, -0.5]
    with pytest.raises(ValueError, match="completion_ids"):
        len_reward(completions=texts, answer=["4"] * 4)


GROUP_CALLS = []


def recorded_len_reward(prompts, completions, completion_ids, **kwargs):
    """len_reward, remembering the prompts of each call the trainer makes."""
    GROUP_CALLS.append([json.dumps(p, sort_keys=True) for p in prompts])
    return len_reward(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)


def test_grpo_trainer_passes_each_prompts_completions_in_one_call(tiny_model, tmp_path):
    from grpo_lite import load_builtin, prepare_dataset, read_metrics, train

    model, tokenizer = tiny_model
    GROUP_CALLS.clear()
    train(model, tokenizer, prepare_dataset(load_builtin("arithmetic")[:8]), [recorded_len_reward], output_dir=tmp_path,
          preset="cpu-smoke", max_steps=2, num_generations=4, per_device_train_batch_size=8, max_completion_length=8)
    assert GROUP_CALLS and all(set(Counter(call).values()) == {4} for call in GROUP_CALLS), GROUP_CALLS
    assert all("rewards/recorded_len_reward/mean" in record for record in read_metrics(tmp_path))


TRL_VALID_THINK = [
    "<think>This is my reasoning.</think>This is my answer.",
    "<think>\nThis is my reasoning.\n</think>\nThis is my answer.",
    "<think>\nThis is\nmy reasoning.\n</think>\nThis is my answer.",
    "<think>\nThis is <some tag> my reasoning.</think>\nThis is my answer.",
    "<think></think>\nThis is my answer.",
]
TRL_INVALID_THINK = [
    "<think>\nThis is my reasoning.\nThis is my answer.",
    "<think>This is my reasoning.\nThis is my answer.",
    "This is my reasoning. This is my answer.",
    "This is my reasoning.\nThis is my answer.",
    "This is my reasoning.</think>\nThis is my answer.",
    "This is my reasoning.</think>This is my answer.",
    "This<think>is my reasoning.</think>\nThis is my answer.",
    "<think>This is<think>my reasoning.</think></think>This is my answer.",
    "<think>This is</think>\nmy\n<think>reasoning.</think>\nThis is my answer.",
]


def test_strict_think_format_matches_trl():
    strict = ThinkFormat(require_open_tag=True)
    # TRL test_rewards.py::TestThinkFormatReward::test_valid_format expects 1.0 each (scaled to 0.5 here)
    assert strict(completions=chat(TRL_VALID_THINK)) == [1.0 * FORMAT_SCALE] * 5
    # TRL test_rewards.py::TestThinkFormatReward::test_invalid_format expects 0.0 each
    assert strict(completions=chat(TRL_INVALID_THINK)) == [0.0] * 9
    # TRL test_rewards.py::TestThinkFormatReward::test_mixed_format expects [1.0, 1.0, 0.0, 0.0] (scaled)
    assert strict(completions=TRL_VALID_THINK[:2] + TRL_INVALID_THINK[1:3]) == [FORMAT_SCALE, FORMAT_SCALE, 0.0, 0.0]


def test_default_think_format_counts_a_prompt_opened_block():
    # the two "No opening <think>" rows of TRL's test_invalid_format: grpo-lite's default assumes the chat
    # template opened the block in the prompt; everything else agrees with TRL
    no_opening = {4, 5}
    expected = [FORMAT_SCALE if i in no_opening else 0.0 for i in range(len(TRL_INVALID_THINK))]
    assert think_format_reward(completions=TRL_INVALID_THINK) == expected
    assert think_format_reward(completions=TRL_VALID_THINK) == [FORMAT_SCALE] * 5


OPEN_R1_PYTHON = "<think>\nLet's solve this\nStep 1: First step\n</think>\n<answer>\n```python\ndef hello():\n    print('world')\n```\n</answer>"
OPEN_R1_TWO_BLOCKS = (
    "<think>\nHere's an example:\n```python\nx = 1\n```\nNow the solution:\n</think>\n<answer>\n```python\ndef solution():\n"
    "    return 42\n```\n</answer>"
)
OPEN_R1_MULTILINE = (
    "<think>\nHere's the analysis\n</think>\n<answer>\n```python\nclass Solution:\n    def __init__(self):\n        self.value = 42\n"
    "        \n    def get_value(self):\n        return self.value\n```\n</answer>"
)
OPEN_R1_JAVASCRIPT = "<think>\nAnalysis\n</think>\n<answer>\n```javascript\nconsole.log('hello');\n```\n</answer>"


def test_code_block_format_language_matches_open_r1():
    python = CodeBlockFormat(language="python")
    # open-r1 test_rewards.py::TestCodeFormat::test_correct_python_format, test_multiple_code_blocks and
    # test_multiline_code expect 1.0 (scaled to 0.5 here)
    assert python(completions=chat([OPEN_R1_PYTHON, OPEN_R1_TWO_BLOCKS, OPEN_R1_MULTILINE])) == [FORMAT_SCALE] * 3
    # open-r1 test_rewards.py::TestCodeFormat::test_different_languages: 1.0 for javascript, 0.0 for python
    assert CodeBlockFormat(language="javascript")(completions=chat([OPEN_R1_JAVASCRIPT])) == [FORMAT_SCALE]
    assert python(completions=chat([OPEN_R1_JAVASCRIPT])) == [0.0]
    # open-r1 test_rewards.py::TestCodeFormat::test_incorrect_formats expects 0.0 for all five; grpo-lite
    # checks the fence only, so the two with a python fence but no (or misordered) think/answer tags pay
    incorrect = [
        "```python\ndef hello():\n    print('world')\n```",
        "<think>Some thinking</think><answer>Just plain text</answer>",
        "<think>Analysis</think><answer>```javascript\nconsole.log('hello');\n```</answer>",
        "<think>Analysis</think><answer>```\ndef hello(): pass\n```</answer>",
        "<answer>```python\ndef hello(): pass\n```</answer><think>Analysis</think>",
    ]
    assert python(completions=chat(incorrect)) == [FORMAT_SCALE, 0.0, 0.0, 0.0, FORMAT_SCALE]


def penalty(ngram_size, max_penalty, texts, unit="words"):
    return NgramRepetitionPenalty(ngram_size=ngram_size, max_penalty=max_penalty, unit=unit)(completions=chat(texts))


@pytest.mark.parametrize("ngram_size, max_penalty, text, expected", [
    (2, -1.0, "this is a test sentence", 0.0),  # open-r1 test_rewards.py::test_no_repetition
    (2, -1.0, "this this this this this", -0.75),  # open-r1 test_rewards.py::test_full_repetition
    (2, -1.0, "this is a this is a test", -1 / 3),  # open-r1 test_rewards.py::test_partial_repetition
    (2, -1.0, "", 0.0),  # open-r1 test_rewards.py::test_empty_completion
    (3, -2.0, "this is a this is a test", -0.4),  # open-r1 test_rewards.py::test_different_ngram_size
    (3, -1.0, "word", 0.0),  # open-r1 test_rewards.py::test_one_word_completion
    (3, -1.0, "two words", 0.0),  # open-r1 test_rewards.py::test_two_word_completion
    (3, -1.0, "three different words", 0.0),  # open-r1 test_rewards.py::test_three_word_completion
    (3, -1.0, "word word word word", -0.5),  # open-r1 test_rewards.py::test_three_word_repetition_completion
    (3, -1.0, "one two one two", 0.0),  # open-r1 test_rewards.py::test_four_word_completion_with_repetition
    (3, -0.5, "A B C A B", 0.0),  # open-r1 test_rewards.py::test_five_word_completion_with_repetition
    (3, -1.0, "A B C A B C", -0.25),  # open-r1 test_rewards.py::test_six_word_completion_with_repetition
    (3, -1.0, "A B C A B C E F G A B C A B C", -0.3846),  # open-r1 test_rewards.py::test_long_completion_with_repetition
    (3, -1.0, "A B C D E F G H I J K L", 0.0),  # open-r1 test_rewards.py::test_long_completion_without_repetition
])
def test_word_repetition_penalty_matches_open_r1(ngram_size, max_penalty, text, expected):
    assert penalty(ngram_size, max_penalty, [text]) == [pytest.approx(expected, abs=1e-4)]


def test_word_repetition_penalty_edge_cases_match_open_r1():
    # open-r1 test_rewards.py::test_multiple_completions
    assert penalty(3, -0.5, ["this is a test", "test test test test"]) == [0.0, -0.25]
    # open-r1 test_rewards.py::test_mixed_case
    assert penalty(2, -1.0, ["This is A Test"]) == penalty(2, -1.0, ["this IS a test"])
    # open-r1 test_rewards.py::test_positive_max_penalty_raises_value_error
    with pytest.raises(ValueError, match="max_penalty"):
        NgramRepetitionPenalty(ngram_size=2, max_penalty=1.5)
    with pytest.raises(ValueError, match="characters"):
        NgramRepetitionPenalty(unit="jieba")


TOKENS = "零一二三四五六七八九"  # TRL's token ids, one character each: [1, 2] -> "一二"


def as_characters(ids):
    return "".join(TOKENS[i] for i in ids)


@pytest.mark.parametrize("ngram_size, max_penalty, ids, expected", [
    (2, -1.0, [1, 2, 3, 4], 0.0),  # TRL test_rewards.py::TestRepetitionPenaltyReward::test_no_repetition_yields_zero
    (2, -1.0, [5, 5, 5, 5, 5], -0.75),  # TRL ...::test_full_repetition_approaches_max_penalty
    (2, -1.0, [1, 2, 1, 2, 1, 2], -0.6),  # TRL ...::test_partial_repetition
    (3, -1.0, [1, 2], 0.0),  # TRL ...::test_completion_shorter_than_ngram_size_yields_zero
    (3, -1.0, [1, 2, 3], 0.0),  # TRL ...::test_completion_exactly_ngram_size_yields_zero
    (3, -1.0, [], 0.0),  # TRL ...::test_empty_completion_yields_zero
    (2, -0.5, [5, 5, 5, 5, 5], -0.375),  # TRL ...::test_max_penalty_scales_reward
    (2, -1.0, [1, 2, 3, 1, 2, 3], -0.4),  # TRL ...::test_ngram_size_changes_reward (bigrams)
    (3, -1.0, [1, 2, 3, 1, 2, 3], -0.25),  # TRL ...::test_ngram_size_changes_reward (trigrams)
])
def test_character_repetition_penalty_matches_trl_token_penalty(ngram_size, max_penalty, ids, expected):
    text = as_characters(ids)
    assert penalty(ngram_size, max_penalty, [text], unit="characters") == [pytest.approx(expected, abs=1e-6)]
    spaced = " ".join(text)  # spaces between characters are skipped
    assert penalty(ngram_size, max_penalty, [spaced], unit="characters") == [pytest.approx(expected, abs=1e-6)]


def test_character_repetition_penalty_on_open_r1_chinese_text():
    # open-r1 test_rewards.py::test_full_repetition_with_language expects -0.75 for this text with
    # language="zh": jieba cuts it into five words "这个", 4 bigrams, 1 unique. Character bigrams are 9 with 2
    # unique ("这个", "个这"): 1 - 2/9.
    assert penalty(2, -1.0, ["这个这个这个这个这个"], unit="characters") == [pytest.approx(-7 / 9, abs=1e-6)]
    # open-r1's English case from the same test, through the word unit
    assert penalty(2, -1.0, ["that that that that that"]) == [-0.75]


def test_math_equivalence_matches_trl_accuracy_reward():
    score = math_equivalence_reward
    # TRL test_rewards.py::TestAccuracyReward::test_accuracy_reward_correct_answer: 1.0 for both (scaled)
    assert score(completions=chat([RIGHT] * 2), answer=[GOLD, "63/400"]) == [CORRECT_SCALE] * 2
    # TRL ...::test_accuracy_reward_wrong_answer and ...::test_accuracy_reward_wrong_answer_no_latex
    assert score(completions=chat([WRONG, r"\boxed{3}"]), answer=[GOLD, "6"]) == [0.0, 0.0]
    # TRL ...::test_accuracy_reward_unparsable_gold: None for golds math-verify cannot parse
    assert score(completions=chat(["Answer is forty two.", r"Some other content. \boxed{43}."]),
                 answer=["Answer is forty two.", "Answer is forty three."]) == [None, None]
    # TRL TestReasoningAccuracyReward::test_unparsable_gold_solution_yields_none_reward
    assert score(completions=chat([r"<think> Reasoning content </think> \boxed{42}"]), answer=["forty two"]) == [None]


def test_math_equivalence_reads_the_answer_after_the_reasoning_as_trl():
    score = math_equivalence_reward
    # TRL test_rewards.py::TestReasoningAccuracyReward::test_correct_answer_yields_unit_reward (scaled)
    after = [rf"<think> Reasoning content </think> {RIGHT}", rf"Reasoning content </think> {RIGHT}"]
    assert score(completions=chat(after), answer=[GOLD] * 2) == [CORRECT_SCALE] * 2
    # TRL ...::test_correct_answer_in_reasoning_yields_zero_reward
    inside = [r"<think> My answer is \boxed{42} </think> Some other text.",
              r"<think> The answer is \boxed{42} </think> Here's a wrong answer: \boxed{43}."]
    assert score(completions=chat(inside), answer=[r"\boxed{42}"] * 2) == [0.0, 0.0]
    # TRL ...::test_incomplete_reasoning_yields_zero_reward, first case (an unclosed <think>). Its second case
    # (an answer with no reasoning at all) scores 0.0 there because that reward requires a reasoning block;
    # math_equivalence_reward, like TRL's accuracy_reward, does not.
    assert score(completions=chat([r"<think> Incomplete reasoning without closing tag"]), answer=[GOLD]) == [0.0]


def test_cosine_length_reward_with_math_verify_matches_trl():
    cosine = CosineLengthReward(is_correct=math_equivalence_reward, max_tokens=100, min_wrong=-1.0, max_wrong=-0.5)
    third, half = r"\boxed{\frac{1}{3}}", r"\boxed{\frac{1}{2}}"
    golds = [r"\frac{1}{3}"] * 2
    # TRL test_rewards.py::TestCosineScaledReward::test_correct_shorter_rewarded_more
    assert cosine(completions=chat([third] * 2), answer=golds, completion_ids=[[1] * 25, [1] * 75]) == [
        pytest.approx(0.92678, abs=1e-4), pytest.approx(0.57322, abs=1e-4)]
    # TRL ...::test_wrong_longer_penalized_less
    assert cosine(completions=chat([half] * 2), answer=golds, completion_ids=[[1] * 25, [1] * 75]) == [
        pytest.approx(-0.92678, abs=1e-4), pytest.approx(-0.57322, abs=1e-4)]
    # TRL ...::test_midpoint_values
    assert cosine(completions=chat([third, half]), answer=golds, completion_ids=[[1] * 50] * 2) == [0.75, -0.75]
    # TRL ...::test_unparsable_gold_yields_none
    assert cosine(completions=chat([r"\boxed{42}"]), answer=["forty two"], completion_ids=[[1] * 50]) == [None]


def test_new_rewards_are_registered_and_exported():
    assert REWARDS["len_reward"] is len_reward
    assert "len_reward" in rewards.__all__
