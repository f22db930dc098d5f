"""Format rewards: does the completion have the shape the task asks for?

Format rewards score up to 0.5 (the recipe's format weight). Every regex is DOTALL, so reasoning that
spans lines matches, and accepts output with or without a trailing newline.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from .extract import completion_text

FORMAT = 0.5

_STRICT_XML = re.compile(r"\s*<reasoning>\n.*?\n</reasoning>\n<answer>\n.*?\n</answer>\s*", re.DOTALL)
_REASONING_THEN_ANSWER = re.compile(r"</reasoning>\s*<answer>")


def has_reasoning_then_answer(text: str) -> bool:
    """``<reasoning>...</reasoning>`` then ``<answer>...</answer>``, anywhere, with anything inside.

    Equivalent to searching ``<reasoning>.*?</reasoning>\\s*<answer>.*?</answer>`` (DOTALL), in linear time.
    """
    first_open = text.find("<reasoning>")
    if first_open < 0:
        return False
    last_close = text.rfind("</answer>")
    return any(
        m.start() > first_open and m.end() <= last_close for m in _REASONING_THEN_ANSWER.finditer(text, first_open)
    )


def strict_xml_format_reward(prompts=None, completions=(), **kwargs) -> list[float]:
    """0.5 when the whole completion is ``<reasoning>`` then ``<answer>``, each tag on its own line.

    >>> strict_xml_format_reward(completions=["<reasoning>\\na\\nb\\n</reasoning>\\n<answer>\\n4\\n</answer>",
    ...                                       "<reasoning>a</reasoning><answer>4</answer>"])
    [0.5, 0.0]
    """
    return [FORMAT if _STRICT_XML.fullmatch(completion_text(c)) else 0.0 for c in completions]


def soft_xml_format_reward(prompts=None, completions=(), **kwargs) -> list[float]:
    """0.5 when a ``<reasoning>...</reasoning>`` block is followed by an ``<answer>...</answer>`` block.

    >>> soft_xml_format_reward(completions=["<reasoning>\\nmulti\\nline</reasoning> <answer>4</answer>", "4"])
    [0.5, 0.0]
    """
    return [FORMAT if has_reasoning_then_answer(completion_text(c)) else 0.0 for c in completions]


_FENCE = re.compile(r"^\s*```(?:json)?[ \t]*\n(.*?)\n?```\s*$", re.DOTALL | re.IGNORECASE)


def json_format_reward(prompts=None, completions=(), **kwargs) -> list[float]:
    """0.5 when the completion is a JSON object or array (a ```json fence around it is fine).

    >>> json_format_reward(completions=['{"a": 1}', '```json\\n[1, 2]\\n```', '3', 'not json'])
    [0.5, 0.5, 0.0, 0.0]
    """
    scores = []
    for completion in completions:
        text = completion_text(completion)
        fenced = _FENCE.match(text)
        try:
            value = json.loads(fenced.group(1) if fenced else text)
        except (ValueError, RecursionError):
            value = None
        scores.append(FORMAT if isinstance(value, (dict, list)) else 0.0)
    return scores


class IncrementalFormat:
    """Partial credit per tag: ``0.5 / (2 * len(tags))`` for each opening and each closing tag that appears
    exactly once, minus ``trailing_penalty`` per character after the last closing tag, never below 0.

    Partial credit gives a model that writes no tags yet a gradient towards the format.

    >>> incremental_format_reward(completions=["<reasoning>x</reasoning><answer>4</answer>", "<reasoning>x"])
    [0.5, 0.125]
    """

    __name__ = "incremental_format_reward"

    def __init__(self, tags: Sequence[str] = ("reasoning", "answer"), trailing_penalty: float = 0.001):
        self.tags = tuple(tags)
        self.trailing_penalty = trailing_penalty

    def score(self, text: str) -> float:
        per_tag = FORMAT / (2 * len(self.tags))
        earned = sum(per_tag * (text.count(f"<{t}>") == 1) + per_tag * (text.count(f"</{t}>") == 1) for t in self.tags)
        closing = f"</{self.tags[-1]}>"
        if closing in text:
            trailing = text.rsplit(closing, 1)[1].strip()
            earned -= self.trailing_penalty * len(trailing)
        return round(max(0.0, earned), 6)

    def __call__(self, prompts=None, completions=(), **kwargs) -> list[float]:
        return [self.score(completion_text(c)) for c in completions]


incremental_format_reward = IncrementalFormat()


def xml_count_reward(prompts=None, completions=(), **kwargs) -> list[float]:
    """The GSM8K demo's tag count: 0.125 for each of ``<reasoning>\\n``, ``\\n</reasoning>\\n``,
    ``\\n<answer>\\n``, ``\\n</answer>`` appearing once, minus 0.001 per character after ``</answer>``
    (bounded: never below 0).

    >>> xml_count_reward(completions=["<reasoning>\\nx\\n</reasoning>\\n<answer>\\n4\\n</answer>"])
    [0.5]
    """
    markers = ("<reasoning>\n", "\n</reasoning>\n", "\n<answer>\n", "\n</answer>")
    scores = []
    for completion in completions:
        text = completion_text(completion)
        earned = sum(0.125 for marker in markers if text.count(marker) == 1)
        if "\n</answer>" in text:
            earned -= 0.001 * len(text.rsplit("\n</answer>", 1)[1].strip())
        scores.append(round(max(0.0, earned), 6))
    return scores


_THINK = re.compile(r"<think>(?:(?!<think>).)*?</think>\s*\S", re.DOTALL)


class ThinkFormat:
    """0.5 when the completion opens with one ``<think>...</think>`` block followed by an answer.

    Chat templates that pre-fill ``<think>`` in the prompt leave it out of the completion, so by default a
    completion that starts inside the block (no opening tag, one closing tag) counts as opened.
    ``require_open_tag=True`` asks for the opening tag, as TRL's think_format_reward does.

    >>> think_format_reward(completions=["<think>\\nhmm\\n</think>\\n4", "hmm</think> 4", "4", "<think>x</think>"])
    [0.5, 0.5, 0.0, 0.0]
    >>> ThinkFormat(require_open_tag=True)(completions=[[{"role": "assistant", "content": "<think>hmm</think> 4"}],
    ...                                                 [{"role": "assistant", "content": "hmm</think> 4"}]])
    [0.5, 0.0]
    """

    __name__ = "think_format_reward"

    def __init__(self, require_open_tag: bool = False):
        self.require_open_tag = require_open_tag

    def score(self, text: str) -> float:
        text = text.lstrip()
        if not self.require_open_tag and not text.startswith("<think>") and text.count("</think>") == 1:
            text = "<think>" + text
        single = text.count("<think>") == 1 and text.count("</think>") == 1
        return FORMAT if single and text.startswith("<think>") and _THINK.match(text) else 0.0

    def __call__(self, prompts=None, completions=(), **kwargs) -> list[float]:
        return [self.score(completion_text(c)) for c in completions]


think_format_reward = ThinkFormat()


class TagCount:
    """0.5 / 4 for each of ``<tag>\\n``, ``\\n</tag>\\n`` (``\\n</tag>`` for the last tag) appearing once.

    The open-r1 tag count, for any pair of tags (default ``think`` then ``answer``).

    >>> tag_count_reward(completions=["<think>\\nx\\n</think>\\n<answer>\\n4\\n</answer>", "<think>\\nx"])
    [0.5, 0.125]
    """

    __name__ = "tag_count_reward"

    def __init__(self, tags: Sequence[str] = ("think", "answer")):
        self.markers = []
        for i, tag in enumerate(tags):
            last = i == len(tags) - 1
            self.markers += [f"<{tag}>\n" if i == 0 else f"\n<{tag}>\n", f"\n</{tag}>" if last else f"\n</{tag}>\n"]

    def __call__(self, prompts=None, completions=(), **kwargs) -> list[float]:
        per_marker = FORMAT / len(self.markers)
        return [
            round(sum((per_marker for m in self.markers if completion_text(c).count(m) == 1), 0.0), 6) for c in completions
        ]


tag_count_reward = TagCount()
