"""PNG cells of image-like uint8 frames: expcli's own encoder and a bounded decoder.

A Parquet column of frames stored as HF ``datasets`` stores images (``Image``:
``struct<bytes: binary, path: string>``) holds one PNG a cell. expcli writes them itself
with ``zlib`` (8-bit, no interlace, filter 0 "none" on every row: Pillow's adaptive
filters make Atari screens no smaller and cost time, ``benchmarks/parquet_frames.py``).
Reading, such a PNG is inflated by ``zlib`` alone; any other PNG (other filters, a
palette, 16 bits, interlaced) is decoded by Pillow. Nothing is inflated before its header
has been checked against the column's spec (width, height, channels), and inflating stops
at the bytes that shape holds: a cell that claims or holds more is refused, never
decoded.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence

import numpy as np

from expcli.errors import InvalidValueError, MissingDependencyError

__all__ = ["COLOR_TYPES", "decode_png", "encode_png", "image_like", "png_shape"]

SIGNATURE = b"\x89PNG\r\n\x1a\n"
COLOR_TYPES = {1: 0, 3: 2, 4: 6}
"""PNG colour type of each channel count: grey, RGB, RGBA."""
_IHDR = struct.Struct(">IIBBBBB")
_MODES = {"1": 1, "L": 1, "LA": 2, "P": 3, "PA": 4, "RGB": 3, "RGBA": 4}
"""Pillow modes of 8 bits or fewer a channel and their channels (a palette's: its colours')."""
_TARGET = {1: "L", 3: "RGB", 4: "RGBA"}


def image_like(shape: tuple[int, ...], dtype: str) -> bool:
    """Whether frames of ``shape`` and ``dtype`` are stored as PNG: uint8 ``(H, W[, 1|3|4])``."""
    if np.dtype(dtype) != np.uint8 or not 2 <= len(shape) <= 3 or 0 in shape:
        return False
    return len(shape) == 2 or shape[2] in COLOR_TYPES


def png_shape(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """``(height, width, channels)`` of the PNG of a frame of ``shape``."""
    return shape[0], shape[1], shape[2] if len(shape) == 3 else 1


def encode_png(frame: np.ndarray, level: int) -> bytes:
    """One uint8 ``(H, W[, C])`` frame as a PNG: 8-bit, filter none, deflated at ``level``."""
    height, width, channels = png_shape(frame.shape)
    rows = np.zeros((height, 1 + width * channels), np.uint8)  # a 0 (filter none) a row
    rows[:, 1:] = frame.reshape(height, width * channels)
    head = _IHDR.pack(width, height, 8, COLOR_TYPES[channels], 0, 0, 0)
    return b"".join(
        [
            SIGNATURE,
            _chunk(b"IHDR", head),
            _chunk(b"IDAT", zlib.compress(rows.data, level)),
            _chunk(b"IEND", b""),
        ]
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data))
        + kind
        + data
        + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))
    )


def decode_png(blob: bytes | memoryview, shape: tuple[int, ...], out: np.ndarray) -> None:
    """Decode one PNG cell into ``out`` (uint8 of ``shape``), checked before inflating.

    Raises:
        InvalidValueError: The bytes are no PNG, of another size or channel count than
            ``shape``, damaged, or inflate past what ``shape`` holds (a bomb).
    """
    view = memoryview(blob)
    if bytes(view[:8]) != SIGNATURE:
        raise InvalidValueError("holds no PNG image (no PNG signature)")
    height, width, channels = png_shape(shape)
    chunks = _chunks(view)
    if not chunks or chunks[0][0] != b"IHDR" or len(chunks[0][1]) != _IHDR.size:
        raise InvalidValueError("holds a PNG whose first chunk is no IHDR")
    w, h, depth, color, _, _, interlace = _IHDR.unpack(chunks[0][1])
    if (w, h) != (width, height):
        raise InvalidValueError(
            f"holds a PNG of {w}x{h} pixels; expected {width}x{height} (its column's shape)"
        )
    if depth == 8 and color == COLOR_TYPES[channels] and interlace == 0:
        stride = 1 + width * channels
        data = _inflate([c[1] for c in chunks if c[0] == b"IDAT"], height * stride)
        rows = np.frombuffer(data, np.uint8).reshape(height, stride)
        if not rows[:, 0].any():  # filter none on every row: the pixels as they are
            out[...] = rows[:, 1:].reshape(out.shape)
            return
    _pillow_decode(view, (height, width, channels), out)


def _chunks(view: memoryview) -> list[tuple[bytes, memoryview]]:
    """The chunks up to IEND, each ``(type, data)``; lengths checked against the bytes."""
    chunks, at = [], 8
    while at + 8 <= len(view):
        (size,) = struct.unpack_from(">I", view, at)
        kind = bytes(view[at + 4 : at + 8])
        if at + 12 + size > len(view):
            raise InvalidValueError(f"holds a truncated PNG ({kind!r} chunk past its end)")
        chunks.append((kind, view[at + 8 : at + 8 + size]))
        at += 12 + size
        if kind == b"IEND":
            return chunks
    raise InvalidValueError("holds a truncated PNG (no IEND chunk)")


def _inflate(parts: Sequence[memoryview], size: int) -> bytes:
    """The ``size`` bytes the IDAT ``parts`` deflate, inflating no more than that."""
    inflater = zlib.decompressobj()
    pieces: list[bytes] = []
    held = 0
    try:
        for part in parts:
            pieces.append(inflater.decompress(part, size + 1 - held))
            held += len(pieces[-1])
            if held > size or inflater.unconsumed_tail:
                raise InvalidValueError(
                    f"holds a PNG whose pixels inflate past the {size:,} bytes its header says "
                    "(a decompression bomb or a damaged image); refusing it"
                )
    except zlib.error as e:
        raise InvalidValueError(f"holds a damaged PNG (zlib: {e})") from e
    if held != size:
        raise InvalidValueError(f"holds a PNG of {held:,} pixel bytes; expected {size:,}")
    return b"".join(pieces)


def _pillow_decode(view: memoryview, shape: tuple[int, int, int], out: np.ndarray) -> None:
    """A PNG expcli did not write (its size already checked): decoded by Pillow."""
    import io
    import warnings

    try:
        from PIL import Image
    except ImportError as e:
        raise MissingDependencyError("Pillow", "parquet", "PNG frames of other writers") from e
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(view), formats=["PNG"]) as opened:
                if opened.mode not in _MODES:
                    raise InvalidValueError(
                        f"holds a PNG of mode {opened.mode!r}; expected 8-bit ({', '.join(_MODES)})"
                    )
                channels = _MODES[opened.mode]
                if opened.mode == "P":  # a palette: RGB, or RGBA with a transparent colour
                    channels = 4 if "transparency" in opened.info else 3
                if channels != shape[2]:
                    raise InvalidValueError(
                        f"holds a PNG of {channels} channels; expected {shape[2]} (its column's "
                        "shape)"
                    )
                pixels = np.asarray(opened.convert(_TARGET[shape[2]]))
        except (InvalidValueError, MemoryError):
            raise
        except Exception as e:  # Pillow raises many kinds for damaged images
            raise InvalidValueError(f"holds a damaged PNG ({type(e).__name__}: {e})") from e
    if pixels.size != math.prod(shape):
        raise InvalidValueError(f"holds a PNG of {list(pixels.shape)}; expected {list(shape)}")
    out[...] = pixels.reshape(out.shape)
