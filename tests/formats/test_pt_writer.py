"""The ``.pt`` writer: torch.save's archive, byte for byte, streamed slice of rows by slice."""

from __future__ import annotations

import functools
import io
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from expcli.conversion import convert
from expcli.formats import Dataset, write_dataset
from expcli.formats import pt_format as pt_format_module
from expcli.formats._pt_archive import PtArchiveWriter, local_header
from expcli.formats._pt_pickle import STORAGE_TYPES, StoredTensor, dict_pickle
from expcli.formats.lazy import LazyRows, row_chunks
from expcli.spec import METADATA_KEY, CircularState
from tests.formats.test_roundtrip import DTYPES, arrays

MAX32 = 0xFFFFFFFF
# Strings torch.save pickles itself ("cpu", storage keys "0", "1", ...) and the tensor names
# may be one object, which the pickler then refers to instead of repeating: valid, other bytes.
RESERVED = {"cpu", "storage", *map(str, range(10))}
NAMES = st.text(min_size=2, max_size=12).filter(lambda name: name not in RESERVED)


@st.composite
def tensor_dicts(draw: st.DrawFn) -> dict[str, np.ndarray]:
    """Tensors of any supported dtype and shape (0-d and empty included), any values."""
    names = draw(st.lists(NAMES | st.sampled_from(["infos/lives", "a/b/c"]), max_size=5))
    result = {}
    for name in dict.fromkeys(names):
        shape = tuple(draw(st.lists(st.integers(0, 3), max_size=4)))
        result[name] = draw(arrays(draw(st.sampled_from(DTYPES)), shape))
    return result


def torch_tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor laid out as torch lays out a new one (strides of an empty one included)."""
    source = torch.from_numpy(array.copy())
    return torch.empty(array.shape, dtype=source.dtype).copy_(source)


def torch_saved(payload: dict[str, np.ndarray | str]) -> bytes:
    buffer = io.BytesIO()
    torch.save(
        {k: v if isinstance(v, str) else torch_tensor(v) for k, v in payload.items()}, buffer
    )
    return buffer.getvalue()


def serialization_id(archive: bytes) -> str:
    return zipfile.ZipFile(io.BytesIO(archive)).read("archive/.data/serialization_id").decode()


def write_archive(
    file: Any, payload: dict[str, np.ndarray | str], chunk: int, serialization: str | None
) -> None:
    """Our archive of ``payload``, each tensor written ``chunk`` bytes at a time."""
    items = [
        (k, v if isinstance(v, str) else StoredTensor(v.dtype, v.shape)) for k, v in payload.items()
    ]
    writer = PtArchiveWriter(file)
    writer.write_pickle(dict_pickle(items))
    tensors = [v for v in payload.values() if not isinstance(v, str)]
    for key, array in enumerate(tensors):
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        with writer.storage(str(key), data.nbytes) as record:
            for start in range(0, max(data.nbytes, 1), chunk):
                record.write(data[start : start + chunk].data)
    writer.close(serialization)


@settings(max_examples=80, deadline=None)
@given(tensors=tensor_dicts(), text=st.text(), chunk=st.integers(1, 100))
def test_same_bytes_as_torch_save(tensors: dict[str, np.ndarray], text: str, chunk: int) -> None:
    assume(text not in {*tensors, *RESERVED})
    payload: dict[str, np.ndarray | str] = {**tensors, METADATA_KEY: text}
    theirs = torch_saved(payload)
    ours = io.BytesIO()
    write_archive(ours, payload, chunk, serialization_id(theirs))
    assert ours.getvalue() == theirs


def lazy(array: np.ndarray) -> LazyRows:
    return LazyRows(array.shape, array.dtype, lambda start, stop: array[start:stop].copy())


@st.composite
def datasets(draw: st.DrawFn) -> Dataset:
    rows, envs = draw(st.integers(0, 6)), draw(st.integers(0, 3))
    tensors: dict[str, Any] = {}
    for name in draw(st.lists(st.text(min_size=1, max_size=8), max_size=4, unique=True)):
        feature = draw(st.lists(st.integers(0, 3), max_size=2))
        array = draw(arrays(draw(st.sampled_from(DTYPES)), (rows, envs, *feature)))
        if draw(st.booleans()):  # big-endian sources are written little-endian
            array = array.astype(array.dtype.newbyteorder(">"))
        tensors[name] = lazy(array) if draw(st.booleans()) else array
    return Dataset(tensors, CircularState(filled=True), {"created": "now"})


@settings(max_examples=60, deadline=None)
@given(dataset=datasets(), chunk_bytes=st.integers(1, 64))
def test_torch_load_reads_what_the_writer_streams(dataset: Dataset, chunk_bytes: int) -> None:
    from torch.utils.serialization import config

    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        chunks = functools.partial(row_chunks, chunk_bytes=chunk_bytes)
        patch.setattr(pt_format_module, "row_chunks", chunks)  # many slices per tensor
        path = write_dataset(dataset, Path(folder) / "out.pt")
        patch.setenv("TORCH_SERIALIZATION_DEBUG", "1")  # torch checks offsets it computes
        for mmap, computed_offsets in [(False, False), (True, False), (True, True)]:
            offsets = {"load.calculate_storage_offsets": computed_offsets}
            with config.patch(offsets):  # type: ignore[attr-defined]
                loaded = torch.load(path, weights_only=True, mmap=mmap)
            assert list(loaded) == [*sorted(dataset.tensors), METADATA_KEY]
            for name, want in dataset.tensors.items():
                expected = np.asarray(want)
                got = loaded[name]
                assert got.is_contiguous() and tuple(got.shape) == expected.shape
                assert got.numpy().dtype == expected.dtype.newbyteorder("=")
                assert got.numpy().tobytes() == expected.astype(got.numpy().dtype).tobytes()
            assert '"schema": "expcli/1"' in loaded[METADATA_KEY]


@settings(max_examples=200, deadline=None)
@given(
    offset=st.integers(0, 2**34) | st.integers(MAX32 - 200, MAX32 + 200),
    size=st.integers(0, 2**34) | st.integers(MAX32 - 2, MAX32 + 2),
    key=st.integers(0, 100_000),
)
def test_data_starts_where_torch_computes_it(
    offset: int, size: int, key: int, torch_reader: Any
) -> None:
    name = f"data/{key}"
    header = local_header(f"archive/{name}".encode(), offset, size)
    assert offset + len(header) == torch_reader.get_record_offset_no_read(offset, name, size, 64)
    assert (offset + len(header)) % 64 == 0


@pytest.fixture(scope="module")
def torch_reader() -> Iterator[Any]:
    """A reader of any archive: computing offsets reads nothing of it but its name."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "any.pt"
        with open(path, "wb") as file:
            write_archive(file, {"x": np.zeros(1)}, 8, None)
        yield torch._C.PyTorchFileReader(str(path))


class Sink:
    """A file that keeps the small writes (headers) and only counts the big ones (data);
    contiguous writes of the same kind make one part."""

    def __init__(self) -> None:
        self.size = 0
        self.parts: list[bytes | int] = []

    def write(self, data: Any) -> int:
        count = memoryview(data).nbytes
        last = self.parts.pop() if self.parts else b""
        if count >= 2**20:
            self.parts += [last, count] if isinstance(last, bytes) else [last + count]
        else:
            small = bytes(memoryview(data).cast("B"))
            self.parts += [last, small] if isinstance(last, int) else [last + small]
        self.size += count
        return count

    def flush(self) -> None:
        pass


@pytest.mark.slow
def test_zip64_archive_same_as_torch_save() -> None:
    """A storage over 4 GiB, and records past 4 GiB: sizes and offsets in zip64 fields."""
    zeros = np.zeros(257 * 2**24, np.uint8)  # never touched: neither memory nor disk
    payload: dict[str, Any] = {"a": np.arange(3, dtype=np.float32), "big": zeros}
    payload |= {"c": np.ones(5, np.int16), "empty": np.zeros(0), METADATA_KEY: "metadata"}
    theirs = Sink()
    tensors = {  # "big" shares the untouched zeros (a copy took 30 s and 4 GiB)
        k: v if isinstance(v, str) else torch.from_numpy(v) if k == "big" else torch_tensor(v)
        for k, v in payload.items()
    }
    torch.save(tensors, theirs)  # type: ignore[arg-type]
    closing = theirs.parts[-1]
    assert isinstance(closing, bytes)
    found = re.search(rb"(\d{40})PK\x07\x08", closing)  # the id, then its data descriptor
    assert found is not None
    ours = Sink()
    write_archive(ours, payload, 2**24, found.group(1).decode())
    assert ours.size == theirs.size > 2**32 + 2**20
    assert ours.parts == theirs.parts


@pytest.mark.parametrize("dtype", DTYPES)
def test_storage_types_are_torchs(dtype: str) -> None:
    torch_dtype = torch.from_numpy(np.zeros(1, dtype)).dtype
    storage = torch.storage.TypedStorage(dtype=torch_dtype, _internal=True)  # type: ignore[no-untyped-call]
    assert STORAGE_TYPES[dtype] == storage._pickle_storage_type()  # type: ignore[no-untyped-call]


def test_a_record_must_get_its_declared_size() -> None:
    writer = PtArchiveWriter(io.BytesIO())
    with pytest.raises(ValueError, match="data/0: 3 bytes written, 4 declared"):
        with writer.storage("0", 4) as record:
            record.write(b"abc")


def test_writing_pt_does_not_import_torch(tmp_path: Path) -> None:
    script = (
        "import sys, numpy as np\n"
        "from expcli.formats import Dataset, write_dataset\n"
        f"write_dataset(Dataset({{'x': np.ones((3, 2))}}), {str(tmp_path / 'x.pt')!r})\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    assert torch.load(tmp_path / "x.pt", weights_only=True)["x"].sum() == 6


def test_skrl_loads_a_streamed_conversion(tmp_path: Path) -> None:
    memories = pytest.importorskip("skrl.memories.torch")
    rng = np.random.default_rng(0)
    tensors: dict[str, np.ndarray] = {
        "observations": rng.standard_normal((64, 4, 3), dtype=np.float32),
        "actions": rng.integers(0, 5, (64, 4, 1)),
        "terminated": rng.random((64, 4, 1)) < 0.1,
    }
    write_dataset(Dataset(tensors, CircularState(filled=True)), tmp_path / "in.npz")
    with pytest.MonkeyPatch.context() as patch:  # several slices per tensor
        patch.setattr(
            pt_format_module, "row_chunks", functools.partial(row_chunks, chunk_bytes=100)
        )
        convert(tmp_path / "in.npz", tmp_path / "out.pt", verify=True)
    memory = memories.RandomMemory(memory_size=64, num_envs=4, device="cpu")
    for name, array in tensors.items():
        memory.create_tensor(name, size=array.shape[-1], dtype=torch.from_numpy(array).dtype)
    memory.load(str(tmp_path / "out.pt"))
    for name, array in tensors.items():
        assert torch.equal(getattr(memory, f"_tensor_{name}"), torch.from_numpy(array))
