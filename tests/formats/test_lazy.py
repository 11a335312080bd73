"""LazyRows: slices equal numpy's, sequential slices are read ahead, errors surface.
RowSpill: rows appended chunk by chunk read back by any range."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.formats.lazy import LazyRows, RowSpill, row_chunks


def lazy_over(array: np.ndarray, calls: list[tuple[int, int]]) -> LazyRows:
    def read(start: int, stop: int) -> np.ndarray:
        calls.append((start, stop))
        return array[start:stop].copy()

    return LazyRows(array.shape, array.dtype, read)


@settings(max_examples=50, deadline=None)
@given(
    st.integers(0, 40), st.lists(st.tuples(st.integers(-50, 50), st.integers(-50, 50)), max_size=8)
)
def test_slices_match_numpy(rows: int, slices: list[tuple[int, int]]) -> None:
    array = np.arange(rows * 6, dtype=np.float32).reshape(rows, 2, 3)
    lazy = lazy_over(array, [])
    for a, b in slices:
        np.testing.assert_array_equal(lazy[a:b], array[a:b])
    np.testing.assert_array_equal(np.asarray(lazy), array)
    np.testing.assert_array_equal(lazy[::2], array[::2])
    assert (len(lazy), lazy.ndim, lazy.nbytes) == (rows, 3, array.nbytes)


def test_sequential_slices_are_read_ahead_once() -> None:
    array = np.arange(100).reshape(100, 1)
    calls: list[tuple[int, int]] = []
    lazy = lazy_over(array, calls)
    for start in range(0, 100, 30):
        np.testing.assert_array_equal(lazy[start : start + 30], array[start : start + 30])
    assert sorted(calls) == [(0, 30), (30, 60), (60, 90), (90, 100)]


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 30), st.integers(-40, 40), st.integers(-40, 40), st.integers(1, 7))
def test_a_window_reads_only_its_rows_and_only_when_sliced(
    rows: int, start: int, stop: int, step: int
) -> None:
    array = np.arange(rows * 2, dtype=np.int16).reshape(rows, 2)
    calls: list[tuple[int, int]] = []
    window = lazy_over(array, calls).window(start, stop)
    assert calls == []  # nothing read yet: a folder's shard is read as it is written
    part = array[start:stop]
    assert window.shape == part.shape and window.dtype == part.dtype
    for first in range(0, len(part), step):
        np.testing.assert_array_equal(window[first : first + step], part[first : first + step])
    np.testing.assert_array_equal(np.asarray(window), part)
    first = slice(start, stop).indices(rows)[0]
    assert all(first <= a <= b <= first + len(part) for a, b in calls)


def test_a_window_keeps_the_file_offset_of_its_first_row() -> None:
    lazy = LazyRows((10, 2, 3), np.dtype(np.float32), lambda a, b: np.zeros(0), file_offset=128)
    assert lazy.window(4, 9).file_offset == 128 + 4 * 2 * 3 * 4
    assert (
        LazyRows((3, 1), np.dtype(np.uint8), lambda a, b: np.zeros(0)).window(1, 2).file_offset
        is None
    )


def test_lazy_rows_over_lazy_rows_never_wait_on_their_own_read_ahead() -> None:
    """A LazyRows read through another (convert's progress count over a file's rows), the
    same slice asked for twice: the outer read-ahead, running on the one read-ahead thread,
    met the inner read-ahead queued behind it and waited for it forever (a Pong convert
    hung so)."""
    array = np.arange(600, dtype=np.int64).reshape(100, 6)
    inner = lazy_over(array, [])
    outer = LazyRows(array.shape, array.dtype, lambda a, b: inner[a:b])
    got: list[np.ndarray] = []

    def read_twice_per_slice() -> None:
        for start in range(0, 100, 10):
            got.append(outer[start : start + 10])
            got.append(outer[start : start + 10])  # flags read for bookkeeping, then stored

    reader = threading.Thread(target=read_twice_per_slice, daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), "reading hung"
    np.testing.assert_array_equal(np.concatenate(got[::2]), array)
    np.testing.assert_array_equal(np.concatenate(got[1::2]), array)


def test_errors_of_a_read_ahead_surface_when_the_rows_are_asked_for() -> None:
    def read(start: int, stop: int) -> np.ndarray:
        if start >= 10:
            raise OSError("disk gone")
        return np.zeros((stop - start, 1))

    lazy = LazyRows((20, 1), np.dtype(float), read)
    lazy[0:10]
    with pytest.raises(OSError, match="disk gone"):
        lazy[10:20]


def test_row_chunks_cover_every_row() -> None:
    array = np.zeros((1000, 4, 256), dtype=np.float64)
    chunks = row_chunks(array, chunk_bytes=100_000)
    assert chunks.step == 100_000 // (4 * 256 * 8) and chunks[-1] + chunks.step >= 1000


@settings(max_examples=40, deadline=None)
@given(
    chunks=st.lists(st.integers(0, 7), max_size=6),
    ranges=st.lists(st.tuples(st.integers(0, 45), st.integers(0, 45)), max_size=6),
)
def test_row_spill_reads_any_range_across_chunks(
    tmp_path_factory: pytest.TempPathFactory, chunks: list[int], ranges: list[tuple[int, int]]
) -> None:
    folder = tmp_path_factory.mktemp("spill")
    spill = RowSpill([3, 0, 1], folder)
    whole = [np.empty((0, 3), np.float32), np.empty((0, 0), np.int8), np.empty((0, 1), bool)]
    for index, count in enumerate(chunks):
        rows = [
            np.arange(count * 3, dtype=np.float32).reshape(count, 3) + index,
            np.empty((count, 0), np.int8),
            np.arange(count).reshape(count, 1) % 2 == 0,
        ]
        spill.append(rows)
        whole = [np.concatenate([w, r]) for w, r in zip(whole, rows, strict=True)]
    assert spill.rows == sum(chunks) and list(folder.iterdir()) == []  # an unnamed file
    for start, stop in [(0, spill.rows), *ranges]:
        for group, expected in enumerate(whole):
            got = spill.read(group, start, stop)
            if len(expected[start:stop]):
                assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected[start:stop])
    spill.close()
    with pytest.raises(ValueError):
        spill.read(0, 0, 1)


def test_row_spill_promotes_chunks_of_different_dtypes(tmp_path: Path) -> None:
    spill = RowSpill([1], tmp_path)
    spill.append([np.array([[2**53 + 1]])])  # int64
    spill.append([np.array([[0.5]])])
    got = spill.read(0, 0, 2)
    assert got.dtype == np.float64 and got.tolist() == [[float(2**53 + 1)], [0.5]]
    assert spill.read(0, 1, 2).dtype == np.float64
    spill.close()


def test_load_maps_stored_npz_members_and_keeps_writes_private(tmp_path: Path) -> None:
    import mmap

    from expcli import load, save
    from expcli.formats.dataset import Dataset
    from expcli.spec import CircularState

    rng = np.random.default_rng(0)
    tensors = {
        "observations": rng.random((50, 4, 3), dtype=np.float32),
        "actions": rng.integers(0, 5, (50, 4, 1)).astype(">i8"),  # non-native byte order
        "terminated": rng.random((50, 4, 1)) < 0.1,
    }
    path = save(Dataset(tensors, CircularState(10, 0, True)), tmp_path / "d.npz")
    compressed = tmp_path / "c.npz"
    np.savez_compressed(compressed, **{k: np.asarray(v) for k, v in tensors.items()})
    before = path.read_bytes()
    dataset = load(path)
    for name, array in tensors.items():
        loaded = dataset.tensors[name]
        assert type(loaded) is np.ndarray and loaded.dtype == array.dtype.newbyteorder("=")
        mapped = isinstance(loaded.base, (np.memmap, mmap.mmap))
        assert mapped == (name != "actions"), name  # mapped, not read; other orders: read
        np.testing.assert_array_equal(loaded, array)
        loaded[...] = 0  # copy-on-write: allowed, and the file is untouched
    assert path.read_bytes() == before
    np.testing.assert_array_equal(load(path).tensors["observations"], tensors["observations"])
    for name, array in load(compressed).tensors.items():  # compressed members: read whole
        assert not isinstance(array.base, np.memmap)
        np.testing.assert_array_equal(array, tensors[name])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("kind", ["lazy rows", "parquet"])
def test_a_child_forked_mid_read_ahead_reads_on_without_waiting(tmp_path: Path, kind: str) -> None:
    """A DataLoader worker forked while the parent reads in order: the read-ahead (and
    Parquet's decode-ahead) thread is not in the child, so it must not wait for it."""
    gate, parent = threading.Event(), os.getpid()

    def slow(start: int, stop: int) -> np.ndarray:
        if start >= 4 and os.getpid() == parent:
            gate.wait(5)  # the parent's read-ahead is under way at the fork
        return np.arange(start, stop, dtype=np.int64)[:, None]

    if kind == "lazy rows":
        rows = LazyRows((12, 1), np.dtype(np.int64), slow)
        expected = np.arange(12, dtype=np.int64)[:, None]
        close = lambda: None  # noqa: E731
    else:
        from expcli.formats import Dataset, parquet_format, write_dataset
        from expcli.spec import CircularState

        data = np.arange(12 * 2, dtype=np.int64).reshape(12, 2, 1)
        old = parquet_format.GROUP_BYTES
        parquet_format.GROUP_BYTES = 100  # a group of a few rows
        try:
            path = write_dataset(
                Dataset({"x": data}, CircularState(0, 0, True)), tmp_path / "x.parquet"
            )
        finally:
            parquet_format.GROUP_BYTES = old
        lazy, close = parquet_format.open_lazy(path)
        rows, expected = lazy.tensors["x"], data
    assert np.array_equal(rows[0:2], expected[0:2])
    assert np.array_equal(rows[2:4], expected[2:4])  # in order: the next is read ahead
    pid = os.fork()
    if pid == 0:  # the child: reads on, and must not hang on the parent's thread
        ok = all(np.array_equal(rows[a : a + 2], expected[a : a + 2]) for a in range(4, 12, 2))
        os._exit(0 if ok else 1)
    gate.set()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung on the parent's read-ahead")
    close()
    assert os.waitstatus_to_exitcode(status) == 0
