"""Correctness rewards: does the completion's final answer match the row's gold ``answer``?

All score 2.0 for a match (the recipe's correctness weight), 0.0 for a miss, and ``None`` when the row
has no usable gold answer, so TRL skips that sample instead of teaching the model from a broken label.
Gold answers in GSM8K form (``"... #### 42"``) are read after the ``####``.
"""

from __future__ import annotations

import difflib
import logging
import math
import re
import threading
from typing import Any, Sequence

from .extract import (
    completion_text,
    extract_answer,
    extract_answer_is,
    extract_boxed,
    gold_text,
    extract_last_number,
    normalize_number,
)

CORRECT = 2.0
MAX_ANSWER_CHARS = 1_000  # longer "answers" are not answers; also bounds the cost of parsing them


def gold_answers(answer: Sequence[Any] | None, n: int) -> list[str | None]:
    """The gold answer for each of ``n`` completions (None where missing), GSM8K ``####`` answers unwrapped."""
    if answer is None:
        return [None] * n
    if len(answer) != n:
        raise ValueError(f"the 'answer' column has {len(answer)} values for {n} completions")
    return [gold_text(gold) for gold in answer]


def final_answer(text: str) -> str | None:
    """The answer a completion commits to: ``<answer>`` tag, else last ``\\boxed{}``, else "the answer is".

    >>> final_answer("<reasoning>..</reasoning><answer> 7 </answer>")
    '7'
    >>> final_answer(r"so \\boxed{7}") , final_answer("I think.") is None
    ('7', True)
    """
    for extractor in (extract_answer, extract_boxed, extract_answer_is):
        found = extractor(text)
        if found is not None:
            return found
    return None


def _normalize_text(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().rstrip(".").strip().casefold()


def answers_match(predicted: str | None, gold: str) -> bool:
    """Equal as text (case, spacing and a final period ignored) or as numbers (``"1,000"`` == ``"1000"``).

    >>> answers_match("1,000", "1000"), answers_match("Paris.", "paris"), answers_match("7", "8")
    (True, True, False)
    """
    if predicted is None:
        return False
    if _normalize_text(predicted) == _normalize_text(gold):
        return True
    a, b = normalize_number(predicted), normalize_number(gold)
    return a is not None and b is not None and a == b


def exact_match_reward(prompts=None, completions=(), answer=None, **kwargs) -> list[float | None]:
    """2.0 when the final answer equals the gold answer (as text or as a number), else 0.0.

    >>> exact_match_reward(completions=["<answer>1,000</answer>", "<answer>99</answer>"], answer=["1000", None])
    [2.0, None]
    """
    golds = gold_answers(answer, len(completions))
    return [
        None if gold is None else CORRECT * answers_match(final_answer(completion_text(c)), gold)
        for c, gold in zip(completions, golds)
    ]


def fuzzy_match_reward(prompts=None, completions=(), answer=None, **kwargs) -> list[float | None]:
    """Similarity in [0, 1] between the answer (the ``<answer>`` tag, or the whole text) and the gold.

    >>> fuzzy_match_reward(completions=["The cat sat."], answer=["the cat sat"])
    [1.0]
    """
    golds = gold_answers(answer, len(completions))
    scores: list[float | None] = []
    for completion, gold in zip(completions, golds):
        if gold is None:
            scores.append(None)
            continue
        text = completion_text(completion)
        predicted = _normalize_text((extract_answer(text) or text)[:MAX_ANSWER_CHARS])
        scores.append(round(difflib.SequenceMatcher(None, predicted, _normalize_text(gold[:MAX_ANSWER_CHARS])).ratio(), 6))
    return scores


def predicted_number(text: str) -> float | None:
    """The number a completion answers with: its final answer if numeric, else the last number inside it."""
    answer = final_answer(text)
    if answer is None:
        return None
    number = normalize_number(answer)
    return number if number is not None else normalize_number(extract_last_number(answer))


class NumericCorrectness:
    """2.0 when the answered number equals the gold number within a relative ``tolerance``.

    Commas, ``$``, ``%`` and a trailing period are ignored on both sides. The default tolerance only
    absorbs float formatting (``0.30000000000000004``): a 1% tolerance would accept 990 for 1000.

    >>> numeric_correctness_reward(completions=["<answer>$1,000.</answer>", "<answer>990</answer>"],
    ...                            answer=["#### 1000", "1000"])
    [2.0, 0.0]
    """

    __name__ = "numeric_correctness_reward"

    def __init__(self, tolerance: float = 1e-6):
        self.tolerance = tolerance

    def __call__(self, prompts=None, completions=(), answer=None, **kwargs) -> list[float | None]:
        golds = [normalize_number(g) for g in gold_answers(answer, len(completions))]
        scores: list[float | None] = []
        for completion, gold in zip(completions, golds):
            if gold is None:
                scores.append(None)
                continue
            predicted = predicted_number(completion_text(completion))
            close = predicted is not None and math.isclose(predicted, gold, rel_tol=self.tolerance, abs_tol=1e-9)
            scores.append(CORRECT if close else 0.0)
        return scores


numeric_correctness_reward = NumericCorrectness()


def int_answer_reward(prompts=None, completions=(), **kwargs) -> list[float]:
    """0.5 when the ``<answer>`` is a whole number (GSM8K answers are), else 0.0.

    >>> int_answer_reward(completions=["<answer>1,234</answer>", "<answer>3.5</answer>"])
    [0.5, 0.0]
    """
    pattern = re.compile(r"-?\d{1,3}(?:,\d{3})+|-?\d+")
    return [
        0.5 if (a := extract_answer(completion_text(c))) is not None and pattern.fullmatch(a) else 0.0
        for c in completions
    ]


_CHOICE = re.compile(r"^\(?([A-J])\)?(?:[.:)\s]|$)")
_CHOICE_IN_TEXT = re.compile(r"(?:answer|option|choice)\s*(?:is|:)?\s*\(?([A-J])\b\)?", re.IGNORECASE)


def choice_letter(text: str) -> str | None:
    """The option letter a completion picks: ``<answer>B</answer>``, "(B) ...", "the answer is B".

    >>> choice_letter("<answer>(c) 12</answer>"), choice_letter("So the answer is D."), choice_letter("none")
    ('C', 'D', None)
    """
    answer = extract_answer(text) or extract_boxed(text)
    if answer is not None:
        found = _CHOICE.match(answer.strip().upper())
        return found.group(1) if found else None
    matches = _CHOICE_IN_TEXT.findall(text[-2_000:])
    return matches[-1].upper() if matches else None


def multiple_choice_reward(prompts=None, completions=(), answer=None, **kwargs) -> list[float | None]:
    """2.0 when the chosen option letter equals the gold letter (``"B"`` or ``"(B) text"``), else 0.0.

    >>> multiple_choice_reward(completions=["<answer>b</answer>", "answer: C"], answer=["B", "(B) 4"])
    [2.0, 0.0]
    """
    golds = gold_answers(answer, len(completions))
    scores: list[float | None] = []
    for completion, gold in zip(completions, golds):
        gold_letter = _CHOICE.match(gold.strip().upper()) if gold else None
        if gold_letter is None:
            scores.append(None)
            continue
        scores.append(CORRECT * (choice_letter(completion_text(completion)) == gold_letter.group(1)))
    return scores


class MathEquivalence:
    """2.0 when the answer is mathematically equal to the gold, checked by math-verify.

    ``\\frac12`` = ``0.5`` = ``1/2``, ``1{,}000`` = ``1000``; the answer is read from ``<answer>``, the
    last ``\\boxed{}`` or "the answer is" (otherwise from the ``$...$`` math in the text). Called as ``verify(gold, pred)`` (the
    order matters).
    Parsed golds are cached, since each gold comes once per completion of its group.
    math-verify bounds its time with ``signal.alarm``, which only works on the main thread; elsewhere
    (TRL's async rewards, thread pools) the time limit is off and the input-length cap bounds the work.

    >>> math_equivalence_reward(completions=[r"<answer>\\frac{1}{2}</answer>", "<answer>0.3</answer>"],
    ...                         answer=["0.5", "1/2"])
    [2.0, 0.0]
    """

    __name__ = "math_equivalence_reward"

    def __init__(self, timeout_seconds: int = 5, max_chars: int = MAX_ANSWER_CHARS, cache_size: int = 4096):
        self.timeout_seconds = timeout_seconds
        self.max_chars = max_chars
        self.cache_size = cache_size
        self._golds: dict[str, tuple] = {}

    def _gold(self, gold: str) -> tuple:
        if gold not in self._golds:
            if len(self._golds) >= self.cache_size:
                self._golds.clear()
            self._golds[gold] = _parse_math(_as_latex(gold[: self.max_chars]), self._timeout())
        return self._golds[gold]

    def _timeout(self) -> int | None:
        return self.timeout_seconds if threading.current_thread() is threading.main_thread() else None

    def __call__(self, prompts=None, completions=(), answer=None, **kwargs) -> list[float | None]:
        from math_verify import verify

        logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout is disabled" off the main thread
        scores: list[float | None] = []
        for completion, gold in zip(completions, gold_answers(answer, len(completions))):
            parsed_gold = self._gold(gold) if gold else ()
            if not parsed_gold:
                scores.append(None)
                continue
            text = completion_text(completion)
            committed = final_answer(text)
            parsed = (
                _parse_math(_as_latex(committed[: self.max_chars]), self._timeout())
                if committed is not None
                else _parse_math(text[-self.max_chars :], self._timeout(), anchored_only=True)
            )
            try:
                equal = bool(parsed) and verify(list(parsed_gold), list(parsed), timeout_seconds=self._timeout())
            except Exception:  # sympy can fail on odd expressions; that answer is simply not equal
                equal = False
            scores.append(CORRECT if equal else 0.0)
        return scores


def _as_latex(answer: str) -> str:
    """Mark a bare answer as math so math-verify reads ``1{,}000`` or ``\\frac12`` whole."""
    return answer if "$" in answer or "\\boxed" in answer else f"${answer}$"


def _parse_math(text: str, timeout: int | None, anchored_only: bool = False) -> tuple:
    """math-verify's parse; ``anchored_only`` reads only ``$...$`` / ``\\[...\\]`` math from free text,
    which is both faster and safer than guessing at every number in it."""
    from math_verify import parse
    from math_verify.parser import LatexExtractionConfig

    options = {"extraction_config": [LatexExtractionConfig(try_extract_without_anchor=False)]} if anchored_only else {}
    try:
        return tuple(parse(text, parsing_timeout=timeout, **options))
    except Exception:
        return ()


math_equivalence_reward = MathEquivalence()
