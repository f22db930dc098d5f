"""The rewards library: the calling contract for every reward, and the recipe's defects, fixed."""

import math
import pickle
import re
from pathlib import Path

import pytest

import rewards
from rewards.combine import AdaptiveReward
from rewards.length import CosineLengthReward, SoftOverlongPunishment
from rewards.presets import REWARD_PRESETS
from rewards.registry import REWARDS, resolve

pytestmark = pytest.mark.stack_free  # nothing here reaches transformers, TRL, PEFT or datasets

SEED_NAMES = [
    "exact_match_reward", "fuzzy_match_reward", "numeric_correctness_reward", "code_execution_reward",
    "code_block_format_reward", "no_syntax_error_reward", "strict_xml_format_reward", "soft_xml_format_reward",
    "json_format_reward", "incremental_format_reward", "ideal_length_reward", "min_length_reward",
    "max_length_penalty", "reasoning_quality_reward", "citation_reward", "no_repetition_penalty",
    "math_problem_reward", "code_generation_reward",
]
PEER_NAMES = [
    "math_equivalence_reward", "think_format_reward", "tag_count_reward", "reasoning_steps_reward",
    "cosine_length_reward", "soft_overlong_punishment", "ngram_repetition_penalty", "multiple_choice_reward",
    "xml_count_reward", "int_answer_reward",
]
PRESET_NAMES = ["MATH_REASONING_REWARDS", "CODE_GENERATION_REWARDS", "SUMMARIZATION_REWARDS", "QA_REWARDS", "GSM8K_REWARDS"]

GOOD = "<reasoning>\nFirst, 3 + 4 = 7. Therefore 7.\n</reasoning>\n<answer>\n7\n</answer>"
TEXTS = [
    GOOD,
    "",
    "<reasoning>ünïcödé 🤖 — ½</reasoning><answer>七</answer>",
    "```python\nprint(7)\n```",
    "<reasoning>" * 5_000 + "x" * 200_000,  # a runaway generation
]
GOLDS = ["7", None, "7", "#### 7", "7"]
TESTS = [None, None, None, [{"input": "", "output": "7"}], None]


def call(func, texts, chat=False, **columns):
    completions = [[{"role": "assistant", "content": t}] for t in texts] if chat else list(texts)
    return func(
        prompts=["What is 3 + 4?"] * len(texts),
        completions=completions,
        completion_ids=[list(t.encode()) for t in texts],
        **columns,
    )


def test_every_documented_name_imports_from_rewards():
    for name in SEED_NAMES + PEER_NAMES + PRESET_NAMES:
        assert hasattr(rewards, name), name
    for name in SEED_NAMES + PEER_NAMES:
        assert name in REWARDS and REWARDS[name].__name__ == name
    for name in ("weighted", "RewardSet", "check_rewards", "resolve_rewards"):
        assert hasattr(rewards, name), name


PUBLIC = [
    "CODE_GENERATION_REWARDS", "GSM8K_REWARDS", "GameReward", "MATH_REASONING_REWARDS", "QA_REWARDS", "REWARD_PRESETS", "RewardSet",
    "SUMMARIZATION_REWARDS", "check_rewards", "citation_reward", "code_block_format_reward", "code_execution_reward",
    "code_generation_reward", "cosine_length_reward", "exact_match_reward", "fuzzy_match_reward", "ideal_length_reward",
    "incremental_format_reward", "int_answer_reward", "json_format_reward", "len_reward", "math_equivalence_reward",
    "math_problem_reward", "max_length_penalty", "min_length_reward", "multiple_choice_reward", "ngram_repetition_penalty",
    "no_repetition_penalty", "no_syntax_error_reward", "numeric_correctness_reward", "reasoning_quality_reward",
    "reasoning_steps_reward", "resolve_rewards", "soft_overlong_punishment", "soft_xml_format_reward",
    "strict_xml_format_reward", "tag_count_reward", "think_format_reward", "weighted", "xml_count_reward",
]


def test_the_public_api_is_the_reward_functions_the_presets_and_four_helpers():
    assert sorted(rewards.__all__) == PUBLIC and len(set(rewards.__all__)) == len(rewards.__all__)
    functions = [name for name in PUBLIC if name[0].islower() and name not in ("check_rewards", "resolve_rewards", "weighted")]
    assert functions == sorted(REWARDS), "every registered reward is exported, and nothing else that looks like one"


def test_docs_list_every_public_name():
    text = (Path(__file__).resolve().parents[1] / "docs" / "rewards.md").read_text()
    listed = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)", text))
    assert [name for name in rewards.__all__ if name not in listed] == []


@pytest.mark.parametrize("name", sorted(REWARDS))
def test_contract_both_formats_edge_inputs_and_pickling(name):
    func = REWARDS[name]
    columns = {"answer": GOLDS, "test_cases": TESTS}
    plain = call(func, TEXTS, **columns)
    chat = call(func, TEXTS, chat=True, **columns)
    assert isinstance(plain, list) and len(plain) == len(TEXTS)
    assert plain == chat, "string and chat completions must score the same"
    for score in plain:
        assert score is None or (isinstance(score, float) and math.isfinite(score)), score
    restored = pickle.loads(pickle.dumps(func))
    assert restored.__name__ == name and call(restored, TEXTS, **columns) == plain


GOLD_REWARDS = ["exact_match_reward", "fuzzy_match_reward", "numeric_correctness_reward", "math_equivalence_reward",
                "multiple_choice_reward", "cosine_length_reward"]


@pytest.mark.parametrize("name", GOLD_REWARDS)
def test_rewards_that_need_a_gold_answer_return_none_without_one(name):
    assert call(REWARDS[name], [GOOD, GOOD], answer=[None, "  "]) == [None, None]
    assert call(REWARDS[name], [GOOD], answer=None) == [None]


def test_format_regexes_match_multi_line_output_with_or_without_trailing_newline():
    assert rewards.strict_xml_format_reward(completions=[GOOD, GOOD + "\n", GOOD.replace("\n</answer>", "</answer>")]) == [0.5, 0.5, 0.0]
    assert rewards.soft_xml_format_reward(completions=[GOOD, "<reasoning>\na\n\nb</reasoning>\n\n<answer>7</answer>"]) == [0.5, 0.5]
    assert rewards.soft_xml_format_reward(completions=["<answer>7</answer><reasoning>x</reasoning>"]) == [0.0]


def test_correctness_normalises_numbers_and_golds():
    texts = ["<answer>1,000</answer>", "<answer>$1000.</answer>", "<answer>990</answer>", r"so \boxed{1000}"]
    assert rewards.numeric_correctness_reward(completions=texts, answer=["1000"] * 4) == [2.0, 2.0, 0.0, 2.0]
    assert rewards.exact_match_reward(completions=texts[:3], answer=["It is 1000.\n#### 1,000"] * 3) == [2.0, 2.0, 0.0]
    assert rewards.exact_match_reward(completions=["<answer> Paris </answer>"], answer=["paris."]) == [2.0]


def test_math_equivalence_understands_latex_and_is_asymmetric_safe():
    texts = [r"<answer>\frac12</answer>", "<answer>0.5</answer>", "<answer>1/2</answer>", r"We get \boxed{\frac{1}{2}}.", "<answer>2</answer>"]
    assert rewards.math_equivalence_reward(completions=texts, answer=["0.5"] * 5) == [2.0, 2.0, 2.0, 2.0, 0.0]
    assert rewards.math_equivalence_reward(completions=["<answer>1000</answer>"], answer=["1{,}000"]) == [2.0]
    assert rewards.math_equivalence_reward(completions=["<answer>" + "9" * 5_000 + "</answer>"], answer=["1"]) == [0.0]


def test_math_equivalence_works_off_the_main_thread():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        scores = pool.submit(rewards.math_equivalence_reward, completions=[r"<answer>\frac{3}{4}</answer>"], answer=["0.75"]).result()
    assert scores == [2.0]


def test_style_cues_are_whole_words_and_case_insensitive():
    assert rewards.citation_reward(completions=["According to Smith", "as stated in [3]"]) == [0.2, 0.2]
    assert rewards.reasoning_quality_reward(completions=["<reasoning>sincere, firstly, nextdoor</reasoning>"]) == [0.0]
    assert rewards.reasoning_quality_reward(completions=["<reasoning>THEREFORE x because y</reasoning>"]) == [0.1]


def test_penalties_never_blow_up():
    assert rewards.no_repetition_penalty(completions=["", "one two"]) == [0.0, 0.0]
    assert rewards.incremental_format_reward(completions=["<reasoning>a</reasoning><answer>1</answer>" + "x" * 10_000]) == [0.0]
    assert rewards.xml_count_reward(completions=["\n</answer>" + "junk" * 1_000]) == [0.0]
    assert min(rewards.ngram_repetition_penalty(completions=["la " * 1_000])) >= -0.5


def test_json_format_accepts_fences_and_rejects_scalars():
    assert rewards.json_format_reward(completions=['```json\n{"a": [1]}\n```', '"text"', "3", "{bad"]) == [0.5, 0.0, 0.0, 0.0]


def test_think_format_handles_prefilled_think_tags():
    assert rewards.think_format_reward(completions=["<think>a</think>answer", "a</think>answer", "<think>a<think>b</think>c"]) == [0.5, 0.5, 0.0]


def test_multiple_choice_and_length_shapes():
    assert rewards.multiple_choice_reward(completions=["<answer>B) 4</answer>", "The answer is (c)."], answer=["B", "C"]) == [2.0, 2.0]
    overlong = SoftOverlongPunishment(max_completion_len=10, soft_cache_len=4)
    assert overlong(completions=["a"] * 4, completion_ids=[[0] * 6, [0] * 8, [0] * 10, [0] * 40]) == [0.0, -0.5, -1.0, -1.0]
    cosine = CosineLengthReward(max_tokens=100)
    short, long = cosine(completions=["<answer>7</answer>"] * 2, answer=["7"] * 2, completion_ids=[[0] * 10, [0] * 90])
    assert 0.5 <= long < short <= 1.0
    with pytest.raises(ValueError, match="completion_ids"):
        cosine(completions=["x"], answer=["7"])


def test_combined_and_weighted_rewards():
    assert rewards.math_problem_reward(completions=[GOOD, "7"], answer=["7", "7"]) == [2.5, 0.0]
    reward_set = rewards.RewardSet(rewards.weighted(rewards.numeric_correctness_reward, 2.0), rewards.soft_xml_format_reward)
    assert reward_set.weights == [2.0, 1.0] and len(reward_set) == 2
    assert rewards.weighted(rewards.soft_xml_format_reward, 3.0)(completions=[GOOD]) == [1.5]


def test_adaptive_reward_follows_the_success_rate_within_bounds():
    adaptive = AdaptiveReward(rewards.numeric_correctness_reward, max_weight=1.5, min_weight=0.8)
    logged = {}
    wrong, right = ["<answer>1</answer>"] * 4, ["<answer>7</answer>"] * 4
    assert adaptive(completions=wrong, answer=["7"] * 4, log_metric=logged.__setitem__) == [0.0] * 4
    assert adaptive.weight == pytest.approx(1.2) and logged == {"adaptive/numeric_correctness_reward/weight": 1.0}
    for _ in range(3):
        adaptive(completions=wrong, answer=["7"] * 4)
    assert adaptive.weight == 1.5  # capped
    assert adaptive(completions=right, answer=["7"] * 4) == [3.0] * 4  # 2.0 at weight 1.5
    for _ in range(10):
        adaptive(completions=right, answer=["7"] * 4)
    assert adaptive.weight == 0.8


def test_registry_resolves_names_and_presets_with_helpful_errors():
    assert [f.__name__ for f in resolve("math")] == [f.__name__ for f in rewards.MATH_REASONING_REWARDS]
    assert resolve("QA_REWARDS") == REWARD_PRESETS["qa"]
    assert resolve("soft_xml_format_reward") == [rewards.soft_xml_format_reward]
    with pytest.raises(ValueError, match="did you mean soft_xml_format_reward"):
        resolve("soft_xml_format")
    with pytest.raises(ValueError, match=r"rewards\.registry\.REWARDS names every reward"):  # which exists
        resolve("no_such_reward")
    assert [f.__name__ for f in rewards.QA_REWARDS][0] == "fuzzy_match_reward"
