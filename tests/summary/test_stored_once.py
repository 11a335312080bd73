"""What ``summarize`` (``inspect``) reports of next observations stored once, against numpy.

Every format and folder: the kept cells counted from the full tensors (a cell is kept where
its bytes differ from the next row's observation of its env column; a shard's last row
always), the saved bytes by ``StoredOnce``'s definition of each form, none for the full form.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

from expcli import summarize
from expcli.formats import sharded, write_dataset
from expcli.formats.dataset import Dataset
from expcli.formats.frames import FRAMES_CELL_BYTES, StoredOnce
from expcli.spec import CircularState, FramesForm
from tests.format_catalogue import SHARD_FORMATS, once_forms, suffix_of
from tests.formats.test_frames import frame_dataset
from tests.formats.test_frames_shards import folder_case, folder_cases


def _kept(dataset: Dataset, name: str, start: int, stop: int, wrap: bool) -> int:
    """Cells of rows ``start..stop`` of ``name`` whose bytes differ from the next row's."""
    following = dataset.tensors[name]
    observations = dataset.tensors[name.removeprefix("next_")]
    ahead = np.roll(observations, -1, axis=0)[start:stop]
    rows = following[start:stop]
    size, envs = rows.shape[:2]
    differ = (
        rows.reshape(size, envs, -1).view(np.uint8) != ahead.reshape(size, envs, -1).view(np.uint8)
    ).any(axis=2)
    if not wrap:
        differ[-1] = True
    return int(differ.sum())


def reference(
    dataset: Dataset, name: str, pieces: list[tuple[int, int]], form: str, wrap: bool
) -> StoredOnce | None:
    """The figures of ``name`` stored as ``pieces`` (row ranges: one file, or each shard)."""
    shape = dataset.tensors[name].shape
    cell = int(np.prod(shape[2:])) * dataset.tensors[name].dtype.itemsize
    kept = cells = saved = 0
    once = False
    for start, stop in pieces:
        count = (stop - start) * shape[1]
        got = _kept(dataset, name, start, stop, wrap)
        worth = got * (cell + 8) < count * cell if form == "sparse" else got < count
        if cell < FRAMES_CELL_BYTES or not worth:  # stored whole
            got = count
        once = once or got < count
        kept, cells = kept + got, cells + count
        saved += (count - got) * cell - (got * 8 if form == "sparse" and got < count else 0)
    return StoredOnce(kept, cells, saved, form) if once else None


def _pieces(folder: Path) -> list[tuple[int, int]]:
    """Each shard's rows, from the manifest."""
    starts = [0]
    for entry in json.loads((folder / "manifest.json").read_text())["shards"]:
        starts.append(starts[-1] + entry["rows"])
    return list(zip(starts[:-1], starts[1:], strict=True))


def _check(summary_frames: dict[str, StoredOnce], expected: dict[str, StoredOnce | None]) -> None:
    assert summary_frames == {k: v for k, v in expected.items() if v is not None}


@folder_cases
def test_inspect_counts_what_numpy_counts(
    size: int, envs: int, changed: float, leaves: bool, shard_rows: int, wrapped: bool, seed: int
) -> None:
    """A file of each format that stores them once, and a folder of each shard format:
    numpy's figures, by each format's form."""
    dataset, _, row_bytes = folder_case(size, envs, changed, leaves, wrapped, seed)
    names = [n for n in dataset.tensors if n.startswith("next_")]
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, form in once_forms().items():
            suffix = suffix_of(fmt)
            path = write_dataset(dataset, Path(tmp) / f"d{suffix}")
            expected = {n: reference(dataset, n, [(0, size)], form, True) for n in names}
            _check(summarize(path, episodes=False).frames, expected)
            write_dataset(dataset, Path(tmp) / f"full{suffix}", frames="full")
            assert summarize(Path(tmp) / f"full{suffix}", episodes=False).frames == {}
        for shard_format in SHARD_FORMATS:
            form = once_forms()[shard_format]
            folder = Path(tmp) / shard_format
            sharded.write(
                dataset,
                folder,
                overwrite=False,
                shard_bytes=row_bytes * shard_rows,
                shard_format=shard_format,
            )
            pieces = _pieces(folder)
            expected = {n: reference(dataset, n, pieces, form, False) for n in names}
            _check(summarize(folder, episodes=False).frames, expected)


@pytest.mark.parametrize("shard_format", SHARD_FORMATS)
def test_a_folder_of_both_forms_counts_its_whole_shards_as_kept(
    tmp_path: Path, shard_format: str
) -> None:
    """A ``--resume`` with another ``--frames``: the whole shards keep all their cells."""
    form = once_forms()[shard_format]
    dataset = frame_dataset(np.random.default_rng(3), 12, 2, 0.1)
    manifest = sharded.new_manifest(dataset.header(), sharded.find_shard_format(shard_format))
    writer = sharded.ShardWriter(tmp_path / "f", manifest, None, FramesForm.ONCE)
    for start, frames in ((0, "once"), (4, "full"), (8, "once")):
        writer.plan = dataclasses.replace(writer.plan, frames=FramesForm(frames))
        rows = {name: array[start : start + 4] for name, array in dataset.tensors.items()}
        writer.append(rows, {})
    name = "next_observations"
    once = [reference(dataset, name, [(s, s + 4)], form, False) for s in (0, 8)]
    assert all(piece is not None for piece in once)
    kept = sum(piece.kept for piece in once if piece is not None) + 8
    saved = sum(piece.saved_bytes for piece in once if piece is not None)
    assert summarize(tmp_path / "f").frames == {name: StoredOnce(kept, 24, saved, form)}


def test_a_parquet_file_counts_only_the_rows_it_stores(tmp_path: Path) -> None:
    """Rows never written (zeros) are left out of a Parquet file: in neither form, not saved."""
    dataset = frame_dataset(np.random.default_rng(4), 8, 2, 0.2)
    for array in dataset.tensors.values():
        array[5:] = 0
    dataset = Dataset(dataset.tensors, CircularState(5, 0, False), dataset.metadata)
    path = write_dataset(dataset, tmp_path / "d.parquet")
    expected = reference(dataset, "next_observations", [(0, 5)], "nulls", True)
    assert expected is not None and expected.cells == 10
    assert summarize(path).frames == {"next_observations": expected}
