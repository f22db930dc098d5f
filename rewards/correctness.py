"""Correctness rewards: does the completion's final answer match the row's gold ``answer``?

All score 2.0 for a match (the recipe's correctness weight), 0.0 for a miss, and ``None`` when the row's
gold is missing or is not the kind of answer the reward checks (each reward's docstring says which golds
it accepts), so TRL skips that sample instead of teaching the model from a label it cannot read.
Gold answers in GSM8K form (``"... #### 42"``) are read after the ``####``.

The answer is what the completion commits to after its reasoning (:func:`final_answer`). A policy that
hedges earns nothing: answers that disagree (``<answer>4</answer><answer>5</answer>``,
``\\boxed{4}\\boxed{5}``, ``4 or 5``) are no answer, and an answer written only inside ``<think>`` or
``<reasoning>`` is not read. docs/rewards.md lists what each reward refuses to pay for.
"""

from __future__ import annotations

import difflib
import logging
import math
import re
import threading
from collections.abc import Sequence
from typing import Any

from .extract import (
    completion_text,
    extract_all_boxed,
    extract_answer,
    extract_answer_is,
    extract_numbers,
    extract_xml_tags,
    gold_text,
    normalize_number,
    strip_reasoning,
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


def committed_answers(text: str) -> list[str]:
    """Every answer a completion commits to after its reasoning: all its ``<answer>`` tags, else all its
    ``\\boxed{}``, else its last "the answer is".

    >>> committed_answers(r"<think>maybe \\boxed{3}</think> \\boxed{4}, or \\boxed{5}")
    ['4', '5']
    """
    body = strip_reasoning(text)
    committed = extract_xml_tags(body, "answer") or extract_all_boxed(body)
    if committed:
        return committed
    said = extract_answer_is(body)
    return [said] if said is not None else []


def final_answer(text: str) -> str | None:
    """The one answer a completion commits to (see :func:`committed_answers`); None when there is none,
    when its answers disagree, or when answer tags are nested.

    >>> final_answer("<reasoning>..</reasoning><answer> 7 </answer>"), final_answer(r"so \\boxed{7}")
    ('7', '7')
    >>> final_answer("I think."), final_answer("<answer>4</answer><answer>5</answer>"), final_answer("<think>the answer is 7</think>")
    (None, None, None)
    """
    answers = committed_answers(text)
    if len({_normalize_text(a) for a in answers}) != 1 or "<answer>" in answers[-1]:
        return None
    return answers[-1]


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

    Accepts any non-empty gold: text compares with case, spacing and a final period ignored (``"Paris."``
    = ``"paris"``, but ``"risaP"`` and ``"two forty"`` are not ``"Paris"`` and ``"forty two"``); numbers
    compare by value (``"1,000"`` = ``"1000"``; ``"1,2"`` is not 12). ``None`` only without a gold.

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


_SCALE_WORD = re.compile(r"\b(?:hundred|thousand|million|billion|trillion)s?\b", re.IGNORECASE)
_SCALE_SUFFIX = re.compile(r"\d(?:k|K|M|bn)\b")  # "5k"; in math "2k" is a product, so only for plain numbers
_ARITHMETIC = re.compile(r"[\^*/×÷+±∓]|\d\s*[-−]\s*\d|\\(?:times|cdot|div|frac|sqrt|pm|mp)")


def predicted_number(text: str) -> float | None:
    """The number a completion answers with: its final answer if that is a number, else the one number in
    it (``"42 apples"``, ``"x = 42"``). None when the answer holds several numbers (``"4 or 5"``,
    ``"1e309"``), arithmetic (``"2^10"``, ``"5 - 5"``, ``"\\pm 4"``) or a scale word that changes the value
    (``"2 million"``, ``"5k"``).

    >>> [predicted_number(f"<answer>{a}</answer>") for a in ("$1,000", "x = 42", "4 or 5", "2^10", "2 million")]
    [1000.0, 42.0, None, None, None]
    """
    answer = final_answer(text)
    if answer is None:
        return None
    number = normalize_number(answer)
    if number is not None:
        return number
    values = {normalize_number(n) for n in extract_numbers(answer)}
    if len(values) != 1 or _ARITHMETIC.search(answer) or _SCALE_WORD.search(answer) or _SCALE_SUFFIX.search(answer):
        return None
    return values.pop()


class NumericCorrectness:
    """2.0 when the answered number equals the gold number within a relative ``tolerance``.

    Accepts golds that are one finite number (``"1,000"``, ``"$3.50"``, ``"15%"``, ``"#### 42"``); any other
    gold (``"forty two"``, ``"12 apples"``, ``"nan"``) gets ``None``. Commas (as thousands separators),
    ``$``, ``%`` and a trailing period are ignored on both sides. The default tolerance only absorbs float
    formatting (``0.30000000000000004``): a 1% tolerance would accept 990 for 1000.

    >>> numeric_correctness_reward(completions=["<answer>$1,000.</answer>", "<answer>990</answer>", "<answer>7</answer>"],
    ...                            answer=["#### 1000", "1000", "seven"])
    [2.0, 0.0, None]
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

_WHOLE_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+|-?\d+")


def int_answer_reward(prompts=None, completions=(), **kwargs) -> list[float]:
    """0.5 when the completion's ``<answer>`` is a whole number (GSM8K answers are), else 0.0.

    A format reward: it reads no gold and applies to every completion. The answer is read after the
    reasoning, and repeated answer tags must agree; a number too long to be an answer (over 64
    characters) earns nothing.

    >>> int_answer_reward(completions=["<answer>1,234</answer>", "<answer>3.5</answer>", "<answer>4</answer><answer>5</answer>"])
    [0.5, 0.0, 0.0]
    """
    scores = []
    for completion in completions:
        tagged = set(extract_xml_tags(strip_reasoning(completion_text(completion)), "answer"))
        whole = len(tagged) == 1 and _WHOLE_NUMBER.fullmatch(answer := tagged.pop()) and normalize_number(answer) is not None
        scores.append(0.5 if whole else 0.0)
    return scores


_GOLD_CHOICE = re.compile(r"\(([A-J])\)|([A-J])(?:[.:)]|$)")
_CHOICE = re.compile(r"\(?([A-J])\)?(?:[.:)\s]|$)")
_OPTION_MARK = re.compile(r"\(([A-J])\)|\b([A-J])\)")
_LETTER_LIST = re.compile(r"\(?[A-J]\)?(?:\s*(?:[,;/&]|\bOR\b|\bAND\b)?\s*\(?[A-J]\)?)+\W*")
_CHOICE_IN_TEXT = re.compile(r"(?i:answer|option|choice)\s*(?i:is|:)?\s*(?:\(([A-Ja-j])\)|\b([A-J])\b)")
_MORE_CHOICES = re.compile(r"\)?\s*(?:[,;/&]|(?i:or|and)\b)\s*(?:\([A-Ja-j]\)|[A-J]\b)")


def _picked_letter(answer: str) -> str | None:
    """The one option an answer picks ("B", "(b) 12", "C. Paris"); None for a list ("A, B", "A or B",
    "(A) 3 (B) 4")."""
    upper = answer.strip().upper()
    found = _CHOICE.match(upper)
    marks = {a or b for a, b in _OPTION_MARK.findall(upper)}
    return None if found is None or len(marks) > 1 or _LETTER_LIST.fullmatch(upper) else found.group(1)


def choice_letter(text: str) -> str | None:
    """The option letter a completion picks, after its reasoning: ``<answer>B</answer>``, ``\\boxed{B}``,
    "(B) ...", else "the answer is B" / "option (b)" in the text. None when it lists several options.

    >>> choice_letter("<answer>(c) 12</answer>"), choice_letter("So the answer is D."), choice_letter("none")
    ('C', 'D', None)
    >>> choice_letter("<answer>A, B or C</answer>"), choice_letter("The answer is A or B."), choice_letter("The answer is a cat.")
    (None, None, None)
    """
    body = strip_reasoning(text)
    committed = extract_xml_tags(body, "answer") or extract_all_boxed(body)
    if committed:
        letters = {_picked_letter(answer) for answer in committed}
        return letters.pop() if len(letters) == 1 else None
    tail = body[-2_000:]
    said = list(_CHOICE_IN_TEXT.finditer(tail))
    if not said or _MORE_CHOICES.match(tail, said[-1].end()):
        return None
    return (said[-1].group(1) or said[-1].group(2)).upper()


def multiple_choice_reward(prompts=None, completions=(), answer=None, **kwargs) -> list[float | None]:
    """2.0 when the chosen option letter equals the gold letter, else 0.0.

    Accepts golds that name one option A-J: ``"B"``, ``"(B)"``, ``"(B) 4"``, ``"B) 4"``, ``"B. 4"``; any other
    gold (``"7"``, ``"Paris"``, ``"A cat"``) gets ``None``. An answer that lists several options scores 0.0.

    >>> multiple_choice_reward(completions=["<answer>b</answer>", "answer: C", "<answer>A</answer>"], answer=["B", "(B) 4", "A cat"])
    [2.0, 0.0, None]
    """
    golds = gold_answers(answer, len(completions))
    scores: list[float | None] = []
    for completion, gold in zip(completions, golds):
        gold_letter = _GOLD_CHOICE.match(gold.strip().upper()) if gold else None
        if gold_letter is None:
            scores.append(None)
            continue
        letter = gold_letter.group(1) or gold_letter.group(2)
        scores.append(CORRECT * (choice_letter(completion_text(completion)) == letter))
    return scores


class MathEquivalence:
    """2.0 when the answer is mathematically equal to the gold, checked by math-verify.

    Accepts golds that are numbers or LaTeX math: ``0.5``, ``\\frac12``, ``1{,}000``, ``x^2+1``,
    ``(1, 2]``, ``3\\text{ cm}``, ``\\text{(A)}``. A gold with a word outside ``\\text{}`` (``forty two``,
    ``Paris``, ``12 apples``, ``sqrt(2)``, even ``2xy``: write ``2 x y``) is not math and gets ``None``, as
    TRL's accuracy_reward gives ``None`` for a gold math-verify cannot parse; read as math, its letters
    would be a product of symbols that any permutation equals. Use exact_match_reward for such golds.

    ``\\frac12`` = ``0.5`` = ``1/2``, ``1{,}000`` = ``1000``; the answer is the completion's final answer
    (<answer>, ``\\boxed{}`` or "the answer is", after the reasoning; see :func:`final_answer`), or, when
    it commits to none, a "final answer" math-verify finds after the reasoning. Answers that disagree or
    carry a scale word (``2\\text{ million}``) score 0.0. Called as ``verify(gold, pred)`` (the order
    matters). Parsed golds are cached, since each gold comes once per completion of its group.
    math-verify bounds its time with ``signal.alarm``, which only works on the main thread; elsewhere
    (TRL's async rewards, thread pools) the time limit is off and the input-length cap bounds the work.

    >>> math_equivalence_reward(completions=[r"<answer>\\frac{1}{2}</answer>", "<answer>0.3</answer>"],
    ...                         answer=["0.5", "1/2"])
    [2.0, 0.0]
    >>> math_equivalence_reward(completions=[[{"role": "assistant", "content": "<answer>two forty</answer>"}]],
    ...                         answer=["forty two"])
    [None]
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
            math_gold = reads_as_math(gold)
            self._golds[gold] = _parse_math(_as_latex(gold[: self.max_chars]), self._timeout()) if math_gold else ()
        return self._golds[gold]

    def _timeout(self) -> int | None:
        return self.timeout_seconds if threading.current_thread() is threading.main_thread() else None

    def _prediction(self, text: str) -> tuple:
        """The completion's answer, parsed; empty when it hedges or scales its value."""
        if not committed_answers(text):
            return _parse_math(strip_reasoning(text)[-self.max_chars :], self._timeout(), anchored_only=True)
        committed = final_answer(text)
        if committed is None or _SCALE_WORD.search(committed):
            return ()
        return _parse_math(_as_latex(committed[: self.max_chars]), self._timeout())

    def __call__(self, prompts=None, completions=(), answer=None, **kwargs) -> list[float | None]:
        from math_verify import verify

        logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout is disabled" off the main thread
        scores: list[float | None] = []
        for completion, gold in zip(completions, gold_answers(answer, len(completions))):
            parsed_gold = self._gold(gold) if gold else ()
            if not parsed_gold:
                scores.append(None)
                continue
            parsed = self._prediction(completion_text(completion))
            try:
                equal = bool(parsed) and verify(list(parsed_gold), list(parsed), timeout_seconds=self._timeout())
            except Exception:  # sympy can fail on odd expressions; that answer is simply not equal
                equal = False
            scores.append(CORRECT if equal else 0.0)
        return scores


_TEXT_GROUP = re.compile(r"\\(?:text\w*|math\w*|operatorname|mbox|hbox|begin|end)\s*\{[^{}]*\}|_\{[^{}]*\}")
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{2,}")


def reads_as_math(gold: str) -> bool:
    """True when ``gold`` is math: no word of two or more letters outside LaTeX commands, ``\\text{}``-like
    groups and subscripts, and no scale word.

    >>> [reads_as_math(g) for g in ("42", r"\\frac{\\pi}{2}", r"3\\text{ cm}", "x_{max}^2", "2k+1", "forty two", "Paris", "2 million")]
    [True, True, True, True, True, False, False, False]
    """
    bare = _LATEX_COMMAND.sub(" ", _TEXT_GROUP.sub(" ", gold))
    return not _WORD.search(bare) and not _SCALE_WORD.search(gold)


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
