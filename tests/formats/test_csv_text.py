"""CSV cell text: every value reads back bit for bit; floats are as short as numpy's shortest
repr (a digit more in rare ties), float64 and integers are exactly Python's repr and str."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from expcli.formats._csv_text import encode_rows


def cells(values: np.ndarray) -> list[str]:
    """The text of each value, written as a one-column CSV."""
    return encode_rows([values.reshape(-1, 1)]).decode().split("\n")[:-1]


def read_back(texts: list[str], dtype: np.dtype) -> np.ndarray:
    """What the CSV reader does: float64 parse then a cast; NaN payloads from their bits."""
    unsigned = f"u{dtype.itemsize}"
    out = np.empty(len(texts), dtype)
    for index, text in enumerate(texts):
        if text.startswith("nan:"):
            out[index : index + 1].view(unsigned)[0] = int(text[4:], 16)
        else:
            out[index] = np.float64(float(text)).astype(dtype)
    return out


def numpy_shortest(value: np.floating) -> str:
    """numpy's shortest round-trip digits for ``value``, in the notation of Python's repr."""
    return repr(float(np.format_float_scientific(value, unique=True)))


def assert_lossless_and_short(values: np.ndarray) -> list[tuple[str, str]]:
    """Check the texts read back; returns (ours, numpy's) where they differ."""
    texts = cells(values)
    unsigned = f"u{values.dtype.itemsize}"
    back = read_back(texts, values.dtype)
    assert back.view(unsigned).tolist() == values.view(unsigned).tolist()
    finite = np.isfinite(values)
    pairs = [(t, numpy_shortest(v)) for t, v, f in zip(texts, values, finite, strict=True) if f]
    assert all(len(ours) <= len(ref) + 1 for ours, ref in pairs)
    return [(ours, ref) for ours, ref in pairs if ours != ref]


def test_every_float16_reads_back_and_is_shortest() -> None:
    values = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    differ = assert_lossless_and_short(values)
    # Where a decimal lies on the midpoint between two floats, it is left out (one more digit)
    assert len(differ) < 0.02 * len(values)
    assert sum(len(ours) > len(ref) for ours, ref in differ) < 0.001 * len(values)


def test_float32_edges_read_back() -> None:
    powers = np.ldexp(np.float32(1), np.arange(-149, 128)).astype(np.float32)
    near = [np.nextafter(powers, np.float32(0)), powers, np.nextafter(powers, np.float32(np.inf))]
    info = np.finfo(np.float32)
    extremes = np.array([info.max, info.tiny, info.smallest_subnormal, 0.1, 1 / 3, 1e16, 1e-5])
    values = np.concatenate([*near, extremes.astype(np.float32)])
    values = np.concatenate([values, -values])
    assert_lossless_and_short(values[np.isfinite(values)])


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["float16", "float32"]).flatmap(
        lambda dtype: st.one_of(
            hnp.arrays(dtype, st.integers(1, 40)),
            st.binary(min_size=4, max_size=160).map(
                lambda raw: np.frombuffer(raw[: len(raw) // 4 * 4], dtype)
            ),
        )
    )
)
def test_any_float16_or_float32_reads_back_bit_for_bit(values: np.ndarray) -> None:
    assert_lossless_and_short(values)


def test_specials_are_plain_words_or_raw_bits() -> None:
    values = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
    odd = np.array([0x7FC00001, 0xFFC00000], np.uint32).view(np.float32)
    assert cells(np.concatenate([values, odd])) == [
        "0.0",
        "-0.0",
        "inf",
        "-inf",
        "nan",
        "nan:0x7fc00001",
        "nan:0xffc00000",
    ]


@settings(max_examples=100, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 30)))
def test_float64_is_pythons_repr(values: np.ndarray) -> None:
    default = np.isnan(values) & (values.view(np.uint64) == np.float64(np.nan).view(np.uint64))
    texts = cells(values)
    for text, value, plain in zip(texts, values.tolist(), default | ~np.isnan(values), strict=True):
        assert text == repr(value) if plain else text.startswith("nan:0x")
    back = read_back(texts, np.dtype(np.float64))
    assert back.view(np.uint64).tolist() == values.view(np.uint64).tolist()


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
def test_integers_are_pythons_str(dtype: str) -> None:
    info = np.iinfo(dtype)
    values = np.array([info.min, info.max, 0, 1, 9, 10, 99, 100], dtype=np.int64)
    values = values[(values >= info.min) & (values <= info.max)].astype(dtype)
    assert cells(values) == [str(v) for v in values.tolist()]


def test_rows_are_what_the_csv_module_writes_for_the_same_cells() -> None:
    rng = np.random.default_rng(0)
    blocks = [
        rng.integers(-1000, 1000, (50, 2)),
        rng.random((50, 1)) < 0.5,
        rng.standard_normal((50, 3)),
        np.empty((50, 0), np.float32),
        np.arange(50, dtype=np.uint8).reshape(50, 1),
    ]
    expected = io.StringIO()
    writer = csv.writer(expected, lineterminator="\n")
    writer.writerows(
        [cell for block in blocks for cell in block[row].tolist()] for row in range(50)
    )
    assert encode_rows(blocks).decode() == expected.getvalue()
    assert encode_rows([np.empty((3, 0))]) == b"\n\n\n"
    assert encode_rows([np.empty((0, 4), np.float32)]) == b""
