"""Rows of numbers as CSV text, built with whole-array numpy work rather than a call per cell.

Every cell reads back bit for bit through ``float(text)`` (or ``int``) and a cast to the
column's dtype:

- float16 and float32: the shortest decimal that rounds back to the value, in the notation of
  Python's ``repr`` (``0.1``, ``-0.0``, ``1e-05``, ``3.4028235e+38``), found as below;
- float64: Python's ``repr``, which is that shortest decimal already;
- integers in decimal; bools as ``True`` and ``False``;
- ``inf``, ``-inf`` and ``nan``; a NaN other than numpy's default (another sign or payload)
  as ``nan:0x<bits>``.

Each column of cells becomes a matrix of byte slots, one column of slots per cell, NUL where
a cell leaves a slot unused; the rows are all cells' slots side by side, their NULs dropped in
one go.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["NAN_BITS", "encode_rows", "nan_token"]

NAN_BITS = "nan:"
"""Prefix of the text of a NaN that is not numpy's default NaN: ``nan:0x<bits>``."""

_TEN = np.uint64(10)
_POW10 = 10 ** np.arange(20, dtype=np.uint64)  # exact
with np.errstate(over="ignore"):
    _POW10_FLOAT = 10.0 ** np.arange(-400, 400)  # near enough: every use is checked
_FLOAT_OFFSET = 400
# Candidates must fall this far inside the rounding interval (a fraction of its half-width),
# so that neither their float64 evaluation here (error <= 2**-51 relative) nor the reader's
# rounding to float64 before the cast (<= 2**-53) can move them out of it.
_INSIDE = 0.5 * (1 - 2.0**-20)
_MINUS, _DOT, _COMMA, _NEWLINE, _E, _PLUS, _ZERO = b"-.,\ne+0"


def nan_token(bits: int) -> str:
    """The text of a NaN with these raw bits, when they are not numpy's default NaN."""
    return f"{NAN_BITS}{bits:#x}"


def encode_rows(blocks: Sequence[np.ndarray]) -> bytes:
    """The CSV text of rows whose cells are the columns of ``blocks``, side by side.

    Args:
        blocks: 2-D arrays with the same number of rows, each of a supported dtype (one
            per tensor, its features flattened).

    Returns:
        UTF-8 text, every row ended by a newline.
    """
    rows = blocks[0].shape[0] if blocks else 0
    parts = [(_slots(b.reshape(-1)), b.shape[1]) for b in blocks if b.shape[1] and rows]
    widths = [(chars.shape[0] + 1) * cells for chars, cells in parts]
    total = sum(widths)
    if total == 0:
        return b"\n" * rows
    text = np.empty((rows, total), np.uint8)
    start = 0
    for (chars, cells), width in zip(parts, widths, strict=True):
        slots = chars.shape[0]
        cell = np.ndarray((rows, cells, slots + 1), np.uint8, text, start, (total, slots + 1, 1))
        cell[:, :, :slots] = chars.T.reshape(rows, cells, slots)
        cell[:, :, slots] = _COMMA
        start += width
    text[:, -1] = _NEWLINE
    flat = text.reshape(-1)
    return np.compress(flat != 0, flat).tobytes()


def _slots(values: np.ndarray) -> np.ndarray:
    """The slots ``(width, cells)`` of a column of cells, NUL where unused."""
    values = values.astype(values.dtype.newbyteorder("="), copy=False)
    kind = values.dtype.kind
    if kind == "b":
        return _bool_slots(values)
    if kind in "iu":
        return _int_slots(values.astype(np.int64))
    if values.dtype.itemsize == 8:
        return _repr_slots(values)
    return _float_slots(values)


def _bool_slots(values: np.ndarray) -> np.ndarray:
    true, false = (np.frombuffer(word, np.uint8)[:, None] for word in (b"True\0", b"False"))
    return np.where(values, true, false)


def _int_slots(values: np.ndarray) -> np.ndarray:
    """Decimal integers, right-aligned: a sign slot, then as many digits as the largest needs."""
    size = len(values)
    magnitude = values.astype(np.uint64)
    negative = values < 0
    np.negative(magnitude, out=magnitude, where=negative)  # modulo 2**64: exact for int64's min
    chars = np.empty((1 + _width(magnitude), size), np.uint8)
    used = np.empty(chars.shape, bool)
    chars[0] = _MINUS
    used[0] = negative
    _digits(chars[1:], magnitude)
    _leading(used[1:], magnitude)
    chars *= used
    return chars


def _repr_slots(values: np.ndarray) -> np.ndarray:
    """float64: Python's repr, the shortest text that reads back to the same float64."""
    texts = [repr(v) for v in values.tolist()]
    for index in _odd_nans(values):
        texts[index] = nan_token(int(values[index : index + 1].view(np.uint64)[0]))
    return np.array(texts, dtype=np.bytes_).view(np.uint8).reshape(len(texts), -1).T


def _float_slots(values: np.ndarray) -> np.ndarray:
    """float16/float32: the shortest round-trip decimal, in ``repr``'s notation.

    Layout of the slots: sign, integer digits (right-aligned), dot, fraction digits
    (left-aligned), then ``e``, the exponent's sign and digits when any cell needs them.
    Zeros come out as ``0.0``; infinities and NaNs are written over their cells at the end.
    """
    size = len(values)
    finite = np.isfinite(values)
    regular = finite & (values != 0)
    digits, exponent = _shortest(np.where(regular, values, values.dtype.type(1)))
    digits[~regular] = 0
    exponent[~regular] = 0
    count = _count_digits(digits)
    power = exponent + count - 1  # the decimal exponent of the leading digit
    fixed = (power >= -4) & (power < 16)
    after = np.where(fixed, -exponent, count - 1)  # digits after the dot
    down = np.maximum(after, 0)
    scale = _POW10[down]
    whole = digits // scale
    fraction = digits - whole * scale
    whole *= _POW10[np.maximum(-after, 0)]
    shown = np.where(fixed, np.maximum(down, 1), down)  # fraction digits written
    whole_slots = _width(whole)
    scientific = not fixed.all()
    exponent_slots = 2 + max(2, _width(np.abs(power).astype(np.uint64))) if scientific else 0
    specials = _specials(values, finite)
    longest = max((len(text) for text, _ in specials), default=0)
    fraction_slots = max(int(shown.max(initial=1)), longest - 2 - whole_slots - exponent_slots)

    chars = np.empty((2 + whole_slots + fraction_slots + exponent_slots, size), np.uint8)
    used = np.empty(chars.shape, bool)
    chars[0] = _MINUS
    np.signbit(values, out=used[0])
    dot = 1 + whole_slots
    _digits(chars[1:dot], whole)
    _leading(used[1:dot], whole)
    chars[dot] = _DOT
    np.greater(shown, 0, out=used[dot])
    end = dot + 1 + fraction_slots
    _digits(chars[dot + 1 : end], fraction * _POW10[fraction_slots - shown])
    np.less(np.arange(fraction_slots)[:, None], shown, out=used[dot + 1 : end])
    if scientific:
        chars[end] = _E
        np.logical_not(fixed, out=used[end])
        chars[end + 1] = np.where(power < 0, _MINUS, _PLUS)
        _digits(chars[end + 2 :], np.abs(power).astype(np.uint64))
        used[end + 1 :] = used[end]
    chars *= used
    for text, index in specials:
        chars[:, index] = 0
        chars[: len(text), index] = np.frombuffer(text.encode(), np.uint8)[:, None]
    return chars


def _shortest(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The shortest decimal ``(d, e)``, ``d * 10**e``, that rounds to each value.

    Values are the finite, nonzero ones of a float16/float32 array, their signs aside.

    Every decimal strictly between the midpoints to a value's neighbours rounds to it. With
    ``10**g`` at most that interval's width, the nearest multiple of ``10**(g + 1)``, ``10**g`` or
    ``10**(g - 1)`` lies inside it (the last always does, bar float64 slips, which ``_repair``
    catches); the coarsest one inside has the fewest digits.
    """
    magnitude = np.abs(values)
    wide = magnitude.astype(np.float64)
    low = np.nextafter(magnitude, magnitude.dtype.type(0)).astype(np.float64)
    with np.errstate(over="ignore"):  # the largest finite value's neighbour is inf
        high = np.nextafter(magnitude, magnitude.dtype.type(np.inf)).astype(np.float64)
    low = (wide - low) * _INSIDE
    high = (high - wide) * _INSIDE
    np.minimum(high, 2 * low, out=high)  # above the largest finite value (inf): as below
    index = np.floor(np.log10(low + high)).astype(np.intp) + (_FLOAT_OFFSET + 1)
    low = wide - low
    high += wide
    coarse, inside = _nearest(wide, low, high, index)
    index -= 1
    digits, found = _nearest(wide, low, high, index)
    np.copyto(digits, coarse, where=inside)
    exponent = np.where(inside, index + 1, index)
    found |= inside
    rest = np.flatnonzero(~found)  # rare: powers of two, whose interval is lopsided
    if rest.size:
        index = exponent[rest] - 1
        digits[rest], found[rest] = _nearest(wide[rest], low[rest], high[rest], index)
        exponent[rest] = index
    whole = digits.astype(np.uint64)
    exponent -= _FLOAT_OFFSET
    _repair(values, whole, exponent, ~found)
    _drop_trailing_zeros(whole, exponent)
    return whole, exponent


def _nearest(
    wide: np.ndarray, low: np.ndarray, high: np.ndarray, index: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The nearest multiple of ``10**(index - _FLOAT_OFFSET)`` to each value, as digits.

    Also whether it lies in ``[low, high]``.
    """
    step = np.take(_POW10_FLOAT, index)
    digits = np.rint(wide / step)
    value = digits * step
    return digits, (value >= low) & (value <= high)


def _repair(values: np.ndarray, digits: np.ndarray, exponent: np.ndarray, bad: np.ndarray) -> None:
    """Nine significant digits where no candidate fitted.

    Always enough for a float32 (they lie within a tenth of a step of it, far from where the
    reader's rounding could slip).
    """
    for index in np.flatnonzero(bad).tolist():
        mantissa, _, power = f"{float(values[index]):.8e}".partition("e")
        text = mantissa.replace(".", "").lstrip("-")
        digits[index] = int(text)
        exponent[index] = int(power) - (len(text) - 1)


def _drop_trailing_zeros(digits: np.ndarray, exponent: np.ndarray) -> None:
    index = np.flatnonzero(digits == digits // _TEN * _TEN)
    while index.size:
        digits[index] //= _TEN
        exponent[index] += 1
        kept = digits[index]
        index = index[kept == kept // _TEN * _TEN]


def _width(values: np.ndarray) -> int:
    """Digits of the largest of ``values`` (uint64); 1 when there are none."""
    return len(str(int(values.max(initial=0))))


def _count_digits(values: np.ndarray) -> np.ndarray:
    """Digits of each of ``values`` (uint64), at least 1."""
    count = np.ones(values.shape, np.int64)
    for power in _POW10[1 : _width(values)]:
        count += values >= power
    return count


def _digits(out: np.ndarray, values: np.ndarray) -> None:
    """Write ``values`` (uint64) as ASCII digits into the rows of ``out``.

    Right-aligned and zero-padded; the highest digits that do not fit are dropped.
    """
    rest = values.copy()
    quotient = np.empty_like(rest)
    product = np.empty_like(rest)
    for row in range(out.shape[0] - 1, -1, -1):
        np.floor_divide(rest, _TEN, out=quotient)
        np.multiply(quotient, _TEN, out=product)
        np.subtract(rest, product, out=product)
        out[row] = product
        rest, quotient = quotient, rest
    out += _ZERO


def _leading(used: np.ndarray, values: np.ndarray) -> None:
    """Mark the digits that ``_digits`` wrote for ``values``, leading zeros aside."""
    slots = used.shape[0]
    count = _count_digits(values)
    np.greater_equal(np.arange(slots)[:, None], slots - count, out=used)


def _specials(values: np.ndarray, finite: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Infinities and NaNs: each text and the indices of the cells that it stands for."""
    if finite.all():
        return []
    odd = _odd_nans(values)
    nan = np.isnan(values)
    nan[odd] = False
    infinite = np.isinf(values)
    negative = np.signbit(values)
    groups = [
        ("nan", np.flatnonzero(nan)),
        ("inf", np.flatnonzero(infinite & ~negative)),
        ("-inf", np.flatnonzero(infinite & negative)),
    ]
    raw = values.view(f"u{values.dtype.itemsize}")
    groups += [(nan_token(int(raw[i])), np.array([i])) for i in odd.tolist()]
    return [(text, index) for text, index in groups if index.size]


def _odd_nans(values: np.ndarray) -> np.ndarray:
    """Indices of NaNs whose bits differ from numpy's default NaN of the dtype."""
    raw = values.view(f"u{values.dtype.itemsize}")
    default: Any = np.array(np.nan, values.dtype).view(raw.dtype)
    return np.flatnonzero(np.isnan(values) & (raw != default))
