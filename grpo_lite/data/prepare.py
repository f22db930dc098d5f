"""Rows -> GRPO prompts: read the user's data, validate it, build chat prompts, filter long prompts.

GRPOTrainer wants a ``prompt`` column (a list of chat messages) and passes every other column to the
reward functions. ``prepare_dataset`` builds exactly that from a list of dicts, a ``datasets.Dataset``
or a CSV/JSONL file, and says which row and column is wrong when the data is bad.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rewards.extract import gold_text

from ..errors import UserError
from ..log import logger
from ..machine import stack

REASONING_SYSTEM_PROMPT = (
    "Respond in the following format:\n"
    "<reasoning>\n[Your step-by-step thinking]\n</reasoning>\n"
    "<answer>\n[Final answer]\n</answer>"
)

BUILTIN_DATASETS = Path(__file__).parents[1] / "assets" / "datasets"


class DatasetError(UserError, ValueError):
    """The data cannot become GRPO prompts; the message names the row and column and how to fix it."""


def load_rows(source: Any):
    """A ``datasets.Dataset`` from a Dataset, a list of dicts, or a ``.csv`` / ``.jsonl`` / ``.json`` path (a list of
    dicts stays a list). A file that cannot be read, or has no rows, is a :class:`DatasetError` naming the file and
    the line."""
    from datasets import Dataset

    if isinstance(source, Dataset):
        if len(source) == 0:
            raise DatasetError("the dataset has no rows")
        return source
    if isinstance(source, (str, Path)):
        return _read_file(Path(source))
    if isinstance(source, Iterable) and not isinstance(source, (dict, bytes)):
        rows = list(source)
        if not rows:
            raise DatasetError("the data has no rows")
        for index, row in enumerate(rows):
            if not isinstance(row, dict):
                raise DatasetError(f"row {index} is a {type(row).__name__}, expected a dict of column -> value")
        return rows
    raise DatasetError(
        f"cannot read data of type {type(source).__name__}: pass a datasets.Dataset, a list of dicts or a file path"
    )


def _read_file(path: Path):
    from datasets import Dataset

    if not path.exists():
        raise DatasetError(f"data file {str(path)!r} does not exist")
    if not path.is_file():
        raise DatasetError(f"data file {str(path)!r} is a folder; give the .csv, .jsonl or .json file in it")
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".json"):
        raise DatasetError(f"cannot read {path.name!r}: use a .csv, .jsonl or .json file, or pass a list of dicts")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    if suffix == ".csv":
        try:  # pandas' reader, as datasets uses it: numbers in a column come back as numbers
            rows = Dataset.from_csv(str(path)) if text.strip() else []
        except Exception as error:  # pandas' parser errors name the line
            raise DatasetError(f"{path}: cannot read it as CSV ({' '.join(str(error).split())})") from None
    elif suffix == ".json" and text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{path}, line {error.lineno}: not JSON ({error.msg} at column {error.colno})") from None
        bad = next((i for i, row in enumerate(rows) if not isinstance(row, dict)), None)
        if bad is not None:
            raise DatasetError(f"{path}: item {bad} is a {type(rows[bad]).__name__}, expected an object of column -> value")
    else:
        rows = _json_lines(path, text)
    if not len(rows):
        raise DatasetError(f"{path} has no rows")
    return rows if suffix == ".csv" else _to_dataset(rows)


def _json_lines(path: Path, text: str) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{path}, line {number}: not JSON ({error.msg} at column {error.colno}); each line is one "
                               "JSON object of column -> value") from None
        if not isinstance(row, dict):
            raise DatasetError(f"{path}, line {number}: a {type(row).__name__}, expected a JSON object of column -> value")
        rows.append(row)
    return rows


def _to_dataset(rows: list[dict[str, Any]]):
    """``Dataset.from_list``, naming the column when Arrow cannot store it (mixed value types)."""
    from datasets import Dataset

    try:
        return Dataset.from_list(rows)
    except Exception as error:
        for column in {key for row in rows for key in row}:
            kinds = {type(row.get(column)).__name__ for row in rows if row.get(column) is not None}
            if len(kinds) > 1:
                raise DatasetError(f"column {column!r} mixes value types {sorted(kinds)}; make them all one type") from error
        raise


def _gold_answer(value: Any, row: int, column: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise DatasetError(
            f"row {row}, column {column!r}: expected text or a number, got {type(value).__name__} ({value!r:.60})"
        )
    return gold_text(value)


def prepare_dataset(
    rows_or_dataset: Any,
    *,
    question: str = "question",
    answer: str | None = "answer",
    system_prompt: str | None = REASONING_SYSTEM_PROMPT,
    tokenizer: Any = None,
    max_prompt_tokens: int | None = None,
    on_long_prompt: str = "drop",
):
    """Turn rows into a GRPO dataset with a chat ``prompt`` column and a gold ``answer`` column.

    Args:
        rows_or_dataset: a ``datasets.Dataset``, a list of dicts, or a CSV / JSONL path.
        question: column holding the question text.
        answer: column holding the gold answer. Its extracted gold goes to the ``answer`` column that grpo-lite's
            rewards read (GSM8K ``... #### 42`` answers become ``"42"``, the full text is kept as ``solution``
            unless the data has its own ``solution``); a column of another name stays as it is, so a reward
            written for it (TRL's and open-r1's ``accuracy_reward(completions, solution, **kwargs)``) reads it.
            ``None`` when the task has no gold answer (e.g. code tests).
        system_prompt: system message put before every question; ``None`` for none.
        tokenizer: when given, prompt lengths are measured with its chat template and reported.
        max_prompt_tokens: with a tokenizer, prompts longer than this are dropped (``on_long_prompt="drop"``)
            or rejected with an error naming the first one (``"error"``). GRPOConfig has no
            ``max_prompt_length`` any more, so this is where long prompts are handled.

    Every other column is kept under its own name, the question's too: GRPOTrainer passes them to reward
    functions as keyword arguments, as it would have without grpo-lite.

    >>> ds = prepare_dataset([{"question": "What is 2+2?", "answer": "so #### 4"}])
    >>> ds[0]["answer"], [(m["role"], m["content"]) for m in ds[0]["prompt"]][-1]
    ('4', ('user', 'What is 2+2?'))
    >>> ds = prepare_dataset([{"problem": "What is 2+2?", "solution": "2 + 2 = 4 #### 4"}], question="problem", answer="solution")
    >>> ds[0]["solution"], ds[0]["answer"], ds[0]["problem"]
    ('2 + 2 = 4 #### 4', '4', 'What is 2+2?')
    """
    if on_long_prompt not in ("drop", "error"):
        raise DatasetError(f"on_long_prompt={on_long_prompt!r}: use 'drop' or 'error'")
    source = load_rows(rows_or_dataset)
    is_list = isinstance(source, list)
    columns = list(dict.fromkeys(key for row in source for key in row)) if is_list else source.column_names

    def values(column: str) -> list[Any]:
        return [row.get(column) for row in source] if is_list else source[column]

    for role, column in (("question", question), ("answer", answer)):
        if column is not None and column not in columns:
            raise DatasetError(
                f"column {column!r} (the {role}) is missing; the data has columns {columns}. "
                f"Pass {role}='<your column>'" + (" or answer=None if there is no gold answer" if role == "answer" else "")
            )
    for index, text in enumerate(values(question)):
        if text is None or (isinstance(text, str) and not text.strip()):
            raise DatasetError(f"row {index}, column {question!r}: the question is empty; remove the row or fill it in")
        if not isinstance(text, str):
            raise DatasetError(
                f"row {index}, column {question!r}: expected text, got {type(text).__name__} ({text!r:.60})"
            )
    raw_answers = values(answer) if answer else None
    golds = [_gold_answer(value, i, answer) for i, value in enumerate(raw_answers)] if answer else None
    if answer and answer != "answer" and "answer" in columns:
        logger.warning(f"the data's own 'answer' column is replaced by the gold answers of {answer!r} (answer={answer!r}), "
                       f"which grpo-lite's rewards read; {answer!r} stays as it is")
    keeps_solution = "solution" in columns  # the user's own solution column is never overwritten

    def to_prompt(row: dict[str, Any], index: int) -> dict[str, Any]:
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        messages.append({"role": "user", "content": row[question]})
        out: dict[str, Any] = {"prompt": messages}
        if golds is not None:
            if "####" in str(raw_answers[index]) and not keeps_solution:
                out["solution"] = str(raw_answers[index])
            out["answer"] = golds[index]
        return out

    replaced = {"prompt", "answer"} if golds is not None else {"prompt"}  # every other column keeps its name and values
    if is_list:
        as_text = set()
        if answer and answer not in replaced and len({type(v) for v in raw_answers if v is not None}) > 1:
            as_text = {answer}  # numbers and text in one gold column (a list of dicts): Arrow stores one type, text holds both
            logger.info(f"column {answer!r} mixes numbers and text: kept as text")
        prepared = _to_dataset(
            [{**{k: (str(v) if k in as_text and v is not None else v) for k, v in row.items() if k not in replaced},
              **to_prompt(row, i)} for i, row in enumerate(source)]
        )
    else:
        prepared = source.map(to_prompt, with_indices=True, remove_columns=[c for c in replaced if c in columns])
    if tokenizer is None:
        if max_prompt_tokens is not None:
            raise DatasetError("max_prompt_tokens needs a tokenizer: pass tokenizer=... to measure prompt lengths")
        return prepared
    lengths = prompt_lengths(prepared, tokenizer)
    logger.info(describe_lengths(lengths))
    if max_prompt_tokens is None:
        return prepared
    too_long = [i for i, n in enumerate(lengths) if n > max_prompt_tokens]
    if too_long and on_long_prompt == "error":
        first = too_long[0]
        raise DatasetError(
            f"row {first}: the prompt is {lengths[first]} tokens, over max_prompt_tokens={max_prompt_tokens} "
            f"({len(too_long)} rows are). Raise max_prompt_tokens, shorten the system prompt, or use "
            "on_long_prompt='drop'"
        )
    if too_long and len(too_long) == len(lengths):
        raise DatasetError(
            f"every prompt is over max_prompt_tokens={max_prompt_tokens} (the shortest is {min(lengths)} tokens), so no "
            "row is left to train on: raise max_prompt_tokens or shorten the system prompt"
        )
    if too_long:
        logger.info(f"dropped {len(too_long)} of {len(lengths)} prompts over {max_prompt_tokens} tokens")
        keep = sorted(set(range(len(lengths))) - set(too_long))
        prepared = prepared.select(keep)
    return prepared


def prompt_lengths(dataset, tokenizer) -> list[int]:
    """Token count of each row's prompt after the chat template, generation prompt included."""
    return [len(stack.chat_template_ids(tokenizer, messages, add_generation_prompt=True)) for messages in dataset["prompt"]]


def describe_lengths(lengths: list[int]) -> str:
    ordered = sorted(lengths)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return (
        f"prompt tokens over {len(lengths)} rows: min {ordered[0]}, "
        f"median {int(statistics.median(ordered))}, p95 {p95}, max {ordered[-1]}"
    )


def builtin_names() -> list[str]:
    """The built-in offline datasets :func:`load_builtin` knows."""
    return ["arithmetic"] + sorted(p.stem for p in BUILTIN_DATASETS.glob("*.jsonl"))


def load_builtin(name: str) -> list[dict[str, Any]]:
    """Rows of a built-in offline dataset: ``"arithmetic"`` (word problems) or ``"code_tasks"``."""
    if name == "arithmetic":
        from .arithmetic import arithmetic_problems

        return arithmetic_problems()
    path = BUILTIN_DATASETS / f"{name}.jsonl"
    if not path.exists():
        raise DatasetError(f"no built-in dataset {name!r}; available: {builtin_names()}")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
