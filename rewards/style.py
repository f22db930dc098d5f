"""Style rewards: reasoning cues, citations, steps, and penalties for repetition.

Style scores are small (within -0.5..0.5, the recipe's style range) so they shape, not drive, training.
Cue words are matched as whole words, case-insensitively: "since" does not fire inside "sincere".
"""

from __future__ import annotations

import re

from .errors import RewardError
from .extract import completion_text, extract_xml_tag

CONNECTORS = frozenset({"therefore", "thus", "because", "since", "consequently", "first", "second", "next", "finally", "however"})
_PUNCTUATION = ".,;:!?()[]{}\"'"


def _words(text: str) -> list[str]:
    """Lower-cased words with surrounding punctuation removed (split, not regex: this runs per sample)."""
    return [word.strip(_PUNCTUATION) for word in text.lower().split()]


def reasoning_quality_reward(prompts=None, completions=(), **kwargs) -> list[float]:
    """0.05 per distinct reasoning connector ("therefore", "because", ...) in the ``<reasoning>`` block
    (the whole text when there is none), up to 0.3. Distinct, so repeating "thus" earns nothing more.

    >>> reasoning_quality_reward(completions=["<reasoning>First x. Since y, thus z; thus w.</reasoning>",
    ...                                       "I am sincere and firstly thorough."])
    [0.15, 0.0]
    """
    scores = []
    for completion in completions:
        text = completion_text(completion)
        reasoning = extract_xml_tag(text, "reasoning") or text
        found = CONNECTORS.intersection(_words(reasoning))
        scores.append(round(min(0.3, 0.05 * len(found)), 6))
    return scores


_CITATION = re.compile(r"\[\d+(?:[,\u2013-]\s*\d+)*\]|\([a-z][a-z'\-]+(?: et al\.)?,?\s+\d{4}[a-z]?\)|\baccording to\b|\bas stated in\b")


def citation_reward(prompts=None, completions=(), **kwargs) -> list[float]:
    """0.2 when the completion cites: ``[1]``, ``(Smith, 2020)``, "according to", "as stated in".

    >>> citation_reward(completions=["According to the report, ...", "See [2].", "(Lee et al., 2019)", "no"])
    [0.2, 0.2, 0.2, 0.0]
    """
    return [0.2 if _CITATION.search(completion_text(c).lower()) else 0.0 for c in completions]


def _ngrams(text: str, n: int, unit: str = "words") -> list[tuple[str, ...]]:
    units = _words(text) if unit == "words" else [c for c in text.lower() if not c.isspace()]
    return list(zip(*(units[i:] for i in range(n))))


def no_repetition_penalty(prompts=None, completions=(), **kwargs) -> list[float]:
    """-0.3 when under 70% of the word trigrams are unique; texts too short to have trigrams are not
    penalised.

    >>> no_repetition_penalty(completions=["go " * 20, "a fine sentence with no repeats", "", "hi"])
    [-0.3, 0.0, 0.0, 0.0]
    """
    scores = []
    for completion in completions:
        trigrams = _ngrams(completion_text(completion), 3)
        repeated = bool(trigrams) and len(set(trigrams)) / len(trigrams) < 0.7
        scores.append(-0.3 if repeated else 0.0)
    return scores


class NgramRepetitionPenalty:
    """A penalty growing with the share of repeated n-grams: ``max_penalty * (1 - unique / total)``.

    The graded form (open-r1's repetition penalty) of :func:`no_repetition_penalty`'s on/off rule. n-grams
    are of lower-cased words by default; ``unit="characters"`` counts n-grams of characters (spaces
    skipped), for languages written without spaces between words, where open-r1 segments words with jieba
    (``language="zh"``).

    >>> ngram_repetition_penalty(completions=["a b c a b c a b c", "all words here differ"])
    [-0.285714, 0.0]
    >>> NgramRepetitionPenalty(ngram_size=2, max_penalty=-1.0, unit="characters")(
    ...     completions=[[{"role": "assistant", "content": "哈哈哈哈哈"}], [{"role": "assistant", "content": "我们今天去"}]])
    [-0.75, 0.0]
    """

    __name__ = "ngram_repetition_penalty"

    def __init__(self, ngram_size: int = 3, max_penalty: float = -0.5, unit: str = "words"):
        if max_penalty > 0:
            raise RewardError(f"max_penalty must be <= 0, got {max_penalty}")
        if unit not in ("words", "characters"):
            raise RewardError(f"unit={unit!r}: use 'words', or 'characters' for languages written without spaces")
        self.ngram_size = ngram_size
        self.max_penalty = max_penalty
        self.unit = unit

    def __call__(self, prompts=None, completions=(), **kwargs) -> list[float]:
        scores = []
        for completion in completions:
            grams = _ngrams(completion_text(completion), self.ngram_size, self.unit)
            share_repeated = 1 - len(set(grams)) / len(grams) if grams else 0.0
            scores.append(round(self.max_penalty * share_repeated, 6) + 0.0)
        return scores


ngram_repetition_penalty = NgramRepetitionPenalty()

_STEP = re.compile(r"(?:^|\n)\s*(?:step\s*\d+\s*[:.)]|\d+[.)]\s|[-*]\s)|\b(?:first|second|third|next|then|finally),")


def reasoning_steps_reward(prompts=None, completions=(), **kwargs) -> list[float]:
    """Up to 0.5 for laid-out steps ("Step 1:", numbered or bulleted lines, "First," ...): 3 or more
    steps earn it all.

    >>> reasoning_steps_reward(completions=["Step 1: a\\nStep 2: b\\nStep 3: c", "First, a. Then, b.", "4"])
    [0.5, 0.333333, 0.0]
    """
    return [round(0.5 * min(1.0, len(_STEP.findall(completion_text(c).lower())) / 3), 6) for c in completions]
