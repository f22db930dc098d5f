"""Rows -> GRPO prompts: read the user's data, validate it, build chat prompts, filter long prompts.

GRPOTrainer wants a ``prompt`` column (a list of chat messages) and passes every other column to the
reward functions. ``prepare_dataset`` builds exactly that from a list of dicts, a ``datasets.Dataset``, a pandas
DataFrame or a CSV/JSONL file, and says which row and column is wrong when the data is bad; rows prepared already
(with their own ``prompt`` column) are checked by :func:`check_prompts` before a chat template renders them.

Every source comes in by one set of rules (:func:`load_rows`, :func:`as_dataset`), so a value means the same whichever
way it came:

- A missing value is None, however it was spelt: None, a float NaN (Python's, numpy's, pandas' missing number),
  pandas' NA and NaT, JSON's null (or NaN), and an empty CSV cell. Text is what was written: the text "nan", "NA" or
  "None", in a CSV as in a JSONL, is kept as that text, and an empty text is kept as "" (a question or a gold answer
  that is blank counts as none, as :func:`rewards.extract.gold_text` reads it). A missing gold answer reaches the
  rewards as None, which they score as not applicable.
- A column is named once: a CSV header that names a column twice, or a JSON object with a key twice, is refused
  (pandas would read the second as ``answer.1``, JSON as the last one).
- Chat content given as a list of text parts becomes its text (grpo_lite.data.prompts.text_messages); a prompt with
  images keeps its parts, ``{"type": "image"}`` where each of the row's images goes.
- A row's images (a column ``image`` or ``images``, as TRL reads them, or one named by ``image_column``) are read and
  checked before any model loads (grpo_lite.data.images) and kept with the ``datasets`` Image feature.
- A column whose values Arrow cannot store as one type is kept as text, and that is said naming the column and two rows
  that differ: nested values (lists, dicts, as test cases are) as JSON text, one per row (``json.loads`` gives each
  value back; the code rewards read test cases so), numbers among text as text. Any other mix (true/false among text) is
  refused, naming the same; a ``prompt`` column is never turned into text.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rewards.extract import gold_text, is_data_frame, is_missing, several_splits

from ..log import logger
from ..machine import stack
from ..shapes import AnyOf, Declared, Flag, Kind, Shape, Text, Whole, check, optional
from .images import IMAGE_COLUMNS, image_kind, read_images, undecoded
from .prompts import (
    DatasetError,
    check_processor_for_images,
    content_text,
    ends_in_prefill,
    fit_dataset,
    image_count,
    is_chat,
    prompt_token_ids,
    row_template_kwargs,
    text_messages,
)

REASONING_SYSTEM_PROMPT = (
    "Respond in the following format:\n"
    "<reasoning>\n[Your step-by-step thinking]\n</reasoning>\n"
    "<answer>\n[Final answer]\n</answer>"
)

BUILTIN_DATASETS = Path(__file__).parents[1] / "assets" / "datasets"
# Where a run's rows come from (a run YAML's dataset: and heldout: sections) and prepare_dataset's options, each with
# its declared shape: prepare_dataset checks its arguments against them, the run's settings their sections.
DATA_KEYS: dict[str, Shape] = {
    "path": Declared(Text(), "give the data file: a .jsonl, .json or .csv path"),
    "builtin": Declared(Text(), "give a built-in dataset's name (e.g. arithmetic)"),
    "prepared": Declared(Flag(), "use true (the rows have their prompt column) or false"),
    "question": Declared(Text(), "name the column holding the question"),
    "answer": Declared(optional(Text()), "name the column holding the gold answer, or null/None for none"),
    "system_prompt": Declared(optional(Text(blank=True)), "give the system message as text, or null/None for none"),
    "max_prompt_tokens": Declared(optional(Whole(low=1)), "give the longest prompt in tokens (e.g. 256), or null/None for "
                                  "no limit"),
    "on_long_prompt": Text(among=("drop", "error")),
    # image_resize's pair and image_convert's modes are checked where they are read (grpo_lite.data.images)
    "image_column": Declared(optional(Text()), "name the column holding each row's image(s), \"auto\" for a column "
                             "named images or image, or None for none"),
    "image_resize": Declared(optional(AnyOf((Whole(low=1), Kind((list, tuple), said="(width, height)")))),
                             "give the longest side in pixels (e.g. 512), (width, height) such as (512, 512), or None"),
    "image_convert": Declared(optional(Text()), "give the mode to convert each image to (\"RGB\"), or None"),
}


def load_rows(source: Any):
    """A ``datasets.Dataset`` from a Dataset, a pandas DataFrame, a list of dicts, or a ``.csv`` / ``.jsonl`` / ``.json``
    path (a list of dicts stays a list), its missing values None (the module's rules). A file that cannot be read, or has
    no rows, is a :class:`DatasetError` naming the file and the line."""
    from datasets import Dataset

    if (refusal := several_splits(source, "the data")) is not None:
        raise DatasetError(refusal)
    if is_data_frame(source):
        source = as_dataset(source)
    if isinstance(source, Dataset):
        if len(source) == 0:
            raise DatasetError("the dataset has no rows")
        return _missing_as_none(source)
    if isinstance(source, (str, Path)):
        return _read_file(Path(source))
    if isinstance(source, Iterable) and not isinstance(source, (dict, bytes)):
        rows = list(source)
        if not rows:
            raise DatasetError("the data has no rows")
        for index, row in enumerate(rows):
            if not isinstance(row, dict):
                raise DatasetError(f"row {index} is a {type(row).__name__}, expected a dict of column -> value")
        return _present(rows)
    raise DatasetError(
        f"cannot read data of type {type(source).__name__}: pass a datasets.Dataset, a list of dicts or a file path"
    )


def as_dataset(data: Any):
    """``data`` as a ``datasets.Dataset`` whose missing values are None: a Dataset as it is, a pandas DataFrame by its
    columns (its index left out), a list of dicts by :func:`load_rows`'s rules; anything else is a :class:`DatasetError`."""
    from datasets import Dataset

    if isinstance(data, Dataset):
        return _missing_as_none(data)
    if is_data_frame(data):
        return _frame_to_dataset(data)
    rows = load_rows(data)
    return rows if isinstance(rows, Dataset) else _to_dataset(rows)


def _present(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with every column some row has (a column a row lacks is missing there: ``Dataset.from_list`` would keep
    only the first row's columns) and each missing value (:func:`rewards.extract.is_missing`) None."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    return [{key: None if key not in row or is_missing(row[key]) else row[key] for key in columns} for row in rows]


def _missing_as_none(dataset):
    """``dataset`` with the NaN of its float columns None: Arrow keeps a NaN as a number, which a reward would read as
    one (a gold answer "nan")."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = dataset.data.table
    nan_columns = [name for name in dataset.column_names if pa.types.is_floating(table.column(name).type)
                   and pc.any(pc.is_nan(table.column(name))).as_py()]
    if not nan_columns:
        return dataset
    return dataset.map(lambda batch: {name: [None if is_missing(v) else v for v in batch[name]] for name in nan_columns},
                       batched=True)


def _frame_to_dataset(frame):
    """A pandas DataFrame as a Dataset, by its columns (its index left out), its missing values None; a column Arrow
    cannot store as one type goes by :func:`_to_dataset`'s rules."""
    from datasets import Dataset

    twice = [str(name) for name, count in Counter(frame.columns).items() if count > 1]
    if twice:
        raise DatasetError(f"the DataFrame has two columns named {twice[0]!r}; rename one (each column is read by its name)")
    try:
        dataset = Dataset.from_pandas(frame, preserve_index=False)
    except Exception:  # values Arrow cannot store as one type: found, said or refused by name
        return _to_dataset(frame.to_dict(orient="records"))
    return _missing_as_none(dataset)  # a column pandas keeps in Arrow keeps its NaN


def _row_places(source: Any, count: int):
    """How a message names row ``i`` of ``source``: its line in a JSON-lines file, its item in a JSON list, else its
    index (from 0, as ``dataset[i]``)."""
    path = Path(source) if isinstance(source, (str, Path)) else None
    if path is not None and path.suffix.lower() == ".jsonl" and path.is_file():
        lines = [n for n, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), 1) if line.strip()]
        return lambda i: f"{path}, line {lines[i]}" if i < len(lines) else f"{path}, row {i}"
    if path is not None:
        return lambda i: f"{path}, {'item' if path.suffix.lower() == '.json' else 'row'} {i}"
    return lambda i: f"row {i}"


FILL = "fill the row in or remove it (or build the prompts from questions with prepare_dataset)"
# The turns a generation turn follows in TRL's rendering (trl/data_utils.py, maybe_apply_chat_template)
ANSWERED_ROLES = ("user", "tool")


def _prompt_problem(prompt: Any) -> str | None:
    """What keeps a prepared row's prompt from being one GRPOTrainer renders as the question the model answers: text,
    or chat messages of text ending in the user's (or a tool's) message; what is wrong and how to fix it."""
    if isinstance(prompt, str):
        return None if prompt.strip() else f"the prompt is empty; {FILL}"
    if not isinstance(prompt, (list, tuple)):
        return f"expected text or chat messages, got {type(prompt).__name__} ({prompt!r:.60}); {FILL}"
    if not prompt:
        return f"the chat prompt is empty (no messages); {FILL}"
    for index, message in enumerate(prompt):
        if not (isinstance(message, dict) and isinstance(message.get("role"), str)):
            return f"message {index} is {message!r:.60}, expected {{'role': ..., 'content': ...}}; {FILL}"
    try:
        messages = text_messages(prompt)
    except DatasetError as error:
        return str(error)
    for index, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, (str, list)):
            return f"message {index} ({message['role']}) has content {content!r:.60}, expected text; {FILL}"
        if message["role"] == "user" and not content_text(content).strip() and not image_count([message]):
            return f"the chat prompt is empty (message {index}, the user's, has no text); {FILL}"
    roles = [message["role"] for message in messages]
    if "user" not in roles:
        return f"the chat prompt has no user message (roles: {', '.join(roles)}); {FILL}"
    if ends_in_prefill(messages):
        return ("the chat prompt ends in an assistant message (a prefill, the start of the answer), which GRPOTrainer "
                "would not continue on every supported TRL: from TRL 0.25 on it closes that turn and asks for a new one, "
                "so the model would answer after the prefill, not from it. Drop the assistant message and put its text "
                "in the user's message, or, for a thinking model, switch thinking on with chat_template_kwargs "
                "(Qwen3's enable_thinking)")
    if roles[-1] not in ANSWERED_ROLES:
        return (f"the chat prompt ends in a {roles[-1]!r} message, and the model answers the user's: end each prompt "
                "with the user's message (TRL 0.22-0.24 refuse any other last turn)")
    return None


def image_column(columns: list[str]) -> str | None:
    """The column TRL reads a row's images from (``images`` before ``image``, as TRL 1.15 looks), or None."""
    return next((name for name in IMAGE_COLUMNS if name in columns), None)


PEEK = 5  # values of a column looked at to tell whether it holds images


def unread_image_columns(rows: Any, columns: Sequence[str]) -> dict[str, str]:
    """The columns among ``columns`` that hold images (the ``datasets`` Image feature, or first values that are all image
    values: grpo_lite.data.images.image_kind), each with what its first holds, for a message."""
    from datasets import Image

    found = {}
    for column in columns:
        feature = rows.features.get(column) if hasattr(rows, "features") else None
        if isinstance(feature, Image) or isinstance(getattr(feature, "feature", None), Image):
            found[column] = "a datasets Image column"
            continue
        head = rows.select(range(min(len(rows), 10 * PEEK)))[column] if hasattr(rows, "select") else \
            [row.get(column) for row in rows[:10 * PEEK]]
        present = [(index, value) for index, value in enumerate(head) if value is not None][:PEEK]
        kinds = [image_kind(value) for _, value in present]
        if present and all(kinds):
            found[column] = f"row {present[0][0]} holds {kinds[0]}"
    return found


def _listed(columns: dict[str, str]) -> str:
    """Columns of images for a message: ``column 'picture' (row 0 holds a PIL image) holds images``."""
    named = [f"{column!r} ({what})" for column, what in columns.items()]
    if len(named) == 1:
        return f"column {named[0]} holds images"
    return f"columns {', '.join(named[:-1])} and {named[-1]} hold images"


def _column(rows: Any, column: str) -> list[Any]:
    if hasattr(rows, "column_names"):
        return undecoded(rows, column)
    return [row.get(column) for row in rows]


def check_prompts(rows: Any, source: Any = None, tokenizer: Any = None) -> list[list[Any]] | None:
    """Refuse prepared rows (a ``prompt`` column already) whose prompt a chat template cannot render as the question
    the model answers: not text or chat messages, empty, a user message without text, a content part that is neither
    text nor an image placeholder, or a last turn that is not the user's (a prefill included: see
    grpo_lite.data.prompts). Rows with images (an ``image`` or ``images`` column, which TRL reads) must give each an
    image that reads (grpo_lite.data.images), and a prompt with image placeholders one image per placeholder. A text
    prompt with images (a chat template applied already, as Unsloth's vision notebooks do for TRL before 0.24) is taken
    where the installed TRL takes it (``text_prompts_with_images``), holding the processor's image token once per image
    (checked where ``tokenizer``, the processor, is given); elsewhere it is refused with the fix. The
    :class:`DatasetError` names the row (``source``: the file it came from, to name its line) and the column, before
    anything renders them. A column of images TRL does not read (another name than image or images) is said.

    Returns each row's images as a vision processor must get them (grpo_lite.data.images.as_seen) where some had to be
    converted (said), else None."""
    columns = list(rows.column_names) if hasattr(rows, "column_names") else list(dict.fromkeys(k for row in rows for k in row))
    prompts = _column(rows, "prompt")
    place = _row_places(source, len(prompts))
    for index, prompt in enumerate(prompts):
        problem = _prompt_problem(prompt)
        if problem is not None:
            raise DatasetError(f"{place(index)}, column 'prompt': {problem}")
    images = image_column(columns)
    seen, converted = [[]] * len(prompts), 0
    if images is not None:
        base = Path(source).parent if isinstance(source, (str, Path)) else None
        seen, converted = read_images(_column(rows, images), images, place, base)
    for index, (prompt, found) in enumerate(zip(prompts, seen)):
        _check_placeholders(prompt, len(found), place(index), images, image_token(tokenizer))
    unread = unread_image_columns(rows, [c for c in columns if c not in ("prompt", images)])
    if unread:
        logger.warning(f"{_listed(unread)}, and TRL reads a row's images from a column named image or images alone: the "
                       "prompts go to the model without them. Rename the column to image "
                       "(dataset.rename_column(...)), or build the rows with prepare_dataset(..., image_column=...)")
    return seen if converted else None


def image_token_id(processor: Any) -> int | None:
    """The token a processor repeats for each image's patches in the prompt ids (once per merged patch group in Qwen-VL,
    ``mm_tokens_per_image`` times in Gemma 3), as against :func:`image_token`'s placeholder text. None for a text
    tokenizer."""
    # the text tokenizer's own image token first: Gemma 3's processor names <start_of_image> its image token, which the
    # processor expands into <start_of_image>, mm_tokens_per_image soft tokens and <end_of_image>
    return getattr(getattr(processor, "tokenizer", None), "image_token_id", None) or getattr(processor, "image_token_id", None)


def image_token(processor: Any) -> str | None:
    """The text a vision chat template writes for one image, which the processor expands into the image's tokens:
    Gemma 3's ``boi_token`` (``<start_of_image>``), else the processor's ``image_token`` (Qwen-VL's ``<|image_pad|>``).
    None for a text tokenizer, or none given."""
    return getattr(processor, "boi_token", None) or getattr(processor, "image_token", None)


def _check_placeholders(prompt: Any, count: int, where: str, column: str | None, token: str | None = None) -> None:
    """Refuse a chat prompt whose image placeholders are not one per image of its row; a prompt without any is given
    them by TRL (and by prepare_dataset), before its first user turn. A text prompt with images passes where the
    installed TRL hands it to the processor as it is, when it holds ``token`` (the processor's image token, where known)
    once per image."""
    if count and not is_chat(prompt):
        if isinstance(prompt, str) and not stack.newer("text_prompts_with_images"):
            if token is not None and prompt.count(token) != count:
                raise DatasetError(f"{where}, column 'prompt': the prompt is text holding the image token {token!r} "
                                   f"{prompt.count(token)} time(s) and the row gives {count} image(s) in column {column!r}: "
                                   "render it with the processor's chat template from chat messages with one "
                                   "{'type': 'image'} part per image, or give those chat messages as the prompt")
            return
        difference = stack.DIFFERENCES["text_prompts_with_images"]
        raise DatasetError(f"{where}, column 'prompt': the row has images (column {column!r}) and its prompt is text: give it "
                           "as chat messages ([{'role': 'user', 'content': ...}]), which the processor's chat template renders "
                           f"with the images' placeholders (TRL {stack.installed('trl')} refuses text prompts with images: "
                           f"from TRL {difference.since} {difference.newer}). A notebook that applies the chat template "
                           "itself for an older TRL (Unsloth's vision notebooks, 'if Version(\"trl\") < "
                           "Version(\"0.24.0\")') leaves the chat prompts as they are here")
    placeholders = image_count(prompt) if is_chat(prompt) else 0
    if placeholders and placeholders != count:
        given = f"{count} in column {column!r}" if column else "no image column (image or images)"
        raise DatasetError(f"{where}, column 'prompt': the prompt has {placeholders} image placeholder(s) "
                           f"({{'type': 'image'}}) and the row gives {given}: give one image per placeholder, or drop "
                           "the placeholders to have them put before the question")


def _read_file(path: Path):
    rows = _file_rows(path)
    return rows if path.suffix.lower() == ".csv" else _to_dataset(rows, _row_places(path, len(rows)))


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a ``.jsonl``, ``.json`` or ``.csv`` data file as dicts, each value as the file writes it (JSON's own
    types, not one Arrow type per column: a column may mix text and chat messages, as the completions a reward lab
    scores do), missing ones None; read by the rules of every data file (:func:`load_rows`): every line must be read,
    and a file that cannot be is a :class:`DatasetError` naming the file and the line."""
    rows = _file_rows(Path(path))
    return _present(rows if isinstance(rows, list) else rows.to_list())


def _file_rows(path: Path):
    """A data file's rows: a Dataset for a CSV file, a list of dicts for a JSON or JSON-lines one; at least one."""
    if not path.exists():
        raise DatasetError(f"data file {str(path)!r} does not exist")
    if not path.is_file():
        raise DatasetError(f"data file {str(path)!r} is a folder; give the .csv, .jsonl or .json file in it")
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".json"):
        raise DatasetError(f"cannot read {path.name!r}: use a .csv, .jsonl or .json file, or pass a list of dicts")
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark some editors write is not part of the data
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    if suffix == ".csv":
        rows = _read_csv(path, text) if text.strip() else []
    elif suffix == ".json" and text.lstrip().startswith("["):
        try:
            rows = json.loads(text, object_pairs_hook=_json_object)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{path}, line {error.lineno}: not JSON ({error.msg} at column {error.colno})") from None
        except DatasetError as error:
            raise DatasetError(f"{path}: {error}") from None
        bad = next((i for i, row in enumerate(rows) if not isinstance(row, dict)), None)
        if bad is not None:
            raise DatasetError(f"{path}: item {bad} is a {type(rows[bad]).__name__}, expected an object of column -> value")
    else:
        rows = _json_lines(path, text)
    if not len(rows):
        raise DatasetError(f"{path} has no rows")
    return rows


def _read_csv(path: Path, text: str):
    """A CSV file's rows, read by pandas: a column of numbers stays numbers (one with empty cells too: Arrow's types,
    not NumPy's floats), and only an empty cell is missing: pandas' own list of missing spellings would read an answer
    written "None", "NA" or "nan" as no answer. A header that names a column twice is refused."""
    import pandas

    header = next(csv.reader(io.StringIO(text)), [])
    twice = [name for name, count in Counter(header).items() if count > 1]
    if twice:
        places = [str(i) for i, name in enumerate(header, 1) if name == twice[0]]
        raise DatasetError(f"{path}: the header names column {twice[0]!r} twice (columns {' and '.join(places)}); rename "
                           f"one: each column is read by its name, and pandas would read the second as {twice[0]}.1")
    try:
        frame = pandas.read_csv(path, keep_default_na=False, na_values=[""], dtype_backend="pyarrow")
    except Exception as error:  # pandas' parser errors name the line
        raise DatasetError(f"{path}: cannot read it as CSV ({' '.join(str(error).split())})") from None
    return _frame_to_dataset(frame)


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice: ``json`` would keep the last value and drop the first unsaid."""
    twice = [key for key, count in Counter(key for key, _ in pairs).items() if count > 1]
    if twice:
        raise DatasetError(f"key {twice[0]!r} appears twice in one object; name each column once")
    return dict(pairs)


def _json_lines(path: Path, text: str) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line, object_pairs_hook=_json_object)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{path}, line {number}: not JSON ({error.msg} at column {error.colno}); each line is one "
                               "JSON object of column -> value") from None
        except DatasetError as error:
            raise DatasetError(f"{path}, line {number}: {error}") from None
        if not isinstance(row, dict):
            raise DatasetError(f"{path}, line {number}: a {type(row).__name__}, expected a JSON object of column -> value")
        rows.append(row)
    return rows


def _row_index(index: int) -> str:
    return f"row {index}"


def _to_dataset(rows: list[dict[str, Any]], place=_row_index):
    """``Dataset.from_list`` by the module's rules: missing values None, chat prompts' content as text, and a column
    Arrow cannot store as one type kept as text or refused, naming the rows that differ (``place`` names a row: its
    line in the file it came from)."""
    from datasets import Dataset

    rows = _present(rows)
    for index, row in enumerate(rows):
        if is_chat(row.get("prompt")):
            try:
                row["prompt"] = text_messages(row["prompt"])
            except DatasetError as error:
                raise DatasetError(f"{place(index)}, column 'prompt': {error}") from None
    try:
        return Dataset.from_list(rows)
    except Exception:  # Arrow stores a column as one type: find the columns it cannot, and say or refuse each
        pass
    for column in dict.fromkeys(key for row in rows for key in row):
        values = [row.get(column) for row in rows]
        conflict = _type_conflict(values)
        if conflict is None:
            continue
        first, second = conflict
        found = (f"column {column!r}: {place(second)} holds {_shape(values[second])}, which Arrow cannot store"
                 if first == second else f"column {column!r}: {place(first)} holds {_shape(values[first])} and "
                 f"{place(second)} holds {_shape(values[second])}, which Arrow cannot store as one type")
        kinds = {type(value) for value in values if value is not None}
        if column != "prompt" and any(issubclass(kind, (list, tuple, dict)) for kind in kinds):
            texts, kept = _as_json(values), ("each row's value is kept as JSON text, which json.loads(value) turns back "
                                             "into the value (rewards.code reads test cases so)")
        elif column != "prompt" and kinds <= {int, float, str}:
            texts, kept = [None if value is None else str(value) for value in values], "its numbers are kept as text"
        else:
            texts = None
        if texts is None:
            raise DatasetError(f"{found}: give " + ("it text, a number, a list or a dict" if first == second else
                                                    "the column values of one type"))
        logger.warning(f"{found}: {kept}")
        for row, text in zip(rows, texts):
            if column in row:
                row[column] = text
    return Dataset.from_list(rows)


def _type_conflict(values: list[Any]) -> tuple[int, int] | None:
    """Two rows whose values Arrow cannot store as one type: the first row that does not fit the rows before it, and
    one of those it does not fit (itself, when Arrow cannot store its value at all); None when the column stores."""
    import pyarrow as pa

    def stores(part: list[Any]) -> bool:
        try:
            pa.array(part)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return False
        return True

    if stores(values):
        return None
    low, high = 1, len(values)  # the shortest head of the column that fails: its last row is the one that does not fit
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if not stores(values[:middle]) else (middle + 1, high)
    last = low - 1
    if not stores([values[last]]):
        return last, last
    return next(((i, last) for i in range(last) if not stores([values[i], values[last]])), (0, last))


def _shape(value: Any) -> str:
    """A value's type, and its items' types for lists and dicts: how two rows' values differ.

    >>> _shape([{"input": "1", "output": 2}])
    '[{input: str, output: int}]'
    """
    if isinstance(value, dict):
        text = "{" + ", ".join(f"{key}: {_shape(item)}" for key, item in value.items()) + "}"
    elif isinstance(value, (list, tuple)):
        text = "[" + ", ".join(dict.fromkeys(_shape(item) for item in value)) + "]"
    else:
        text = type(value).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def _as_json(values: list[Any]) -> list[str | None] | None:
    """Each value as JSON text (None stays None), or None when one is not JSON (an object JSON cannot write)."""
    try:
        return [None if value is None else json.dumps(value, ensure_ascii=False) for value in values]
    except (TypeError, ValueError):
        return None


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
    chat_template_kwargs: dict[str, Any] | None = None,
    fold_system_prompt: bool = True,
    image_column: str | None = "auto",
    image_resize: int | tuple[int, int] | None = None,
    image_convert: str | None = None,
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
        tokenizer: when given, each prompt is rendered with its chat template (grpo_lite.data.prompts), as training
            renders it: a system prompt the template cannot render is folded into the first user turn (said), and
            prompt lengths are measured and reported.
        max_prompt_tokens: with a tokenizer, prompts longer than this are dropped (``on_long_prompt="drop"``)
            or rejected with an error naming the first one (``"error"``). A ported ``max_prompt_length`` cuts
            long prompts instead, as TRL before 0.28 did (grpo_lite.training.trl_compat, cut_prompts_on_the_left).
        chat_template_kwargs: the chat template's keyword arguments the run trains with (Qwen3's
            ``{"enable_thinking": False}``), for measuring prompts as training renders them.
        fold_system_prompt: with a tokenizer whose chat template rejects or drops a system turn (Gemma 2, Mistral
            v0.1, Phi-3-mini), ``False`` refuses the data instead of folding the system prompt into the question.
        image_column: the column holding each row's image, or a list of images: a PIL image, a file path (relative to
            the data file), the file's bytes or a ``datasets`` Image value. ``"auto"`` takes a column named ``images``
            or ``image``, as TRL does, and refuses another column of images (a ``picture`` TRL would not read), naming
            it; ``None``: no images. Every image is read and checked here, and every bad one named at once by row and
            column; one a processor's ``convert("RGB")`` would lose (16-bit grayscale, transparency, CMYK) is
            converted as it is meant to be seen, and said (grpo_lite.data.images). The images go to column ``image``
            when each row has one (TRL 0.22 and 1.15 read it), else ``images`` (a list per row, read by TRL 1.15), with
            the ``datasets`` Image feature; each prompt gets one ``{"type": "image"}`` part per image before its
            question, as the vision chat templates and TRL place them. ``tokenizer`` is then the model's processor: prompt lengths count the image tokens
            it makes of each row's images.
        image_resize: resize each image: the longest side in pixels (the aspect kept), or (width, height) as
            Unsloth's vision notebooks do (``(512, 512)``); ``None`` keeps each size.
        image_convert: convert each image to this mode (``"RGB"``, as the notebooks do; ``"RGBA"``, ``"L"``).

    Every other column is kept under its own name, the question's too: GRPOTrainer passes them to reward
    functions as keyword arguments, as it would have without grpo-lite.

    >>> ds = prepare_dataset([{"question": "What is 2+2?", "answer": "so #### 4"}])
    >>> ds[0]["answer"], [(m["role"], m["content"]) for m in ds[0]["prompt"]][-1]
    ('4', ('user', 'What is 2+2?'))
    >>> ds = prepare_dataset([{"problem": "What is 2+2?", "solution": "2 + 2 = 4 #### 4"}], question="problem", answer="solution")
    >>> ds[0]["solution"], ds[0]["answer"], ds[0]["problem"]
    ('2 + 2 = 4 #### 4', '4', 'What is 2+2?')
    """
    check(dict(question=question, answer=answer, system_prompt=system_prompt, max_prompt_tokens=max_prompt_tokens,
               on_long_prompt=on_long_prompt, image_column=image_column, image_resize=image_resize,
               image_convert=image_convert), DATA_KEYS, DatasetError, "prepare_dataset")
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
    asked = image_column
    images, image_column, image_out = _row_images(rows_or_dataset, source, columns, image_column, image_resize, image_convert)
    unread = {} if asked is None else unread_image_columns(source, [c for c in columns if c not in (question, answer, image_column)])
    if unread and image_column is None:
        raise DatasetError(f"{_listed(unread)}, and image_column='auto' takes only a column named images or image, as TRL "
                           f"does: pass image_column={next(iter(unread))!r} to give the model its pictures, or "
                           "image_column=None to train on the text alone (the column is then kept as it is, for the rewards)")
    if unread:
        logger.warning(f"{_listed(unread)} besides image_column={image_column!r}, which alone goes to the model: the prompts "
                       "go out without them (they are kept as they are, for the rewards)")
    if images and image_out != image_column and image_out in columns and image_out != question:
        raise DatasetError(f"column {image_out!r} is where TRL reads the images of column {image_column!r} from, and the "
                           f"data has its own {image_out!r}: rename it, or pass image_column={image_out!r}")

    def to_prompt(row: dict[str, Any], index: int) -> dict[str, Any]:
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        placeholders = [{"type": "image"}] * len(images[index]) if images else []  # before the question, as TRL puts them
        messages.append({"role": "user", "content": [*placeholders, {"type": "text", "text": row[question]}]})
        out: dict[str, Any] = {"prompt": text_messages(messages)}  # without images, each content is its text
        if golds is not None:
            if "####" in str(raw_answers[index]) and not keeps_solution:
                out["solution"] = str(raw_answers[index])
            out["answer"] = golds[index]
        return out

    replaced = {"prompt", "answer"} if golds is not None else {"prompt"}  # every other column keeps its name and values
    if images:
        replaced |= {image_column, image_out} - {question}  # the images read, checked and shaped replace their values
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
        if golds is not None and "answer" in columns and question != "answer":
            source = source.remove_columns("answer")  # the gold text replaces it, as text: not cast back to its old type
        if images:  # read and checked already: decoding them again in map would stop at a bad one with datasets' error
            source = source.remove_columns([c for c in {image_column, image_out} if c in source.column_names and c != question])
        prepared = source.map(to_prompt, with_indices=True, remove_columns=[c for c in replaced if c in source.column_names])
    if images:
        prepared = _with_images(prepared, image_out, images)
    if tokenizer is None:
        if max_prompt_tokens is not None:
            raise DatasetError("max_prompt_tokens needs a tokenizer: pass tokenizer=... to measure prompt lengths")
        return prepared
    if images:
        check_processor_for_images(tokenizer, f"the rows have images (column {image_column!r})")
    prepared = fit_dataset(prepared, tokenizer, chat_template_kwargs, fold_system_prompt=fold_system_prompt)
    lengths = prompt_lengths(prepared, tokenizer, chat_template_kwargs)
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
    keep = rows_within(lengths, max_prompt_tokens, "max_prompt_tokens")
    if too_long:
        logger.info(f"dropped {len(too_long)} of {len(lengths)} prompts over {max_prompt_tokens} tokens "
                    f"(max_prompt_tokens={max(lengths)} keeps them all)")
        prepared = prepared.select(keep)
    return prepared


def _row_images(given: Any, source: Any, columns: list[str], column: str | None, resize: Any,
                convert: str | None) -> tuple[list[list[Any]] | None, str | None, str | None]:
    """Each row's images, read and checked (grpo_lite.data.images), and the column they go to: ``image`` when every row
    has one, which TRL 0.22 and 1.15 read, else ``images``, which TRL 1.15 reads; and the column they came from
    (``"auto"`` resolved). Nones without an image column."""
    if column == "auto":
        column = image_column(columns)
    elif column is not None and column not in columns:
        raise DatasetError(f"column {column!r} (image_column, the images) is missing; the data has columns {columns}. "
                           "Pass image_column='<your column>', or None for rows without images")
    if column is None:
        if resize is not None or convert is not None:
            raise DatasetError("image_resize and image_convert apply to images, and the rows have none: name their column "
                               "with image_column=")
        return None, None, None
    values = [row.get(column) for row in source] if isinstance(source, list) else undecoded(source, column)
    base = Path(given).parent if isinstance(given, (str, Path)) else None
    images, _ = read_images(values, column, _row_places(given, len(values)), base, resize=resize, convert=convert)
    out = "image" if all(len(row) == 1 for row in images) else "images"
    if out == "images" and not stack.newer("several_images"):
        place = _row_places(given, len(images))
        several = [place(i) for i, row in enumerate(images) if len(row) != 1]
        raise DatasetError(f"{', '.join(several[:5])}{' ...' * (len(several) > 5)}, column {column!r}: {len(several)} rows hold "
                           f"other than one image, and TRL {stack.installed('trl')} reads one image a row "
                           f"({stack.DIFFERENCES['several_images'].older}); give each row one image, or train on TRL "
                           f"{stack.DIFFERENCES['several_images'].since} or later (the latest stack: requirements/lock.txt)")
    shape = "one image per row" if out == "image" else f"{min(map(len, images))}-{max(map(len, images))} images per row"
    logger.info(f"images: column {column!r}{' (found by its name, as TRL finds it)' * (column in IMAGE_COLUMNS)}, "
                f"{len(images)} rows, {shape}" + (f", resized to {resize}" if resize else "")
                + (f", converted to {convert}" if convert else "") + f": kept as column {out!r}, "
                + ("which TRL reads on both stacks" if out == "image" else "which TRL 0.24 and later read"))
    return images, column, out


def with_seen_images(dataset, images: list[list[Any]]):
    """``dataset`` with the values of its image column (``images`` or ``image``, as TRL reads them) replaced by ``images``,
    each row's images as :func:`check_prompts` returned them."""
    column = image_column(dataset.column_names)
    return _with_images(dataset.remove_columns(column), column, images)


def _with_images(prepared, column: str, images: list[list[Any]]):
    """``prepared`` with each row's images as ``column``, stored with the ``datasets`` Image feature (the encoded file,
    not a list of pixels): one per row for ``image``, a list for ``images``."""
    from datasets import Dataset, Features, Image, List, concatenate_datasets

    feature = Image() if column == "image" else List(Image())
    values = [row[0] for row in images] if column == "image" else images
    return concatenate_datasets([prepared, Dataset.from_dict({column: values}, features=Features({column: feature}))], axis=1)


def rows_within(lengths: list[int], limit: int, setting: str) -> list[int]:
    """The indices of the rows whose prompt is at most ``limit`` tokens. A limit that leaves none is refused here,
    naming ``setting`` and the value that keeps every row, so that no filter empties a dataset without saying which."""
    keep = [i for i, n in enumerate(lengths) if n <= limit]
    if lengths and not keep:
        low, high = min(lengths), max(lengths)
        span = f"{low}-{high}" if low < high else f"{high}"
        rows = f"all {len(lengths)} rows: their prompts are" if len(lengths) > 1 else "the one row: its prompt is"
        raise DatasetError(f"{setting}={limit} drops {rows} {span} tokens as the chat template renders them; "
                           f"{setting}={high} keeps them all")
    return keep


def prompt_lengths(dataset, tokenizer, chat_template_kwargs: dict[str, Any] | None = None, *,
                   tools: Sequence[Sequence[Any]] | None = None) -> list[int]:
    """Token count of each row's prompt as training renders it (grpo_lite.data.prompts), generation prompt included, with
    the row's own values of the columns the chat template reads. ``tokenizer`` may be a vision model's processor: a row's
    images (its ``images`` or ``image`` column, as TRL reads them) then count the tokens the processor makes of them.
    ``tools``: each row's tools, which the chat template describes in its prompt (a run's tools and environments,
    grpo_lite.training.rollouts.rendered_tools)."""
    return [len(ids) for ids in prompt_ids(dataset, tokenizer, chat_template_kwargs, tools=tools)]


def prompt_ids(dataset, tokenizer, chat_template_kwargs: dict[str, Any] | None = None, *,
               tools: Sequence[Sequence[Any]] | None = None) -> Iterable[list[int]]:
    """Each row's prompt token ids as :func:`prompt_lengths` counts them, one row at a time."""
    column = image_column(dataset.column_names)
    images = [[] if v is None else v if isinstance(v, list) else [v] for v in dataset[column]] if column else None
    settings = row_template_kwargs(tokenizer, dataset, chat_template_kwargs)
    return (prompt_token_ids(tokenizer, prompt, {**kwargs, "tools": list(tools[i])} if tools and tools[i] else kwargs,
                             images=images[i] if images else ())
            for i, (prompt, kwargs) in enumerate(zip(dataset["prompt"], settings)))


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
