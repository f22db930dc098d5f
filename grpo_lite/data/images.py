"""A dataset's image values -> PIL images, each read and checked before a model loads.

TRL's GRPOTrainer takes a row's images from the dataset: TRL 1.15 reads a column ``images`` (a list per row) and else
``image`` (one per row), TRL 0.22 reads ``image`` only (trl/trainer/grpo_trainer.py, ``_generate_and_score_completions``
and ``_signature_columns`` on both). A value may be a PIL image, a file path (relative to the data file when the rows
came from one), the bytes of an image file, a ``datasets`` Image value (``{"bytes": ..., "path": ...}``), or a list of
those (several images in one row). Every value is decoded and checked up front (PIL's ``verify``, then a full load,
which finds a truncated file ``verify`` passes), and every bad one is named at once, by row and column: a training run
would otherwise stop at the first bad image after the model has loaded, an hour in.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .prompts import DatasetError

# The columns TRL reads images from, in the order TRL 1.15 looks for them (see the module's docstring).
IMAGE_COLUMNS = ("images", "image")
MODES = ("RGB", "RGBA", "L")  # the modes image_convert takes: what vision processors read
URL = re.compile(r"^([a-z][a-z0-9+.-]*://|data:)", re.IGNORECASE)  # http(s)://, s3://, gs://, a data: URI
SHOWN = 10  # bad images named in one message; the rest are counted


def _open(data: bytes | Path):
    """A loaded PIL image from a file's bytes or path; a file PIL cannot read whole is a DatasetError saying why."""
    from PIL import Image

    def source():
        return io.BytesIO(data) if isinstance(data, bytes) else data

    try:
        with Image.open(source()) as image:
            image.verify()  # structure and checksums, without decoding the pixels
        image = Image.open(source())
        image.load()  # the pixels: a truncated file passes verify and fails here
    except Exception as error:  # PIL reports a bad file as OSError, SyntaxError, ValueError or its own errors
        what = "the bytes are" if isinstance(data, bytes) else f"file {str(data)!r} is"
        raise DatasetError(f"{what} not an image PIL can read ({type(error).__name__}: {str(error)[:80]}); give a PNG, "
                           "JPEG or other image file, or remove the row") from None
    return image


def images_of(row: Any) -> list[Any]:
    """A prepared row's images, as TRL takes them: its ``images`` list, else its one ``image``; none for a text row
    or a prompt given alone."""
    if not isinstance(row, Mapping):
        return []
    if row.get("images") is not None:
        return list(row["images"])
    return [row["image"]] if row.get("image") is not None else []


def read_image(value: Any, base: Path | None = None):
    """One image value as a loaded PIL image; a value that is not one is a DatasetError saying why and the fix."""
    from PIL import Image

    if isinstance(value, Image.Image):
        try:
            value.load()
        except Exception as error:  # an image opened lazily from a file that has since gone bad
            raise DatasetError(f"the PIL image cannot be loaded ({type(error).__name__}: {str(error)[:80]}); give it again "
                               "from its file, or remove the row") from None
        return value
    if isinstance(value, Mapping) and set(value) <= {"bytes", "path"}:  # a datasets Image value, undecoded
        if value.get("bytes") is not None:
            return read_image(value["bytes"], base)
        if value.get("path") is not None:
            return read_image(value["path"], base)
        return read_image(None, base)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _open(bytes(value))
    if isinstance(value, (str, Path)):
        text = str(value)
        if URL.match(text):
            raise DatasetError(f"{text[:80]!r} is a URL, and nothing is fetched from the network while preparing data: "
                               "download the image first and give its file path (or its bytes)")
        path = Path(text).expanduser()
        if base is not None and not path.is_absolute():
            path = base / path
        path = path.absolute()  # the datasets Image feature keeps an unchanged image's path: from any working folder
        if not path.is_file():
            where = f" (relative paths are read from the data file's folder, {str(base)!r})" if base is not None else ""
            raise DatasetError(f"image file {str(path)!r} does not exist{where}; give an existing image file, or remove the row")
        return _open(path)
    if value is None:
        raise DatasetError("the row has no image; give it one (a PIL image, a file path or the file's bytes), or remove the row")
    raise DatasetError(f"expected an image (a PIL image, a file path, the file's bytes or a datasets Image value), got "
                           f"{type(value).__name__} ({value!r:.60})")


def check_resize(resize: Any) -> tuple[int, int] | int | None:
    """``image_resize`` as given, or a DatasetError: a whole number (the longest side, the aspect kept) or (width,
    height) in pixels, as Unsloth's vision notebooks resize to (512, 512)."""
    def whole(n):
        return isinstance(n, int) and not isinstance(n, bool) and n >= 1

    if resize is None or whole(resize):
        return resize
    if isinstance(resize, (list, tuple)) and len(resize) == 2 and all(whole(n) for n in resize):
        return int(resize[0]), int(resize[1])
    raise DatasetError(f"prepare_dataset: image_resize={resize!r}: give the longest side in pixels (e.g. 512), "
                       "(width, height) such as (512, 512), or None to keep each image's size")


def shaped(image, resize: tuple[int, int] | int | None, convert: str | None):
    """``image`` converted to mode ``convert`` and resized (see :func:`check_resize`), as the notebooks prepare theirs."""
    if convert is not None and image.mode != convert:
        image = image.convert(convert)
    if isinstance(resize, int):
        scale = resize / max(image.size)
        resize = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    if resize is not None and tuple(resize) != image.size:
        image = image.resize(resize)
    return image


def read_images(values: list[Any], column: str, place: Callable[[int], str], base: Path | None = None, *,
                resize: Any = None, convert: str | None = None) -> list[list[Any]]:
    """Each row's images (a list, one or more) from the values of ``column``, converted and resized; every value that is
    not an image is named (by ``place``, the row, and the column) in one DatasetError."""
    if convert is not None and convert not in MODES:
        raise DatasetError(f"prepare_dataset: image_convert={convert!r}: give one of {', '.join(MODES)}, or None to keep "
                           "each image's mode")
    resize = check_resize(resize)
    rows, bad = [], []
    for index, value in enumerate(values):
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        if not items:
            bad.append(f"{place(index)}, column {column!r}: the list of images is empty; give the row an image, or "
                       "remove it")
            continue
        images = []
        for number, item in enumerate(items):
            which = f", image {number}" if isinstance(value, (list, tuple)) else ""
            try:
                images.append(shaped(read_image(item, base), resize, convert))
            except DatasetError as error:
                bad.append(f"{place(index)}, column {column!r}{which}: {error}")
        rows.append(images)
    if bad:
        more = f"\n... and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
        raise DatasetError(f"{len(bad)} image value{'s' * (len(bad) > 1)} cannot be read:\n" + "\n".join(bad[:SHOWN]) + more)
    return rows


def undecoded(dataset, column: str) -> list[Any]:
    """The values of ``column`` of a ``datasets.Dataset``, its Image values as ``{"bytes", "path"}``: decoding them
    there would stop at the first bad one with the library's error, not ours."""
    from datasets import Image

    feature = dataset.features[column]
    inner = getattr(feature, "feature", None)
    if isinstance(feature, Image):
        dataset = dataset.cast_column(column, Image(decode=False))
    elif isinstance(inner, Image):
        dataset = dataset.cast_column(column, type(feature)(Image(decode=False)))
    return list(dataset[column])
