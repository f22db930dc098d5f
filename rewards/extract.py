"""Reading completions: text from either completion format, tagged answers, final numbers, code blocks.

TRL hands a reward function completions either as strings (standard datasets) or as chat message lists
(conversational datasets). Every reward here reads them through :func:`completion_text`, so both work.
"""

from __future__ import annotations

import math
import numbers
import re
import sys
from typing import Any

_MAX_SCAN_CHARS = 200_000  # longer completions are cut before regex work so one runaway sample cannot stall a batch


def completion_text(completion: Any) -> str:
    """The text of one completion, whichever format TRL used.

    >>> completion_text("plain")
    'plain'
    >>> completion_text([{"role": "assistant", "content": "chat"}])
    'chat'
    >>> completion_text(None)
    ''
    """
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return _content_text(completion.get("content"))
    if isinstance(completion, (list, tuple)):
        messages = [m for m in completion if isinstance(m, dict)]
        assistant = [m for m in messages if m.get("role", "assistant") == "assistant"]
        chosen = assistant or messages
        return _content_text(chosen[-1].get("content")) if chosen else ""
    raise TypeError(
        f"cannot read a completion of type {type(completion).__name__}: expected a string or a list of "
        "chat messages like [{'role': 'assistant', 'content': '...'}]"
    )


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal content parts: keep the text ones
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def is_missing(value: Any) -> bool:
    """Whether ``value`` is a missing value, however its library spells it: None, a float NaN (Python's, numpy's: how
    pandas marks a missing number), numpy's and pandas' not-a-time ``NaT``, pandas' ``NA``. Text is never missing here:
    ``"nan"`` is what was written.

    >>> import math
    >>> [is_missing(v) for v in (None, math.nan, "nan", "", 0)]
    [True, True, False, False, False]
    """
    if value is None:
        return True
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):  # numpy's floats are Reals too
        return math.isnan(value)
    numpy, pandas = sys.modules.get("numpy"), sys.modules.get("pandas")  # their markers exist only once imported
    if numpy is not None and isinstance(value, (numpy.datetime64, numpy.timedelta64)):
        return bool(numpy.isnat(value))
    return pandas is not None and (value is pandas.NA or value is pandas.NaT)


def is_data_frame(value: Any) -> bool:
    """Whether ``value`` is a pandas DataFrame (a notebook's rows), without importing pandas: none exists unless it is."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(value, pandas.DataFrame)


def several_splits(value: Any, what: str) -> str | None:
    """Why ``value`` is not rows when it is a ``datasets.DatasetDict`` or ``IterableDatasetDict`` (what ``load_dataset``
    returns without ``split=``): a refusal naming ``what`` it is, its splits and the one to pick; None for anything else.
    Tells them apart without importing datasets: none exists unless it is."""
    datasets = sys.modules.get("datasets")
    if datasets is None or not isinstance(value, (datasets.DatasetDict, datasets.IterableDatasetDict)):
        return None
    splits = list(value)
    pick = "train" if "train" in splits else next(iter(splits), "train")
    return (f"{what} is a {type(value).__name__} of the splits {', '.join(map(repr, splits)) or '(none)'}: pass the one "
            f"split to use, e.g. dataset[{pick!r}]")


def extract_xml_tag(text: str, tag: str) -> str | None:
    """Content of the last ``<tag>...</tag>`` in ``text`` (stripped), or None when absent.

    Found by searching backwards from the last closing tag, in linear time: a regex with ``.*?`` goes
    quadratic on a runaway completion that repeats the opening tag.

    >>> extract_xml_tag("<answer>\\n 42 \\n</answer>", "answer")
    '42'
    >>> extract_xml_tag("<answer>1</answer> <answer>2</answer>", "answer"), extract_xml_tag("no tags", "answer")
    ('2', None)
    """
    opening, closing = f"<{tag}>", f"</{tag}>"
    end = text.rfind(closing)
    start = text.rfind(opening, 0, end) if end >= 0 else -1
    return text[start + len(opening) : end].strip() if start >= 0 else None


def extract_xml_tags(text: str, tag: str) -> list[str]:
    """Every ``<tag>...</tag>`` content in ``text``, in order (stripped). A nested opening tag stays inside
    the content it interrupts, so the caller can see the nesting.

    >>> extract_xml_tags("<answer>4</answer> then <answer> 5 </answer>", "answer")
    ['4', '5']
    >>> extract_xml_tags("<answer><answer>4</answer></answer>", "answer")
    ['<answer>4']
    """
    opening, closing = f"<{tag}>", f"</{tag}>"
    contents, position = [], 0
    while (start := text.find(opening, position)) >= 0 and (end := text.find(closing, start)) >= 0:
        contents.append(text[start + len(opening) : end].strip())
        position = end + len(closing)
    return contents


REASONING_TAGS = ("think", "reasoning")


def strip_reasoning(text: str) -> str:
    """``text`` without its reasoning, so an answer is read only from what follows it.

    ``<think>``/``<reasoning>`` blocks are removed; text before a closing tag that has no opening tag (the
    chat template opened the block in the prompt) is dropped; an unclosed block runs to the next
    ``<answer>`` or to the end.

    >>> strip_reasoning("<think>the answer is 4</think> The answer is 5.")
    ' The answer is 5.'
    >>> strip_reasoning("so 4</think>5"), strip_reasoning("<reasoning>4 <answer>4</answer>"), strip_reasoning("<think>4")
    ('5', '<answer>4</answer>', '')
    """
    for tag in REASONING_TAGS:
        opening, closing = f"<{tag}>", f"</{tag}>"
        first_close = text.find(closing)
        if first_close >= 0 and not 0 <= text.find(opening) < first_close:
            text = text[first_close + len(closing) :]
        kept, position = [], 0
        while (start := text.find(opening, position)) >= 0:
            kept.append(text[position:start])
            end = text.find(closing, start)
            if end < 0:
                answer = text.find("<answer>", start)
                position = answer if answer >= 0 else len(text)
                break
            position = end + len(closing)
        text = "".join(kept) + text[position:]
    return text


def extract_answer(text: str) -> str | None:
    """The ``<answer>`` content of a completion, or None.

    >>> extract_answer("<reasoning>2+2</reasoning>\\n<answer>4</answer>")
    '4'
    """
    return extract_xml_tag(text, "answer")


def extract_hash_answer(text: str | None) -> str | None:
    """The GSM8K gold answer after ``####``, or None when the marker is missing.

    >>> extract_hash_answer("Half of 84 is 42.\\n#### 42")
    '42'
    >>> extract_hash_answer("no marker") is None
    True
    """
    if not text or "####" not in text:
        return None
    return text.split("####")[-1].strip() or None


def gold_text(value: Any) -> str | None:
    """A row's gold answer as text: GSM8K's ``"... #### 42"`` unwrapped to ``"42"``, anything else stripped;
    None when there is none (a missing value, :func:`is_missing`, or blank text).

    >>> gold_text("Half of 84 is 42.\\n#### 42"), gold_text(" 7 "), gold_text(None), gold_text(" "), gold_text(float("nan"))
    ('42', '7', None, None, None)
    """
    if is_missing(value):
        return None
    text = str(value)
    return extract_hash_answer(text) if "####" in text else (text.strip() or None)


def extract_all_boxed(text: str) -> list[str]:
    """Every ``\\boxed{...}`` content in ``text``, in order (a box inside a box is part of the outer one).

    >>> extract_all_boxed(r"\\boxed{4} or \\boxed{\\frac{1}{2}}")
    ['4', '\\\\frac{1}{2}']
    """
    text = text[:_MAX_SCAN_CHARS]
    found, position = [], 0
    while (start := text.find("\\boxed{", position)) >= 0:
        depth, opened = 0, start + len("\\boxed")
        for end in range(opened, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                found.append(text[opened + 1 : end].strip())
                break
        else:  # unclosed: nothing after it can close a box either
            break
        position = end + 1
    return found


_ANSWER_IS = re.compile(r"answer\s*(?:is|:)\s*\$?\s*([^\n]+?)\s*(?:\.\s|\.?$|\n)", re.IGNORECASE | re.MULTILINE)
_NUMBER = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?%?|-?\$?\.\d+%?")


def extract_answer_is(text: str) -> str | None:
    """The phrase after the last "the answer is" / "answer:", or None.

    >>> extract_answer_is("So the answer is 12.")
    '12'
    """
    matches = _ANSWER_IS.findall(text[:_MAX_SCAN_CHARS])
    return matches[-1].strip() if matches else None


def extract_numbers(text: str) -> list[str]:
    """Every number written in ``text``, as written (``1e309`` is two: ``1`` and ``309``).

    >>> extract_numbers("3 apples and 1,250 pears.")
    ['3', '1,250']
    """
    return _NUMBER.findall(text[-_MAX_SCAN_CHARS:])


_THOUSANDS = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def normalize_number(value: Any) -> float | None:
    """A finite number from text such as ``"1,000"``, ``"$3.50"``, ``"42."``, ``"15%"``; None if it is not one.

    Commas count only as thousands separators: ``"1,2"`` is not 12 (it reads as a list).

    >>> normalize_number("$1,000."), normalize_number("1{,}000"), normalize_number("15%")
    (1000.0, 1000.0, 15.0)
    >>> [normalize_number(text) for text in ("forty", "1,2", "12,34", "nan", "1e309", "1_0")]
    [None, None, None, None, None, None]
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        text = str(value).strip().replace("\\$", "").replace("$", "").replace("{,}", ",")
        text = text.rstrip(".").rstrip("%").strip()
        if "," in text:
            if not _THOUSANDS.fullmatch(text):
                return None
            text = text.replace(",", "")
        if not text or len(text) > 64 or "_" in text:
            return None
        try:
            number = float(text)
        except ValueError:
            return None
    return number if math.isfinite(number) else None


_CODE_BLOCK = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code_block(text: str, language: str | None = "python") -> str | None:
    """The last fenced code block (preferring ``language`` blocks); an unterminated last fence counts.

    >>> extract_code_block("Here:\\n```python\\nprint(1)\\n```")
    'print(1)'
    """
    blocks = _CODE_BLOCK.findall(text[:_MAX_SCAN_CHARS])
    if not blocks:
        return None
    preferred = [code for lang, code in blocks if language and lang.lower() in (language, language[:2])]
    untagged = [code for lang, code in blocks if not lang]
    chosen = (preferred or untagged or [code for _, code in blocks])[-1]
    return chosen.strip("\n") or None
