"""Sharded dataset folders: lossless round trips with every format, gathers across
shards, and a reader that trusts only the manifest."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.conversion import convert
from expcli.errors import SchemaError
from expcli.formats import Dataset, open_lazy, read_dataset, sharded, write_dataset
from expcli.formats._manifest import Manifest
from expcli.spec import CircularState
from expcli.summary import summarize
from expcli.summary.checks import FAILED, PASSED
from tests.format_catalogue import FILE_FORMATS, SHARD_FORMATS
from tests.formats.test_roundtrip import assert_same_dataset, datasets


@settings(max_examples=15, deadline=None)
@given(dataset=datasets(), shard_bytes=st.integers(1, 200), fmt=st.sampled_from(FILE_FORMATS))
def test_folder_and_every_format_round_trip_bit_for_bit(
    dataset: Dataset, shard_bytes: int, fmt: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "data"
        sharded.write(dataset, folder, overwrite=False, shard_bytes=shard_bytes)
        assert_same_dataset(dataset, read_dataset(folder))
        single = write_dataset(read_dataset(folder), Path(tmp) / f"one.{fmt}")
        again = Path(tmp) / "again"
        convert(single, again)  # a name without suffix: a folder
        assert_same_dataset(dataset, read_dataset(again))


def _sample(rows: int = 23, envs: int = 3) -> Dataset:
    rng = np.random.default_rng(5)
    tensors = {
        "observations": rng.random((rows, envs, 2, 3)).astype(np.float32),
        "actions": rng.integers(0, 9, (rows, envs, 1)),
        "terminated": rng.random((rows, envs, 1)) < 0.2,
    }
    return Dataset(tensors, CircularState(0, 0, True), {"env_id": "X"})


@settings(max_examples=15, deadline=None)
@given(
    index=st.lists(st.integers(-23, 22), max_size=40),
    bounds=st.tuples(st.integers(0, 23), st.integers(0, 23)),
)
def test_take_and_slices_span_shards_as_numpy_does(
    tmp_path_factory: pytest.TempPathFactory, index: list[int], bounds: tuple[int, int]
) -> None:
    dataset = _sample()
    folder = tmp_path_factory.mktemp("t") / "d"
    sharded.write(dataset, folder, overwrite=False, shard_bytes=150)  # 1 or 2 rows a shard
    assert len(Manifest.load(folder).shards) > 10
    lazy, close = open_lazy(folder)
    try:
        for name, want in dataset.tensors.items():
            got = lazy.tensors[name]
            picked = np.asarray(index, dtype=np.int64)
            assert np.array_equal(got.take(picked), want[picked])
            low, high = bounds
            assert np.array_equal(got[low:high], want[low:high])
    finally:
        close()


def test_reader_ignores_a_shard_the_manifest_does_not_list(tmp_path: Path) -> None:
    """A writer killed between a shard's rename and the manifest's replacement."""
    folder = tmp_path / "d"
    dataset = _sample()
    sharded.write(dataset, folder, overwrite=False, shard_bytes=1000)
    manifest = Manifest.load(folder)
    stray = folder / f"shard-{manifest.next_index(folder):06d}.npz"
    stray.write_bytes((folder / manifest.shards[0].file).read_bytes())
    assert_same_dataset(dataset, read_dataset(folder))
    assert sharded.check_shards(folder) == []


def test_check_shards_finds_a_changed_byte(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    sharded.write(_sample(), folder, overwrite=False, shard_bytes=1000)
    shard = folder / Manifest.load(folder).shards[1].file
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    problems = sharded.check_shards(folder)
    assert len(problems) == 1 and shard.name in problems[0]
    findings = {f.check: f for f in summarize(folder, check=True).checks or ()}
    assert findings["shards"].status == FAILED and shard.name in findings["shards"].message


def test_inspect_check_passes_intact_shards(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    sharded.write(_sample(), folder, overwrite=False, shard_bytes=1000)
    findings = {f.check: f for f in summarize(folder, check=True).checks or ()}
    assert findings["shards"].status == PASSED


def test_a_folder_that_is_not_a_dataset_is_never_replaced(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(Exception, match="not a sharded dataset folder"):
        write_dataset(_sample(), tmp_path / "mine", overwrite=True)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


def test_a_float_tensor_added_after_the_first_shard_reads_as_nan_there(tmp_path: Path) -> None:
    """What ``collect --infos`` does when it meets an info key after a shard was written."""
    folder = tmp_path / "d"
    first, second = _sample(4), _sample(3)
    writer = sharded.ShardWriter(folder, Manifest(first.header()))
    writer.append(first.tensors, {})
    infos = np.arange(9, dtype=np.float64).reshape(3, 3, 1)
    writer.append({**second.tensors, "infos/t": infos}, {})
    assert [e.missing for e in Manifest.load(folder).shards] == [("infos/t",), ()]
    back = read_dataset(folder)
    assert np.isnan(back.tensors["infos/t"][:4]).all()
    assert np.array_equal(back.tensors["infos/t"][4:], infos)
    with pytest.raises(SchemaError, match="only float tensors"):
        writer.append({**second.tensors, "infos/n": np.zeros((3, 3, 1), np.int64)}, {})
    # a shard may lack only float tensors: an integer one listed as missing is refused
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["tensors"]["extra"] = {"dtype": "int64", "shape": [1]}
    for entry in manifest["shards"]:
        entry["missing"] = sorted({*entry.get("missing", []), "extra"})
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SchemaError) as info:
        read_dataset(folder)
    assert info.value.key == "extra"


@pytest.mark.parametrize("shard_format", SHARD_FORMATS)
def test_a_shard_compression_is_refused_alike_on_every_path(
    tmp_path: Path, shard_format: str
) -> None:
    """The format object checks it: a write, a new manifest (collect's) and a conversion."""
    from expcli.errors import ConfigError
    from expcli.spec import COMPRESSIONS

    kind = sharded.find_shard_format(shard_format)
    compression = next(c for c in COMPRESSIONS if c != "none" and c not in kind.compressions)
    source = write_dataset(_sample(), tmp_path / "run.npz")
    attempts = [
        lambda: write_dataset(
            _sample(), tmp_path / "w", shard_format=shard_format, compression=compression
        ),
        lambda: sharded.new_manifest(_sample().header(), kind, compression),
        lambda: convert(source, tmp_path / "c", shard_format=shard_format, compression=compression),
    ]
    messages = set()
    for attempt in attempts:
        with pytest.raises(ConfigError) as caught:
            attempt()
        messages.add(str(caught.value))
    (message,) = messages  # one message, whichever path
    assert message.startswith(f"{kind.shown} shards ") and repr(compression) in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.npz"]
