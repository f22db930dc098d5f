"""Length rewards: steer how long completions are.

The recipe's three length rewards count words (``str.split``), as documented. The three from the
literature count tokens: TRL passes each completion's token ids as ``completion_ids``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence

from .errors import RewardError
from .extract import completion_text


def _words(completion) -> int:
    return len(completion_text(completion).split())


class IdealLength:
    """Up to ``scale`` (0.3) for a completion of ``ideal_words`` words, falling linearly to 0 at 0 or
    ``2 * ideal_words`` words (a triangle, not a Gaussian).

    >>> ideal_length_reward(completions=["w " * 100, "w " * 50, "w " * 300])
    [0.3, 0.15, 0.0]
    """

    __name__ = "ideal_length_reward"

    def __init__(self, ideal_words: int = 100, scale: float = 0.3):
        if ideal_words <= 0:
            raise RewardError(f"ideal_words must be positive, got {ideal_words}")
        self.ideal_words = ideal_words
        self.scale = scale

    def __call__(self, prompts=None, completions=(), **kwargs) -> list[float]:
        return [
            round(self.scale * max(0.0, 1 - abs(_words(c) - self.ideal_words) / self.ideal_words), 6)
            for c in completions
        ]


ideal_length_reward = IdealLength()


class MinLength:
    """+0.2 for at least ``min_words`` words (50), -0.2 below.

    >>> min_length_reward(completions=["w " * 50, "short"])
    [0.2, -0.2]
    """

    __name__ = "min_length_reward"

    def __init__(self, min_words: int = 50, bonus: float = 0.2):
        self.min_words = min_words
        self.bonus = bonus

    def __call__(self, prompts=None, completions=(), **kwargs) -> list[float]:
        return [self.bonus if _words(c) >= self.min_words else -self.bonus for c in completions]


min_length_reward = MinLength()


class MaxLengthPenalty:
    """-0.3 for more than ``max_words`` words (500), else 0.

    >>> max_length_penalty(completions=["w " * 501, "fine"])
    [-0.3, 0.0]
    """

    __name__ = "max_length_penalty"

    def __init__(self, max_words: int = 500, penalty: float = -0.3):
        self.max_words = max_words
        self.penalty = penalty

    def __call__(self, prompts=None, completions=(), **kwargs) -> list[float]:
        return [self.penalty if _words(c) > self.max_words else 0.0 for c in completions]


max_length_penalty = MaxLengthPenalty()


def _token_lengths(completions: Sequence, completion_ids: Sequence | None) -> list[int]:
    if completion_ids is None:
        raise ValueError(
            "this reward counts tokens and needs completion_ids (GRPOTrainer passes them); when calling it "
            "yourself, pass completion_ids=[token ids of each completion]"
        )
    if len(completion_ids) != len(completions):
        raise ValueError(f"completion_ids has {len(completion_ids)} entries for {len(completions)} completions")
    return [len(ids) for ids in completion_ids]


class CosineLengthReward:
    """Length scaled by correctness, on a cosine (Demystifying Long CoT, open-r1's ``len_cosine``).

    A correct completion earns between ``max_correct`` (empty) and ``min_correct`` (``max_tokens`` or
    longer): shorter is better. A wrong one earns between ``min_wrong`` (empty) and ``max_wrong`` (long):
    thinking longer is better than giving up. Lengths past ``max_tokens`` are clamped. ``None`` where the
    correctness reward has no gold.

    >>> cosine = CosineLengthReward(max_tokens=10)
    >>> cosine(completions=["<answer>4</answer>"] * 2 + ["<answer>5</answer>"], answer=["4", "4", "4"],
    ...        completion_ids=[[0] * 0, [0] * 10, [0] * 10])
    [1.0, 0.5, 0.0]
    """

    __name__ = "cosine_length_reward"

    def __init__(
        self,
        is_correct: Callable | None = None,
        *,
        max_tokens: int = 1000,
        min_wrong: float = -0.5,
        max_wrong: float = 0.0,
        min_correct: float = 0.5,
        max_correct: float = 1.0,
    ):
        from .correctness import exact_match_reward

        self.is_correct = is_correct or exact_match_reward
        self.max_tokens = max_tokens
        self.wrong = (min_wrong, max_wrong)
        self.correct = (min_correct, max_correct)

    def __call__(self, prompts=None, completions=(), completion_ids=None, **kwargs) -> list[float | None]:
        lengths = _token_lengths(completions, completion_ids)
        correctness = self.is_correct(prompts=prompts, completions=completions, **kwargs)
        scores: list[float | None] = []
        for length, correct in zip(lengths, correctness):
            if correct is None:
                scores.append(None)
                continue
            progress = min(length, self.max_tokens) / self.max_tokens
            cosine = math.cos(progress * math.pi)
            low, high = self.correct if correct > 0 else (self.wrong[1], self.wrong[0])
            scores.append(round(low + 0.5 * (high - low) * (1.0 + cosine), 6))
        return scores


cosine_length_reward = CosineLengthReward()


def prompt_groups(prompts: Sequence | None, n: int) -> list[list[int]]:
    """The indices of ``n`` completions grouped by equal prompt; one group when there are no prompts.

    >>> prompt_groups(["p", "p", "q", "q"], 4), prompt_groups(None, 3)
    ([[0, 1], [2, 3]], [[0, 1, 2]])
    """
    if prompts is None:
        return [list(range(n))]
    if len(prompts) != n:
        raise ValueError(f"prompts has {len(prompts)} entries for {n} completions")
    groups: dict[str, list[int]] = {}
    for i, prompt in enumerate(prompts):
        groups.setdefault(json.dumps(prompt, sort_keys=True, default=str), []).append(i)
    return list(groups.values())


class LenReward:
    """Kimi k1.5's length reward (open-r1's ``len_reward``): length relative to the group, short favoured.

    Within a group whose completions run from ``min_len`` to ``max_len`` tokens,
    ``lam = 0.5 - (len - min_len) / (max_len - min_len)``: a correct completion earns ``lam`` (0.5 for the
    shortest down to -0.5 for the longest), a wrong one ``min(0, lam)``, so being short never pays a wrong
    answer. A group whose completions are all one length earns 0.0.

    A group is the completions of one prompt in the call: GRPOTrainer passes a prompt's
    ``num_generations`` completions together (open-r1 ranks the whole batch, which is what happens here
    when no prompts are passed). On several GPUs a group can be split across processes, and each process
    ranks its part. Lengths are tokens (TRL's ``completion_ids``), as in Kimi k1.5; open-r1 counts
    characters. ``is_correct`` defaults to exact_match_reward; where it has no gold (``None``) the
    completion gets ``None`` and is left out of its group, where open-r1 counts it as correct.

    >>> len_reward(prompts=["p"] * 3 + ["q"], completions=["<answer>4</answer>"] * 2 + ["<answer>5</answer>"] * 2,
    ...            answer=["4"] * 4, completion_ids=[[0] * 10, [0] * 30, [0] * 20, [0] * 50])
    [0.5, -0.5, 0.0, 0.0]
    >>> len_reward(completions=[[{"role": "assistant", "content": "<answer>4</answer>"}]] * 2, answer=["4", None],
    ...            completion_ids=[[0] * 10, [0] * 30])
    [0.0, None]
    """

    __name__ = "len_reward"

    def __init__(self, is_correct: Callable | None = None):
        from .correctness import exact_match_reward

        self.is_correct = is_correct or exact_match_reward

    def __call__(self, prompts=None, completions=(), completion_ids=None, **kwargs) -> list[float | None]:
        lengths = _token_lengths(completions, completion_ids)
        correctness = self.is_correct(prompts=prompts, completions=completions, **kwargs)
        scores: list[float | None] = [None] * len(completions)
        for group in prompt_groups(prompts, len(completions)):
            scored = [i for i in group if correctness[i] is not None]
            shortest, longest = min((lengths[i] for i in scored), default=0), max((lengths[i] for i in scored), default=0)
            for i in scored:
                lam = 0.5 - (lengths[i] - shortest) / (longest - shortest) if longest > shortest else 0.0
                scores[i] = round(lam if correctness[i] > 0 else min(0.0, lam), 6) + 0.0
        return scores


len_reward = LenReward()


class SoftOverlongPunishment:
    """DAPO's soft overlong punishment, in tokens: 0 up to ``max_completion_len - soft_cache_len``, then
    falling linearly to -1 at ``max_completion_len`` (and -1 beyond).

    Use it with ``max_completion_length`` set to the same ``max_completion_len``.

    >>> punish = SoftOverlongPunishment(max_completion_len=100, soft_cache_len=20)
    >>> punish(completions=["a", "b", "c"], completion_ids=[[0] * 80, [0] * 90, [0] * 100])
    [0.0, -0.5, -1.0]
    """

    __name__ = "soft_overlong_punishment"

    def __init__(self, max_completion_len: int = 512, soft_cache_len: int = 128):
        if not 0 < soft_cache_len <= max_completion_len:
            raise RewardError("soft_cache_len must be in (0, max_completion_len]")
        self.max_completion_len = max_completion_len
        self.soft_cache_len = soft_cache_len

    def __call__(self, prompts=None, completions=(), completion_ids=None, **kwargs) -> list[float]:
        start = self.max_completion_len - self.soft_cache_len
        return [
            round(max(-1.0, min(0.0, (start - length) / self.soft_cache_len)), 6)
            for length in _token_lengths(completions, completion_ids)
        ]


soft_overlong_punishment = SoftOverlongPunishment()
