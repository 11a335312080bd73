"""Frames once (``formats.frames``): next observations stored once read back bit for bit.

The reference is numpy: a dataset built here, its ``next_observations`` the observations one
row on with some cells changed (episode ends, an env whose next observation is not the
reset's, NaN payloads and -0.0 that equal the next row's as floats but not as bytes). Every
read of the once form (``load``, ``open_lazy`` slices, ``take``, ``take_cells``, a mapped
replay storage, conversions) must give the same bytes as the full form.
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expcli import convert, load, save
from expcli.errors import FormatError, SchemaError
from expcli.formats import open_lazy, write_dataset
from expcli.formats.block_cache import BlockCache
from expcli.formats.dataset import Dataset
from expcli.formats.frames import PREFIX, ByCells, DerivedRows, kept_cells
from expcli.spec import FRAMES_SCHEMA, SCHEMA, CircularState
from tests.format_catalogue import (
    LAYOUT_FILES,
    LAYOUT_FOLDERS,
    SHARD_FORMATS,
    frames_once,
    once_forms,
    suffix_of,
)

# Writing lossy datasets in foreign layouts on purpose: their one-line warning of what the
# layout does not keep is tested in tests/formats/layouts/test_layout_losses.py.
pytestmark = pytest.mark.filterwarnings("ignore:.*layout does not keep:UserWarning")

SUFFIXES = tuple(suffix_of(fmt) for fmt in frames_once())
"""Every file format that stores next observations once (not CSV: text, every cell)."""


def same_bytes(actual: object, expected: np.ndarray) -> bool:
    """Bit-for-bit equality: dtype, shape and bytes (NaN payloads and -0.0 included)."""
    array = np.asarray(actual)
    return bool(
        array.dtype == expected.dtype
        and array.shape == expected.shape
        and array.tobytes() == expected.tobytes()
    )


def frame_dataset(
    rng: np.random.Generator,
    size: int,
    envs: int,
    changed: float,
    *,
    leaves: bool = False,
    state: CircularState | None = None,
) -> Dataset:
    """Observations of 64-byte cells (uint8 frames, float32 vectors with NaN and -0.0).

    ``next_observations`` is the observations one row on (row 0 after the last), with a
    share ``changed`` of cells replaced, and the last row always new; floats changed only
    in their bits (another NaN payload, -0.0 for 0.0) count as changed.
    """
    frames = rng.integers(0, 256, (size, envs, 8, 8), dtype=np.uint8)
    vectors = rng.standard_normal((size, envs, 16)).astype(np.float32)
    vectors[rng.random(vectors.shape) < 0.1] = np.nan
    vectors[rng.random(vectors.shape) < 0.1] = 0.0
    tensors: dict[str, np.ndarray] = {}
    sources = {"pixels": frames, "vector": vectors} if leaves else {"": frames}
    for key, observations in sources.items():
        following = np.roll(observations, -1, axis=0).copy()
        mask = rng.random((size, envs)) < changed
        mask[-1] = True
        if following.dtype == np.float32:
            bits = following.view(np.uint32)
            bits[mask] ^= np.uint32(0x80000000)  # 0.0 -> -0.0, NaN keeps NaN, others flip
            nan = np.isnan(following) & mask[..., None]
            bits[nan] = np.uint32(0x7FC00001)  # another NaN payload
        else:
            following[mask] = rng.integers(0, 256, following[mask].shape, dtype=np.uint8)
        suffix = f"/{key}" if key else ""
        tensors[f"observations{suffix}"] = observations
        tensors[f"next_observations{suffix}"] = following
    if leaves:
        small = rng.standard_normal((size, envs, 2)).astype(np.float32)  # 8-byte cells: full
        tensors["observations/pos"] = small
        tensors["next_observations/pos"] = np.roll(small, -1, axis=0).copy()
    tensors["rewards"] = rng.standard_normal((size, envs)).astype(np.float32)
    tensors["terminated"] = rng.random((size, envs)) < 0.2
    return Dataset(tensors, state or CircularState(0, 0, filled=True), {"env_id": "Frames-v0"})


def written(dataset: Dataset, folder: Path, suffix: str, frames: str) -> Path:
    path = folder / f"data-{frames}{suffix}"
    write_dataset(dataset, path, frames=frames)
    return path


def check_lazy(
    path: Path, dataset: Dataset, rng: np.random.Generator, cache: BlockCache | None = None
) -> None:
    """``open_lazy``: whole tensors, slices, ``take`` and ``take_cells`` as numpy's.

    ``cache``: the block cache the tensors read through (a sampler's), if any.
    """
    lazy, close = open_lazy(path, cache=cache)
    try:
        for name, expected in dataset.tensors.items():
            got = lazy.tensors[name]
            assert same_bytes(got, expected), name
            size, envs = expected.shape[:2]
            start = int(rng.integers(0, size))
            stop = int(rng.integers(start, size + 1))
            assert same_bytes(got[start:stop], expected[start:stop]), name
            if not hasattr(got, "take_cells"):
                continue
            rows = rng.integers(-size, size, (3, 2))
            assert same_bytes(got.take(rows), expected[rows]), name
            cells = rng.integers(0, size * envs, (5, 3))
            flat = expected.reshape(size * envs, *expected.shape[2:])
            assert same_bytes(got.take_cells(cells), flat[cells]), name
    finally:
        close()


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    size=st.integers(1, 7),
    envs=st.integers(1, 3),
    changed=st.sampled_from([0.0, 0.1, 0.5]),
    leaves=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    wrapped=st.booleans(),
)
def test_once_reads_back_as_the_full_form(
    size: int, envs: int, changed: float, leaves: bool, seed: int, wrapped: bool
) -> None:
    rng = np.random.default_rng(seed)
    state = CircularState(int(rng.integers(0, size)), 0, filled=True) if wrapped else None
    dataset = frame_dataset(rng, size, envs, changed, leaves=leaves, state=state)
    with tempfile.TemporaryDirectory() as folder:
        for suffix in SUFFIXES:
            for frames in ("once", "full"):
                path = written(dataset, Path(folder), suffix, frames)
                back = load(path)
                assert back.state == dataset.state
                assert back.metadata["env_id"] == "Frames-v0"
                assert sorted(back.tensors) == sorted(dataset.tensors)
                for name, expected in dataset.tensors.items():
                    assert same_bytes(back.tensors[name], expected), (suffix, frames, name)
                check_lazy(path, dataset, rng)


def test_the_once_form_stores_kept_cells_only(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    dataset = frame_dataset(rng, 50, 4, 0.05)
    once = written(dataset, tmp_path, ".npz", "once")
    full = written(dataset, tmp_path, ".npz", "full")
    with zipfile.ZipFile(once) as archive:
        names = sorted(archive.namelist())
    assert "next_observations.npy" not in names
    assert f"{PREFIX}next_observations/kept.npy" in names
    expected = np.flatnonzero(
        (dataset.tensors["next_observations"] != np.roll(dataset.tensors["observations"], -1, 0))
        .reshape(50, 4, -1)
        .any(axis=2)
    )
    with np.load(once) as members:
        assert np.array_equal(members[f"{PREFIX}next_observations/cells"], expected)
        assert str(members["__expcli__"]).count(FRAMES_SCHEMA) == 1
    saved = 50 * 4 * 64 - len(expected) * (64 + 8)
    assert abs(full.stat().st_size - once.stat().st_size - saved) < 1024  # members' headers


def test_lazy_reads_give_derived_rows(tmp_path: Path) -> None:
    """Gathered cell by cell (the sparse form: rebuilt from the kept cells), never mapped."""
    dataset = frame_dataset(np.random.default_rng(1), 9, 2, 0.2)
    for fmt, form in once_forms().items():
        lazy, close = open_lazy(written(dataset, tmp_path, suffix_of(fmt), "once"))
        try:
            rows = lazy.tensors["next_observations"]
            assert isinstance(rows, DerivedRows if form == "sparse" else ByCells), fmt
            assert rows.file_offset is None
        finally:
            close()


def test_small_cells_stay_full(tmp_path: Path) -> None:
    """CartPole's 16-byte observations are stored whole: the file is schema v1."""
    observations = np.random.default_rng(2).standard_normal((20, 2, 4)).astype(np.float32)
    dataset = Dataset(
        {"observations": observations, "next_observations": np.roll(observations, -1, 0)}
    )
    path = written(dataset, tmp_path, ".npz", "once")
    with np.load(path) as members:
        assert "next_observations" in members.files
        assert f'"schema": "{SCHEMA}"' in str(members["__expcli__"])


def test_no_saving_keeps_the_full_form(tmp_path: Path) -> None:
    """Every cell differing: the sparse form would be larger, so the tensor stays whole."""
    dataset = frame_dataset(np.random.default_rng(3), 6, 2, 1.0)
    with np.load(written(dataset, tmp_path, ".npz", "once")) as members:
        assert "next_observations" in members.files


@pytest.mark.parametrize(
    "chain", [(*SUFFIXES, SUFFIXES[0]), (*SUFFIXES[::-1], SUFFIXES[-1])], ids=["on", "back"]
)
def test_convert_between_formats_bit_for_bit(tmp_path: Path, chain: tuple[str, ...]) -> None:
    dataset = frame_dataset(np.random.default_rng(4), 30, 3, 0.1, leaves=True)
    source = written(dataset, tmp_path, chain[0], "once")
    for step, suffix in enumerate(chain[1:]):
        target = tmp_path / f"step{step}{suffix}"
        convert(source, target, frames="once" if step % 2 else "full", verify=True)
        source = target
    back = load(source)
    for name, expected in dataset.tensors.items():
        assert same_bytes(back.tensors[name], expected), name


def test_save_verify_reads_the_derived_tensor(tmp_path: Path) -> None:
    dataset = frame_dataset(np.random.default_rng(5), 12, 2, 0.1)
    path = save(dataset, tmp_path / "checked.h5", verify=True, compression="lzf")
    assert same_bytes(load(path).tensors["next_observations"], dataset.tensors["next_observations"])


def test_csv_of_a_once_file_holds_every_next_observation(tmp_path: Path) -> None:
    """A layout that needs the whole tensor gets it from the derived one."""
    dataset = frame_dataset(np.random.default_rng(6), 8, 2, 0.1)
    source = written(dataset, tmp_path, ".npz", "once")
    convert(source, tmp_path / "rows.csv")
    back = load(tmp_path / "rows.csv")
    assert same_bytes(back.tensors["next_observations"], dataset.tensors["next_observations"])


def test_mapped_replay_storage_gathers_the_same_cells(tmp_path: Path) -> None:
    from expcli.formats.row_gather import gather_flat
    from expcli.replay.storages import DatasetStorage

    dataset = frame_dataset(np.random.default_rng(7), 40, 4, 0.1)
    storage = DatasetStorage.open(written(dataset, tmp_path, ".npz", "once"))
    index = np.random.default_rng(8).integers(0, 160, 64)
    expected = dataset.tensors["next_observations"].reshape(160, 8, 8)[index]
    got = gather_flat(storage.arrays()["next_observations"], index, 4)
    assert same_bytes(got, expected)


def test_kept_cells_compare_bytes_not_values() -> None:
    observations = np.zeros((2, 1, 16), np.float32)
    following = observations.copy()
    following[0, 0, 3] = -0.0  # equal as a float, not as bytes
    observations[0, 0, 0] = following[1, 0, 0] = np.nan  # same payload: equal bytes
    assert kept_cells(following, observations).tolist() == [0]


def test_kept_cells_stop_reading_past_the_limit() -> None:
    """A tensor whose cells all differ (an env that mutates its buffer) is not indexed whole:
    the comparison stops at the first slice holding more cells than are worth keeping."""
    shape = (12, 1, 4 << 20)  # 4 MiB rows: a 16 MiB slice holds 4
    reads = []

    class Counted:
        def __init__(self, value: int) -> None:
            self.array = np.broadcast_to(np.uint8(value), shape)
            self.shape, self.dtype = shape, self.array.dtype

        def __len__(self) -> int:
            return shape[0]

        def __getitem__(self, key: slice) -> np.ndarray:
            reads.append(key)
            return self.array[key]

    following, observations = Counted(1), Counted(0)
    assert kept_cells(following, observations, limit=3) is None
    assert len(reads) == 2  # one slice of each, not three
    assert kept_cells(following, observations, limit=12).tolist() == list(range(12))


def test_a_reader_of_schema_v1_alone_refuses_the_once_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a reader written before the once form does: refuse it by its schema."""
    from expcli.formats import dataset as dataset_module

    path = written(frame_dataset(np.random.default_rng(9), 5, 1, 0.0), tmp_path, ".pt", "once")
    monkeypatch.setattr(dataset_module, "FRAMES_SCHEMA", SCHEMA)
    with pytest.raises(SchemaError, match="unknown schema 'expcli/2'"):
        load(path)


@pytest.mark.parametrize("shards", [None, *SHARD_FORMATS])
def test_a_reader_of_schema_v1_alone_refuses_a_once_parquet_file_or_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: str | None
) -> None:
    """A Parquet file by its header's schema; a folder by its manifest's, before any shard."""
    from expcli.formats import _manifest, sharded
    from expcli.formats import dataset as dataset_module

    pytest.importorskip("pyarrow.parquet", reason="pyarrow cannot be installed on this Python")
    dataset = frame_dataset(np.random.default_rng(9), 6, 2, 0.0)
    if shards is None:
        path = written(dataset, tmp_path, ".parquet", "once")
    else:
        path = tmp_path / shards
        sharded.write(dataset, path, overwrite=False, shard_bytes=4096, shard_format=shards)
    monkeypatch.setattr(dataset_module, "FRAMES_SCHEMA", SCHEMA)
    monkeypatch.setattr(_manifest, "_SCHEMAS", (SCHEMA,))  # the reader's only schema
    error = SchemaError if shards is None else FormatError
    with pytest.raises(error, match="'expcli/2'") as caught:
        load(path)
    assert caught.value.key == (None if shards is None else "schema")
    assert str(path if shards is None else path / "manifest.json") in str(caught.value)


def test_a_user_tensor_may_not_take_the_reserved_prefix(tmp_path: Path) -> None:
    dataset = frame_dataset(np.random.default_rng(10), 4, 1, 0.0)
    dataset.tensors[f"{PREFIX}mine"] = dataset.tensors["rewards"]
    with pytest.raises(SchemaError, match="reserved"):
        write_dataset(dataset, tmp_path / "x.npz")


@pytest.mark.parametrize(("layout", "fmt"), LAYOUT_FILES)
def test_layouts_write_the_same_from_either_form(tmp_path: Path, layout: str, fmt: str) -> None:
    """A foreign layout written from a once file reads back as the one written from a full file."""
    dataset = frame_dataset(np.random.default_rng(11), 10, 2, 0.2)
    dataset.tensors["truncated"] = np.zeros((10, 2), bool)
    dataset.tensors["actions"] = np.arange(20, dtype=np.int64).reshape(10, 2, 1)
    outputs = []
    for frames in ("once", "full"):
        target = tmp_path / f"{layout}-{frames}{suffix_of(fmt)}"
        convert(written(dataset, tmp_path, ".npz", frames), target, layout=layout)
        outputs.append(load(target))
    once, full = outputs
    assert sorted(once.tensors) == sorted(full.tensors)
    for name, expected in full.tensors.items():
        assert same_bytes(once.tensors[name], np.asarray(expected)), name


@pytest.mark.filterwarnings("ignore:.*the minari layout does not keep the 2 env column")
@pytest.mark.parametrize(("layout", "to"), LAYOUT_FOLDERS)
def test_episode_layouts_round_trip_from_either_form(tmp_path: Path, layout: str, to: str) -> None:
    """Minari and LeRobot folders written from a once file read back as from a full one:
    episodes whose next observations are the next rows' but at their ends. LeRobot's keeps
    the env columns, so it reads back as the data too (Minari's are one column)."""
    if to in ("parquet", "arrow") or layout == "lerobot":
        pytest.importorskip("pyarrow.parquet", reason="pyarrow cannot be installed on this Python")
    dataset = frame_dataset(np.random.default_rng(13), 12, 2, 0.0, leaves=True)
    ends = np.zeros((12, 2, 1), bool)
    ends[[4, 11], 0] = ends[[7, 11], 1] = True
    for name in ("next_observations/pixels", "next_observations/vector"):
        following = dataset.tensors[name]
        following[ends[..., 0]] = following[ends[..., 0]][::-1]  # true last frames, not next
    dataset.tensors["terminated"], dataset.tensors["truncated"] = ends, np.zeros_like(ends)
    dataset.tensors["actions"] = np.arange(24, dtype=np.int64).reshape(12, 2, 1)
    dataset.tensors["rewards"] = np.ones((12, 2, 1), np.float32)
    outputs = []
    for frames in ("once", "full"):
        target = tmp_path / f"{layout}-{frames}-v0"  # a Minari folder is named as its id
        convert(written(dataset, tmp_path, ".npz", frames), target, layout=layout, to=to)
        outputs.append(load(target))
    once, full = outputs
    assert sorted(once.tensors) == sorted(full.tensors)
    for name, expected in full.tensors.items():
        assert same_bytes(once.tensors[name], np.asarray(expected)), name
    columns = once.num_envs == dataset.num_envs
    assert columns == (layout == "lerobot")
    for name in ("observations/pixels", "next_observations/pixels") if columns else ():
        assert same_bytes(once.tensors[name], dataset.tensors[name]), name


@pytest.mark.parametrize(
    "frames",
    [
        {"next_observations": {"form": "dense", "kept": 1}},
        {"next_observations": {"form": "sparse", "kept": -1}},
        {"next_observations": {"form": "sparse", "kept": 10**9}},
        {"rewards": {"form": "sparse", "kept": 0}},
        ["next_observations"],
    ],
)
def test_malformed_frames_metadata_is_refused(tmp_path: Path, frames: object) -> None:
    import torch

    dataset = frame_dataset(np.random.default_rng(12), 6, 2, 0.0)
    path = written(dataset, tmp_path, ".pt", "once")
    stored = torch.load(path, weights_only=True)
    header = json.loads(stored["__expcli__"])
    stored["__expcli__"] = json.dumps({**header, "frames": frames})
    torch.save(stored, path)
    with pytest.raises(SchemaError, match="frames"):
        load(path)


@pytest.mark.parametrize("stored", [np.zeros(384, np.uint8), np.float32(0.5)])
def test_observations_unlike_their_derived_tensor_are_refused(
    tmp_path: Path, stored: np.ndarray
) -> None:
    """The tensor a sparse one is derived from is checked before cells are counted in it."""
    import torch

    path = written(frame_dataset(np.random.default_rng(14), 6, 1, 0.0), tmp_path, ".pt", "once")
    members = torch.load(path, weights_only=True)
    members["observations"] = torch.from_numpy(np.asarray(stored))
    torch.save(members, path)
    with pytest.raises(SchemaError, match="as next_observations is derived from it") as info:
        load(path)
    assert info.value.key == "observations"
