"""Image-like frames in Parquet as PNG cells (HF ``Image``): bit for bit, typed for HF, bounded.

The writer's PNGs round trip through expcli's own reader (whole, lazily, through the block
cache); HF ``datasets`` gives ``uint8 (H, W, C)`` arrays equal to expcli's; PNGs of other
writers decode too; a hostile cell is refused in one line naming the file and the column.
"""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expcli.conversion import load, save
from expcli.errors import ConfigError, FormatError
from expcli.formats import Dataset, open_lazy
from expcli.formats._png_cells import decode_png, encode_png, image_like
from expcli.formats.block_cache import BlockCache
from expcli.formats.row_gather import gather_flat
from expcli.spec import CircularState

pa = pytest.importorskip("pyarrow", reason="pyarrow cannot be installed on this Python")
pq = pytest.importorskip("pyarrow.parquet")

PNG = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def frames_run(shape: tuple[int, ...], rows: int = 12, envs: int = 2, seed: int = 0) -> Dataset:
    """A run of uint8 frames (half noise, half flat, so PNGs both grow and shrink)."""
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, (rows, envs, *shape), dtype=np.uint8)
    frames[: rows // 2, :, : shape[0] // 2] = 7
    done = rng.random((rows, envs)) < 0.2
    return Dataset(
        {
            "observations": frames,
            "next_observations": np.roll(frames, -1, axis=0),  # stored once: nulls
            "actions": rng.integers(0, 3, (rows, envs)),
            "rewards": rng.standard_normal((rows, envs)).astype(np.float32),
            "terminated": done,
            "truncated": np.zeros((rows, envs), bool),
        },
        CircularState(0, 0, True, rows * envs),
        {"env_id": "Frames-v0"},
    )


def assert_same(got: Dataset, want: Dataset) -> None:
    assert got.tensors.keys() == want.tensors.keys()
    for name, tensor in want.tensors.items():
        back = np.asarray(got.tensors[name])
        assert back.dtype == tensor.dtype and back.shape == tensor.shape, name
        assert back.tobytes() == tensor.tobytes(), name


@pytest.mark.parametrize(
    ("shape", "image"),
    [
        ((84, 84), True),
        ((70, 70, 1), True),
        ((42, 42, 3), True),
        ((33, 40, 4), True),
        ((4, 84, 84), False),  # a stack of grey frames, channels first: no image
        ((40, 40, 2), False),
        ((16, 16, 3), False),  # 768 bytes: a fixed-size list
    ],
)
def test_image_like_frames_are_png_cells_and_round_trip(
    tmp_path: Path, shape: tuple[int, ...], image: bool
) -> None:
    dataset = frames_run(shape)
    path = save(dataset, tmp_path / "run.parquet")
    kind = pq.read_schema(path).field("observations").type
    assert (kind == PNG) == image
    assert_same(load(path), dataset)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    height=st.integers(65, 90),
    width=st.integers(65, 90),
    channels=st.sampled_from([0, 1, 3, 4]),
    rows=st.integers(1, 9),
    envs=st.integers(1, 3),
    start=st.integers(0, 26),
    seed=st.integers(0, 2**32 - 1),
)
def test_png_frames_round_trip_bit_for_bit(
    tmp_path: Path,
    height: int,
    width: int,
    channels: int,
    rows: int,
    envs: int,
    start: int,
    seed: int,
) -> None:
    """Any image shape, wrapped or not: whole, sliced through the block cache, gathered."""
    shape = (height, width) if channels == 0 else (height, width, channels)
    dataset = frames_run(shape, rows, envs, seed)
    cells = rows * envs
    dataset = Dataset(
        dataset.tensors,
        CircularState(start // envs % rows, start % envs, True, cells),
        dataset.metadata,
    )
    path = save(dataset, tmp_path / f"run-{seed}.parquet", overwrite=True)
    assert_same(load(path), dataset)
    lazy, close = open_lazy(path, cache=BlockCache(1 << 20))
    try:
        rng = np.random.default_rng(seed)
        for _ in range(3):
            row = int(rng.integers(rows))
            drawn = rng.integers(0, cells, 5)
            for name in ("observations", "next_observations"):
                got = np.asarray(lazy.tensors[name][row : row + 1])
                assert got.tobytes() == dataset.tensors[name][row : row + 1].tobytes()
                flat = dataset.tensors[name].reshape(cells, *shape)
                picked = gather_flat(lazy.tensors[name], drawn, envs)  # cells decoded alone
                assert picked.tobytes() == flat[drawn].tobytes()
                taken = lazy.tensors[name].take(np.array([row, 0]))
                assert taken.tobytes() == dataset.tensors[name][[row, 0]].tobytes()
    finally:
        close()


def test_raw_images_keep_the_bytes_and_round_trip(tmp_path: Path) -> None:
    dataset = frames_run((42, 42, 3))
    path = save(dataset, tmp_path / "raw.parquet", images="raw")
    assert pq.read_schema(path).field("observations").type == pa.binary(42 * 42 * 3)
    assert_same(load(path), dataset)
    with pytest.raises(ConfigError, match="unknown images 'jpeg'; expected one of png, raw"):
        save(dataset, tmp_path / "bad.parquet", images="jpeg")


def test_hf_datasets_gives_arrays_equal_to_expcli_and_polars_duckdb_read(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    dataset = frames_run((42, 42, 3), rows=10, envs=3)
    grey = np.random.default_rng(5).integers(0, 256, (10, 3, 70, 70), dtype=np.uint8)
    dataset.tensors["observations/grey"] = grey
    path = save(dataset, tmp_path / "run.parquet", frames="full")
    ours = load(path)
    hf = datasets.Dataset.from_parquet(str(path), cache_dir=str(tmp_path / "hf"))
    assert hf.features["observations"] == datasets.Image()
    assert hf.features["next_observations"] == datasets.Image()
    numpy = hf.with_format("numpy")[:]
    rows, envs = numpy["row"], numpy["env"]
    for name in ("observations", "next_observations", "observations/grey"):
        got = numpy[name]
        want = np.asarray(ours.tensors[name])[rows, envs]
        assert got.dtype == np.uint8 and got.shape == want.shape, name
        assert np.array_equal(got, want), name
    assert numpy["observations"].shape[1:] == (42, 42, 3)
    assert numpy["observations/grey"].shape[1:] == (70, 70)  # a grey PNG: (H, W)
    loaded = datasets.load_dataset(
        "parquet", data_files=str(path), split="train", cache_dir=str(tmp_path / "hf2")
    )
    assert np.array_equal(loaded.with_format("numpy")[7]["observations"], numpy["observations"][7])
    polars = pytest.importorskip("polars")
    cells = polars.read_parquet(path)["observations"].struct.field("bytes")
    assert cells.len() == 30 and cells[0][:8] == b"\x89PNG\r\n\x1a\n"
    duckdb = pytest.importorskip("duckdb")
    ((count, smallest),) = duckdb.sql(
        f"SELECT count(*), min(octet_length(observations.bytes)) FROM read_parquet('{path}')"
    ).fetchall()
    assert count == 30 and smallest > 0


def with_cells(path: Path, table: Any, blobs: list[bytes]) -> None:
    """Write ``path`` again, its footer kept, with ``blobs`` as its observations' PNG bytes."""
    cells = pa.StructArray.from_arrays(
        [pa.array(blobs, pa.binary()), pa.nulls(len(blobs), pa.string())], ["bytes", "path"]
    )
    kv = dict(pq.ParquetFile(path).metadata.metadata)
    kv.pop(b"ARROW:schema")  # pyarrow stores the new table's
    at = table.schema.get_field_index("observations")
    pq.write_table(table.set_column(at, "observations", cells).replace_schema_metadata(kv), path)


def test_pngs_of_other_writers_decode(tmp_path: Path) -> None:
    """Pillow's PNGs (adaptive filters, or a palette) in a file expcli wrote read back."""
    from PIL import Image

    dataset = frames_run((42, 42, 3))
    path = save(dataset, tmp_path / "run.parquet", frames="full")
    table = pq.read_table(path)
    frames = np.array(dataset.tensors["observations"])  # (T, N, 42, 42, 3)
    blobs = []  # in the file's row order, each the frame of its (row, env) cell
    cells = zip(table.column("row").to_pylist(), table.column("env").to_pylist(), strict=True)
    for at, (row, env) in enumerate(cells):
        out = io.BytesIO()
        image = Image.fromarray(frames[row, env])
        if at == 3:  # a palette image of few colours decodes to the same RGB
            flat = np.zeros_like(frames[row, env])
            flat[::2] = (200, 10, 10)
            image = Image.fromarray(flat).convert("P", palette=Image.Palette.ADAPTIVE)
            frames[row, env] = flat
        image.save(out, format="PNG", compress_level=9)
        blobs.append(out.getvalue())
    with_cells(path, table, blobs)
    got = np.asarray(load(path).tensors["observations"])
    assert np.array_equal(got, frames)


def chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(data, zlib.crc32(kind))
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def png_bytes(width: int, height: int, color: int, pixels: bytes) -> bytes:
    head = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    idat = zlib.compress(pixels, 9)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


HOSTILE = {
    # 60,000 x 60,000 RGB in a few KB: refused from its header, nothing inflated
    "huge": (
        png_bytes(60_000, 60_000, 2, bytes(1 << 16)),
        "PNG of 60000x60000 pixels; expected 42x42",
    ),
    # the right header, but pixels that inflate to 100 MB
    "bomb": (png_bytes(42, 42, 2, bytes(16 << 20)), "inflate past the 5,334 bytes"),
    "not png": (b"GIF89a" + bytes(100), "no PNG signature"),
    "truncated": (encode_png(np.zeros((42, 42, 3), np.uint8), 1)[:40], "truncated PNG"),
    "grey for rgb": (png_bytes(42, 42, 0, bytes(42 * 43)), "a PNG of 1 channels; expected 3"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_png_cells_are_refused_naming_file_and_column(tmp_path: Path, case: str) -> None:
    blob, said = HOSTILE[case]
    dataset = frames_run((42, 42, 3))
    path = save(dataset, tmp_path / "run.parquet", frames="full")
    table = pq.read_table(path)
    cells = table["observations"].combine_chunks()
    blobs: list[Any] = cells.field("bytes").to_pylist()
    blobs[5] = blob
    with_cells(path, table, blobs)
    with pytest.raises(FormatError) as raised:
        np.asarray(load(path).tensors["observations"])
    message = str(raised.value)
    assert str(path) in message and "observations" in message and said in message
    envs = dataset.num_envs  # file row 5 holds the cell (row, env) of its bookkeeping
    hit = table.column("row")[5].as_py() * envs + table.column("env")[5].as_py()
    other = (hit + 1) % (dataset.memory_size * envs)
    lazy, close = open_lazy(path)
    try:  # a random draw decodes that cell alone, and refuses it the same way
        drawn_one = gather_flat(lazy.tensors["observations"], np.array([other]), envs)
        assert drawn_one.shape == (1, 42, 42, 3)
        with pytest.raises(FormatError, match=said) as drawn:
            gather_flat(lazy.tensors["observations"], np.array([other, hit]), envs)
        assert str(path) in str(drawn.value) and "observations" in str(drawn.value)
    finally:
        close()


def test_decode_png_stops_inflating_at_the_shape() -> None:
    """The bomb is refused having inflated no more than the frame's bytes and one."""
    out = np.empty((42, 42, 3), np.uint8)
    blob = png_bytes(42, 42, 2, bytes(64 << 20))  # 64 MiB of zeros: 64 KB deflated
    with pytest.raises(Exception, match="inflate past"):
        decode_png(blob, (42, 42, 3), out)


def test_image_like_is_uint8_height_width_and_1_3_4_channels() -> None:
    assert image_like((84, 84), "uint8") and image_like((210, 160, 3), "uint8")
    assert not image_like((84, 84), "float32") and not image_like((4, 84, 84), "uint8")
    assert not image_like((84,), "uint8") and not image_like((0, 84, 3), "uint8")


def test_a_table_without_expcli_metadata_reads_the_png_frames(tmp_path: Path) -> None:
    """The foreign-table reader (HF ``Image`` columns) reads what expcli wrote, footer gone."""
    dataset = frames_run((42, 42, 3))
    path = save(dataset, tmp_path / "run.parquet", frames="full")
    table = pq.read_table(path)
    keep = {k: v for k, v in table.schema.metadata.items() if k == b"huggingface"}
    pq.write_table(table.replace_schema_metadata(keep), tmp_path / "plain.parquet")
    with pytest.warns(UserWarning, match="no expcli metadata"):
        got = load(tmp_path / "plain.parquet")
    frames = np.asarray(got.tensors["observations"])
    assert frames.dtype == np.uint8
    want = dataset.tensors["observations"].reshape(-1, 42, 42, 3)
    assert np.array_equal(frames.reshape(-1, 42, 42, 3), want)


def test_convert_and_collect_take_images_png_or_raw(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from expcli.cli.app import app

    def run(*args: str, code: int = 0) -> str:
        result = CliRunner().invoke(app, list(args))
        assert result.exit_code == code, result.stderr + result.stdout
        return result.stdout + result.stderr

    dataset = frames_run((42, 42, 3))
    source = save(dataset, tmp_path / "run.npz")
    run("convert", str(source), str(tmp_path / "png.parquet"))
    run("convert", str(source), str(tmp_path / "raw.parquet"), "--images", "raw")
    assert pq.read_schema(tmp_path / "png.parquet").field("observations").type == PNG
    assert pq.read_schema(tmp_path / "raw.parquet").field("observations").type == pa.binary(5292)
    for name in ("png.parquet", "raw.parquet"):
        assert_same(load(tmp_path / name), dataset)
    assert "--images" in run("convert", str(source), str(tmp_path / "x.parquet"), "--images",
                             "gif", code=2)  # fmt: skip
    out = tmp_path / "collected.parquet"
    for images, kind in (("raw", pa.binary(70 * 70 * 3)), ("png", PNG)):
        run(
            "collect", "benchmarks.frame_env:ConstantFrame-v0", "--env-kwargs",
            '{"shape": [70, 70, 3], "length": 7}', "--envs", "2", "--steps", "8", "--mode",
            "dummy", "--seed", "0", "--images", images, "-o", str(out), "--overwrite", "-q",
        )  # fmt: skip
        assert pq.read_schema(out).field("observations").type == kind
    for images, kind in (("raw", pa.binary(5292)), ("png", PNG)):  # folders of shards too
        folder = tmp_path / f"{images}-folder"
        run("convert", str(source), str(folder), "--shard-format", "parquet", "--images", images)
        [shard] = folder.glob("shard-*.parquet")
        assert pq.read_schema(shard).field("observations").type == kind
        assert_same(load(folder), dataset)
        collected = tmp_path / f"{images}-collected"
        run(
            "collect", "benchmarks.frame_env:ConstantFrame-v0", "--env-kwargs",
            '{"shape": [70, 70, 3], "length": 7}', "--envs", "2", "--steps", "8", "--mode",
            "dummy", "--seed", "0", "--images", images, "-o", str(collected),
            "--shard-format", "parquet", "-q",
        )  # fmt: skip
        [shard] = collected.glob("shard-*.parquet")
        expected = pa.binary(70 * 70 * 3) if images == "raw" else PNG
        assert pq.read_schema(shard).field("observations").type == expected


def test_a_row_group_of_png_cells_that_decodes_past_the_bound_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small PNGs of many pixels: the footer counts their bytes, the reader their pixels."""
    dataset = frames_run((42, 42, 3), rows=20, envs=2)
    path = save(dataset, tmp_path / "run.parquet")
    monkeypatch.setenv("EXPCLI_MAX_ROW_GROUP_BYTES", str(39 * 42 * 42 * 3))  # 40 rows a group
    with pytest.raises(FormatError, match="images of shape .42, 42, 3.: a row group") as raised:
        load(path)
    assert "EXPCLI_MAX_ROW_GROUP_BYTES" in str(raised.value)
    assert str(path) in str(raised.value) and "observations" in str(raised.value)
    monkeypatch.setenv("EXPCLI_MAX_ROW_GROUP_BYTES", str(40 * 42 * 42 * 3))
    assert_same(load(path), dataset)
