"""HF ``Image`` columns of a foreign table: PNG and JPEG bytes decoded to uint8 arrays.

HF ``datasets`` stores an image as ``struct<bytes: binary, path: string>`` and says so in
its features (``{"_type": "Image"}``). Each image is decoded by Pillow (imported when the
first one is) to ``(H, W)`` (grey) or ``(H, W, C)``; every image of a column must have the
first one's shape. PNG is lossless: its pixels come back bit for bit; JPEG is lossy, which
the reader says once. Before any image is decoded its header (Pillow's ``Image.open``
reads no more) is checked: its pixels times its channels against the bytes it came in
(``_guards.check_inflation``), and Pillow's own decompression-bomb limit, so that a few
bytes that claim a huge image are refused in one line. A path without bytes is refused:
expcli does not open files that a table names.
"""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError, MissingDependencyError
from expcli.formats._guards import brief, check_inflation
from expcli.formats._parquet_open import GROUP_VARIABLE, max_group_bytes

__all__ = ["LOSSY_FORMATS", "check_group_images", "first_image", "image_rows", "lossy_note"]

LOSSY_FORMATS = ("JPEG",)
"""Image formats whose decoded pixels are not those that were compressed."""
_FORMATS = ["PNG", "JPEG"]
_CHANNELS = {"L": 1, "1": 1, "LA": 2, "RGB": 3, "RGBA": 4, "CMYK": 4, "P": 4, "PA": 4}
"""Channels of each 8-bit mode once decoded (a palette as RGB or RGBA, bits as grey)."""
_CONVERTED = {"1": "L", "PA": "RGBA"}
_warned: set[tuple[str, str]] = set()  # (file, column): a lossy image said once


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError as e:
        raise MissingDependencyError("Pillow", "parquet", "HF Image columns of tables") from e
    return Image


def first_image(array: Any, where: tuple[Path, str, int]) -> tuple[tuple[int, ...], str]:
    """The shape of a column's images and the format of its first (``array``'s first row).

    Raises:
        FormatError: As ``image_rows``.
    """
    shape, kind, opened = _header(_pillow(), _blobs(array.slice(0, 1), where)[0], where, 0)
    opened.close()
    return shape, kind


def image_rows(array: Any, shape: tuple[int, ...], where: tuple[Path, str, int]) -> np.ndarray:
    """An image column's rows (no null row among them) as ``(n, *shape)`` uint8.

    ``where``: the file, the column and the file row of the first row (-1: not numbered).

    Raises:
        FormatError: A row holding a path and no bytes, bytes that are no PNG or JPEG, an
            image of another shape than ``shape``, or a decompression bomb.
        MissingDependencyError: Pillow is not installed.
    """
    image = _pillow()
    path, name, first = where
    out = np.empty((len(array), *shape), np.uint8)
    for at, blob in enumerate(_blobs(array, where)):
        found, kind, opened = _header(image, blob, where, at)
        with opened:
            if found != shape:
                raise FormatError(
                    f"{_row(first, at)} holds an image of shape {list(found)} where the first "
                    f"holds {list(shape)}; the images of a column must share a shape",
                    path=path,
                    key=name,
                )
            if kind in LOSSY_FORMATS and (str(path), name) not in _warned:
                _warned.add((str(path), name))
                warnings.warn(
                    f"{path}: column {name!r} holds {kind} images ({_row(first, at)}): "
                    "decoded, they are not the pixels that were compressed (lossy)",
                    UserWarning,
                    stacklevel=2,
                )
            pixels = _pixels(opened, where, at)
            if pixels.shape != shape or pixels.dtype != np.uint8:  # as its header said
                raise FormatError(
                    f"{_row(first, at)} decodes to {pixels.dtype} {list(pixels.shape)}, not "
                    f"the uint8 {list(shape)} its header says; it is damaged",
                    path=path,
                    key=name,
                )
            out[at] = pixels
    return out


def lossy_note(arrays: Iterable[Any], path: Path, name: str) -> str | None:
    """That a column's images are lossy, from its first (``arrays``: its rows in order).

    For the warning and the metadata; None: they are not, or there is no image.

    Raises:
        FormatError: As ``image_rows``.
    """
    for array in arrays:
        array = array.filter(array.is_valid()) if array.null_count else array
        if len(array):
            kind = first_image(array, (path, name, -1))[1]
            if kind not in LOSSY_FORMATS:
                return None
            _warned.add((str(path), name))  # said once: not again when decoded
            return f"{name!r} holds {kind} images: decoded, lossy (not the pixels compressed)"
    return None


def check_group_images(rows: int, shape: tuple[int, ...], path: Path, name: str) -> None:
    """Refuse images whose largest row group (``rows``) decodes past ``max_group_bytes``.

    The footer says what the images are stored in, not what they decode to: counted from
    the first image's header (``shape``), before any is decoded.

    Raises:
        FormatError: The group decodes to too much.
    """
    most = rows * math.prod(shape)
    if most > max_group_bytes():
        raise FormatError(
            f"holds images of shape {list(shape)}: a row group decodes to {most:,} bytes, more "
            f"than the {max_group_bytes():,} decoded at once; set {GROUP_VARIABLE} to read "
            "larger groups from a file you trust",
            path=path,
            key=name,
        )


def _blobs(array: Any, where: tuple[Path, str, int]) -> list[bytes]:
    """Each row's bytes; a row of a path alone refused."""
    path, name, first = where
    data, paths = array.field("bytes"), array.field("path")
    if data.null_count:
        at = data.is_valid().to_pylist().index(False)
        named = paths[at].as_py()
        said = "no path either" if named is None else f"only the path {brief(named)}"
        raise FormatError(
            f"{_row(first, at)} holds no image bytes, {said}; expcli does not open files a "
            "table names (store the bytes, as datasets' embed_table_storage does)",
            path=path,
            key=name,
        )
    return [bytes(b) for b in data.to_pylist()]


def _header(image: Any, blob: bytes, where: tuple[Path, str, int], at: int) -> Any:
    """``(shape, format, opened)`` of an image from its header, bombs refused before decoding."""
    path, name, first = where
    with warnings.catch_warnings():
        warnings.simplefilter("error", image.DecompressionBombWarning)
        try:
            opened = image.open(io.BytesIO(blob), formats=_FORMATS)
        except (image.DecompressionBombError, image.DecompressionBombWarning) as e:
            raise FormatError(
                f"{_row(first, at)} holds a decompression bomb ({e}); refusing to decode it",
                path=path,
                key=name,
            ) from e
        except Exception as e:  # Pillow raises many kinds for bytes that are no image
            raise FormatError(
                f"{_row(first, at)} holds no PNG or JPEG image ({type(e).__name__}: "
                f"{brief(str(e))})",
                path=path,
                key=name,
            ) from e
    width, height = opened.size
    channels = _CHANNELS.get(opened.mode)
    if channels is None:
        opened.close()
        raise FormatError(
            f"{_row(first, at)} holds a {opened.format} image of mode {opened.mode!r}; "
            f"expected 8-bit images ({', '.join(_CHANNELS)})",
            path=path,
            key=name,
        )
    try:
        check_inflation(width * height * channels, len(blob), path, name)
    except FormatError:
        opened.close()
        raise
    if opened.mode == "P":
        channels = 4 if "transparency" in opened.info else 3
    shape = (height, width) if channels == 1 else (height, width, channels)
    return shape, str(opened.format), opened


def _pixels(opened: Any, where: tuple[Path, str, int], at: int) -> np.ndarray:
    path, name, first = where
    try:
        if opened.mode == "P":
            opened = opened.convert("RGBA" if "transparency" in opened.info else "RGB")
        elif opened.mode in _CONVERTED:
            opened = opened.convert(_CONVERTED[opened.mode])
        return np.asarray(opened)
    except Exception as e:  # damaged image data: Pillow's OSError, SyntaxError, ...
        raise FormatError(
            f"{_row(first, at)} holds a damaged image ({type(e).__name__}: {brief(str(e))})",
            path=path,
            key=name,
        ) from e


def _row(first: int, at: int) -> str:
    return f"row {first + at:,}" if first >= 0 else "a row"
