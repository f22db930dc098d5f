"""A dataset's image values -> PIL images, each read and checked before a model loads.

TRL's GRPOTrainer takes a row's images from the dataset: TRL 1.15 reads a column ``images`` (a list per row) and else
``image`` (one per row), TRL 0.22 reads ``image`` only (trl/trainer/grpo_trainer.py, ``_generate_and_score_completions``
and ``_signature_columns`` on both). A value may be a PIL image, a file path (relative to the data file when the rows
came from one), the bytes of an image file, a ``datasets`` Image value (``{"bytes": ..., "path": ...}``), or a list of
those (several images in one row). Every value is decoded and checked up front (PIL's ``verify``, then a full load,
which finds a truncated file ``verify`` passes), and every bad one is named at once, by row and column: a training run
would otherwise stop at the first bad image after the model has loaded, an hour in.

Each image is then kept in a mode a vision processor turns into the picture: RGB, or L for a grayscale one. Every
processor here converts an image with PIL's ``convert("RGB")`` (transformers' ``convert_to_rgb``, on both stacks),
which loses the picture of some modes: it clips 16-bit, 32-bit and float grayscale (``I;16``, ``I``, ``F``) to 255, so
a 16-bit scan comes out white; it drops transparency, so a drawing on a transparent background shows the colour hidden
behind it (often black, the drawing's own); it reads a CMYK image without its colour profile; and it refuses ``La``.
So :func:`as_seen` converts each such image as it is meant to be seen: grayscale scaled from its mode's range to 8
bits (16-bit by 1/257; ``I`` and ``F`` by the range their values use: 0-255, 0-65535 or 0-1, else their own span),
transparency composited over white (as transformers' Idefics and Mllama processors do), CMYK through its embedded
colour profile to sRGB with ImageCms (PIL's own formula where it has none), and any other mode by PIL's conversion,
which keeps its picture. What was converted is said; a grayscale image whose values span too little of their range to
show (all 16-bit values under 257 become one or two shades of black) is stretched to the whole range, and that is
said as a warning naming the row.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..log import logger
from .prompts import DatasetError

# The columns TRL reads images from, in the order TRL 1.15 looks for them (see the module's docstring).
IMAGE_COLUMNS = ("images", "image")
MODES = ("RGB", "RGBA", "L")  # the modes image_convert takes: what vision processors read
SEEN_MODES = ("RGB", "L")  # kept as they are: a processor's convert("RGB") of any other mode may lose the picture
BACKGROUND = (255, 255, 255)  # what shows through a transparent pixel, as a page shows it
# grayscale modes of more than 8 bits, each with the range its values mean; None: read from the values (as_seen)
DEEP_GRAYSCALE = {"I;16": (0, 65535), "I;16L": (0, 65535), "I;16B": (0, 65535), "I;16N": (0, 65535), "I": None, "F": None}
SHADES = 16  # fewer shades of 256 than this, from values that differ, show as one colour: stretched, and said
URL = re.compile(r"^([a-z][a-z0-9+.-]*://|data:)", re.IGNORECASE)  # http(s)://, s3://, gs://, a data: URI
SHOWN = 10  # bad images named in one message; the rest are counted
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff")  # of a path or URL naming an image


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


def image_kind(value: Any) -> str | None:
    """What ``value`` is, when it is an image value (a PIL image, an image file's bytes, a ``datasets`` Image value, the
    path or URL of an image file, a list of them), for a message; None for any other value."""
    from PIL import Image

    if isinstance(value, Image.Image):
        return "a PIL image"
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            with Image.open(io.BytesIO(bytes(value))):  # its header alone: PIL knows the format
                return "an image file's bytes"
        except Exception:  # PIL reports bytes that are no image as one of several errors
            return None
    if isinstance(value, Mapping) and value and set(value) <= {"bytes", "path"} and any(v is not None for v in value.values()):
        return "a datasets Image value"
    if isinstance(value, (str, Path)) and "\n" not in str(value) and Path(str(value).split("?")[0]).suffix.lower() in IMAGE_SUFFIXES:
        return f"the {'URL' if URL.match(str(value)) else 'path'} of an image, {str(value)[:60]!r}"
    if isinstance(value, (list, tuple)) and value and all(image_kind(item) for item in value):
        return f"a list of images ({image_kind(value[0])}, ...)"
    return None


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


def _eight_bits(values, low: float, high: float):
    """``values`` mapped linearly from ``low``-``high`` onto 0-255, as 8-bit grayscale pixels."""
    import numpy as np

    span = (high - low) or 1.0
    return np.clip(np.rint((values - low) / span * 255), 0, 255).astype(np.uint8)


def _grayscale(image) -> tuple[Any, str, str | None]:
    """A grayscale image of more than 8 bits as 8-bit L, scaled from the range its values mean (DEEP_GRAYSCALE: the
    mode's, else the first of 0-1 (float only), 0-255, 0-65535 that holds them, else their own span); what was done; and,
    where values that differ would show as fewer than SHADES shades, why it was stretched to 0-255 instead."""
    import numpy as np
    from PIL import Image

    values = np.asarray(image, dtype=np.float64)
    finite = values[np.isfinite(values)]
    least, most = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    values = np.nan_to_num(values, nan=least, posinf=most, neginf=least)
    low, high = DEEP_GRAYSCALE[image.mode] or next(
        (bounds for bounds in ((0.0, 1.0),) * (image.mode == "F") + ((0.0, 255.0), (0.0, 65535.0))
         if bounds[0] <= least and most <= bounds[1]), (least, most))
    pixels = _eight_bits(values, low, high)
    how = f"in mode {image.mode} ({'float' if image.mode == 'F' else 'deep'} grayscale) scaled from {low:g}-{high:g} to 8-bit L"
    shades = int(pixels.max()) - int(pixels.min()) + 1
    if least == most or shades >= SHADES:
        return Image.fromarray(pixels), how, None
    lost = (f"its values span {least:g}-{most:g} of {low:g}-{high:g}, {shades} shade{'s' * (shades > 1)} of 256 scaled: "
            f"stretched to 0-255 so that the picture shows (give it scaled as you mean it, mode L or RGB, to keep its "
            "brightness)")
    return Image.fromarray(_eight_bits(values, least, most)), how, lost


def _over_background(image):
    """``image`` with its transparent and translucent pixels composited over BACKGROUND: RGB, or L for a grayscale one."""
    from PIL import Image

    rgba = (image.convert("LA") if image.mode == "La" else image).convert("RGBA")  # PIL has no La -> RGBA conversion
    seen = Image.alpha_composite(Image.new("RGBA", image.size, (*BACKGROUND, 255)), rgba).convert("RGB")
    return seen.convert("L") if image.mode in ("L", "LA", "La") else seen


def _cmyk(image) -> tuple[Any, str]:
    """A CMYK image as RGB: through its embedded colour profile to sRGB, else by PIL's formula; and how."""
    profile = image.info.get("icc_profile")
    if profile:
        from PIL import ImageCms

        try:
            source = ImageCms.ImageCmsProfile(io.BytesIO(profile))
            return (ImageCms.profileToProfile(image, source, ImageCms.createProfile("sRGB"), outputMode="RGB"),
                    "in mode CMYK converted to RGB through its colour profile (sRGB)")
        except (ImageCms.PyCMSError, OSError, ValueError) as error:
            return image.convert("RGB"), (f"in mode CMYK converted to RGB by PIL's formula: its colour profile cannot be "
                                          f"read ({str(error)[:60]})")
    return image.convert("RGB"), "in mode CMYK converted to RGB by PIL's formula (the file has no colour profile)"


def as_seen(image) -> tuple[Any, str | None, str | None]:
    """``image`` in a mode whose ``convert("RGB")`` keeps its picture (SEEN_MODES), converted as it is meant to be seen
    (see the module's docstring); what was done, or None when it is kept as it is; and, when its picture could be kept
    only by stretching its values, a warning saying so."""
    mode = image.mode
    if mode in SEEN_MODES and "transparency" not in image.info:
        return image, None, None
    if mode in DEEP_GRAYSCALE:
        return _grayscale(image)
    if mode in ("RGBA", "RGBa", "LA", "La", "PA") or "transparency" in image.info:
        seen = _over_background(image)
        return seen, f"in mode {mode} with transparency composited over white as {seen.mode}", None
    if mode == "CMYK":
        return (*_cmyk(image), None)
    seen = image.convert("L" if mode == "1" else "RGB")
    return seen, f"in mode {mode} converted to {seen.mode}", None


def _say_converted(which: str, converted: Counter) -> None:
    """Say what :func:`as_seen` did to ``which`` images (``converted``: how many of each kind of conversion)."""
    if converted:
        logger.info(f"{which} a vision processor would not show as they are: "
                    + "; ".join(f"{count} {how}" for how, count in converted.items()))


def seen_images(rows: list[list[Any]], where: str) -> list[list[Any]]:
    """Each row's images, the PIL ones as they are seen (:func:`as_seen`), for a processor given them directly; what
    was converted is said, ``where`` naming the caller."""
    from PIL import Image

    converted: Counter = Counter()
    stretched = []
    seen_rows = []
    for index, images in enumerate(rows):
        seen_rows.append([])
        for image in images:
            if isinstance(image, Image.Image):
                image, how, lost = as_seen(image)
                converted.update([how] if how else [])
                stretched += [f"{where}: row {index}: {lost}"] if lost else []
            seen_rows[-1].append(image)
    _say_converted(f"{where}: images", converted)
    if stretched:
        logger.warning("\n".join(stretched))
    return seen_rows


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
                resize: Any = None, convert: str | None = None) -> tuple[list[list[Any]], int]:
    """Each row's images (a list, one or more) from the values of ``column``, each as it is seen (:func:`as_seen`),
    converted and resized; and how many :func:`as_seen` converted, which is said. Every value that is not an image is
    named (by ``place``, the row, and the column) in one DatasetError."""
    if convert is not None and convert not in MODES:
        raise DatasetError(f"prepare_dataset: image_convert={convert!r}: give one of {', '.join(MODES)}, or None to keep "
                           "each image's mode")
    resize = check_resize(resize)
    rows, bad, converted, stretched = [], [], Counter(), []
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
                image = read_image(item, base)
            except DatasetError as error:
                bad.append(f"{place(index)}, column {column!r}{which}: {error}")
                continue
            seen, how, lost = as_seen(image)
            converted.update([how] if how else [])
            if lost:
                stretched.append(f"{place(index)}, column {column!r}{which}: {lost}")
            images.append(shaped(seen, resize, convert))
        rows.append(images)
    if bad:
        more = f"\n... and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
        raise DatasetError(f"{len(bad)} image value{'s' * (len(bad) > 1)} cannot be read:\n" + "\n".join(bad[:SHOWN]) + more)
    _say_converted(f"images of column {column!r}", converted)
    if stretched:
        more = f"\n... and {len(stretched) - SHOWN} more" if len(stretched) > SHOWN else ""
        logger.warning(f"{len(stretched)} image{'s' * (len(stretched) > 1)} would show as (nearly) one colour:\n"
                       + "\n".join(stretched[:SHOWN]) + more)
    return rows, sum(converted.values())


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
