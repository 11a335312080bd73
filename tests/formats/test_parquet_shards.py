"""Sharded folders of Parquet shards: lossless, one format per folder, bookkeeping that
counts across shards (a writer going on included), a card, and convert both ways."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.conversion import convert
from expcli.errors import ConfigError, FormatError
from expcli.formats import Dataset, read_dataset, sharded
from expcli.formats._manifest import Manifest
from expcli.formats._parquet_columns import BOOKKEEPING, positions
from expcli.formats.table import format_named, shard_formats
from expcli.spec import CircularState, done_flags
from tests.formats.test_parquet_bookkeeping import reference
from tests.formats.test_roundtrip import assert_same_dataset, datasets

pytest.importorskip("pyarrow", reason="pyarrow cannot be installed on this Python")

SIZE, ENVS = 61, 3


def _run() -> Dataset:
    """A run whose episodes (ended by either flag) cross the shards."""
    rng = np.random.default_rng(3)
    return Dataset(
        {
            "observations": rng.standard_normal((SIZE, ENVS, 4)).astype(np.float32),
            "actions": rng.integers(0, 4, (SIZE, ENVS, 1)),
            "rewards": rng.standard_normal((SIZE, ENVS, 1)).astype(np.float32),
            "terminated": rng.random((SIZE, ENVS, 1)) < 0.08,
            "truncated": rng.random((SIZE, ENVS, 1)) < 0.04,
            "frames": rng.integers(0, 255, (SIZE, ENVS, 40, 40, 3), dtype=np.uint8),
        },
        CircularState(0, 0, True, SIZE * ENVS),
        {"env_id": "X-v0"},
    )


def _bookkeeping(folder: Path) -> dict[str, np.ndarray]:
    import pyarrow.parquet as pq

    table = pq.read_table(sorted(folder.glob("shard-*.parquet")), columns=list(BOOKKEEPING))
    return {name: table[name].to_numpy() for name in BOOKKEEPING}


def _same_as_one_file(folder: Path, dataset: Dataset) -> None:
    """Each transition's bookkeeping is as in one file; each shard holds its episodes whole.

    Within a shard, an episode's rows are one run, ``frame_index`` one up each row (going on
    from the shard before where it began there), episodes in the order they start.
    """
    import pyarrow.parquet as pq

    flat = positions(0, SIZE * ENVS, SIZE * ENVS)
    episode, frame = reference(flat, done_flags(dataset.tensors, SIZE, ENVS).reshape(-1), ENVS)
    got = _bookkeeping(folder)
    order = np.argsort(got["index"])  # in time order
    assert got["index"][order].tolist() == list(range(SIZE * ENVS))
    assert got["episode_index"][order].tolist() == episode
    assert got["frame_index"][order].tolist() == frame
    assert got["row"][order].tolist() == (flat // ENVS).tolist()
    continued = 0
    for shard in sorted(folder.glob("shard-*.parquet")):
        cols = pq.read_table(shard, columns=["episode_index", "frame_index"]).to_pydict()
        runs = [
            e
            for k, e in enumerate(cols["episode_index"])
            if k == 0 or e != cols["episode_index"][k - 1]
        ]
        assert runs == sorted(set(runs)), shard.name  # each episode one run, in order
        for k in range(1, len(runs and cols["frame_index"])):
            if cols["episode_index"][k] == cols["episode_index"][k - 1]:
                assert cols["frame_index"][k] == cols["frame_index"][k - 1] + 1
        continued += cols["frame_index"][0] > 0
    assert continued  # some episode went on into the next shard


@settings(max_examples=12, deadline=None)
@given(dataset=datasets(), shard_bytes=st.integers(1, 300))
def test_parquet_shards_round_trip_bit_for_bit(dataset: Dataset, shard_bytes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "data"
        sharded.write(
            dataset, folder, overwrite=False, shard_bytes=shard_bytes, shard_format="parquet"
        )
        assert_same_dataset(dataset, read_dataset(folder))
        assert sharded.check_shards(folder) == []


def test_bookkeeping_counts_across_shards_as_in_one_file(tmp_path: Path) -> None:
    dataset = _run()
    folder = tmp_path / "d"
    sharded.write(dataset, folder, overwrite=False, shard_bytes=30_000, shard_format="parquet")
    manifest = Manifest.load(folder)
    assert manifest.shard_format == "parquet" and len(manifest.shards) > 5
    _same_as_one_file(folder, dataset)
    card = (folder / "README.md").read_text()
    assert 'path: "shard-*.parquet"' in card  # the card's config (tests/formats/test_cards.py)


def test_a_writer_going_on_removes_strays_and_carries_episodes(tmp_path: Path) -> None:
    """As ``--resume`` does: the last shard replaced, then more rows appended."""
    dataset = _run()
    folder = tmp_path / "d"
    half = {name: a[: SIZE // 2] for name, a in dataset.tensors.items()}
    first = Dataset(half, CircularState(0, 0, True, SIZE // 2 * ENVS), dict(dataset.metadata))
    sharded.write(first, folder, overwrite=False, shard_bytes=30_000, shard_format="parquet")
    manifest = Manifest.load(folder)
    last = manifest.shards[-1]
    stray = folder / f"shard-{manifest.next_index(folder):06d}.parquet"
    stray.write_bytes((folder / last.file).read_bytes())  # killed before the manifest
    writer = sharded.ShardWriter(folder, manifest)
    assert not stray.exists()
    start = SIZE // 2 - last.rows
    metadata = sharded.user_metadata(manifest.header)
    writer.replace_last({n: a[start : SIZE // 2] for n, a in dataset.tensors.items()}, metadata)
    for low in range(SIZE // 2, SIZE, 9):
        writer.append({n: a[low : low + 9] for n, a in dataset.tensors.items()}, metadata)
    _same_as_one_file(folder, dataset)
    assert_same_dataset(dataset, read_dataset(folder))


def test_a_manifest_mixing_shard_formats_is_refused_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    sharded.write(_run(), folder, overwrite=False, shard_bytes=30_000, shard_format="parquet")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["shards"][1]["file"] = "shard-000001.npz"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(FormatError, match="never mixes shard formats") as info:
        read_dataset(folder)
    assert "\n" not in str(info.value)
    manifest["shard_format"] = "csv"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(FormatError, match="shard format 'csv'"):
        read_dataset(folder)


def test_the_shard_formats_are_the_table_rows_that_can_be_shards() -> None:
    assert shard_formats() == ("npz", "parquet")
    with pytest.raises(ConfigError, match="takes npz, parquet"):
        sharded.find_shard_format("hdf5")
    hdf5 = format_named("hdf5")
    assert hdf5 is not None
    with pytest.raises(ConfigError, match="takes npz, parquet"):
        sharded.new_manifest({}, hdf5)


def test_convert_npz_to_parquet_shards_and_back_gives_the_same_bytes(tmp_path: Path) -> None:
    source = tmp_path / "run.npz"
    sharded.write(_run(), tmp_path / "d", overwrite=False)  # npz shards by default
    convert(tmp_path / "d", source)
    convert(source, tmp_path / "pq", shard_format="parquet", compression="snappy", verify=True)
    assert Manifest.load(tmp_path / "pq").header["shard_compression"] == "snappy"
    convert(tmp_path / "pq", tmp_path / "back.npz", verify=True)
    assert (tmp_path / "back.npz").read_bytes() == source.read_bytes()
    with pytest.raises(ConfigError, match="applies to a sharded folder"):
        convert(source, tmp_path / "x.h5", shard_format="parquet")


def test_collect_takes_a_shard_format_for_a_folder_only(tmp_path: Path) -> None:
    from expcli.collect.job import CollectJob
    from expcli.collect.settings import CollectSettings

    def job(output: str, **options: str) -> CollectJob:
        settings = CollectSettings(env_id="CartPole-v1", output=tmp_path / output, **options)
        return CollectJob(settings)

    with pytest.raises(ConfigError, match="applies to a folder output"):
        job("run.npz", shard_format="parquet")
    with pytest.raises(ConfigError, match="--shard-format must be one of npz, parquet"):
        job("run", shard_format="hdf5")
    with pytest.raises(ConfigError, match="does not apply to Parquet output .* takes zstd"):
        job("run", shard_format="parquet", compression="lzf")
    job("run", shard_format="parquet", compression="snappy")  # taken
