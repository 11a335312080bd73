"""Parquet: lossless round trips, the columns and their encodings, compression, row groups,
lazy reads, the CLI, and what happens without pyarrow."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.conversion import save
from expcli.errors import ConfigError, FormatError, MissingDependencyError
from expcli.formats import Dataset, read_dataset, write_dataset
from expcli.formats.lazy import LazyRows
from expcli.formats.rows import WritePlan
from expcli.spec import CircularState
from tests.format_catalogue import COMPRESSIONS
from tests.formats.test_roundtrip import assert_same_dataset

pa = pytest.importorskip("pyarrow", reason="pyarrow cannot be installed on this Python")
pq = pytest.importorskip("pyarrow.parquet")

from expcli.formats import parquet_format  # noqa: E402


def _in_steps(dataset: Dataset, path: Path) -> Path:
    """Write ``dataset`` step-major (``expcli-parquet/1``), the order ``_Groups`` reads."""
    parquet_format.write(dataset, WritePlan(path, "parquet"), order=parquet_format.RowOrder.STEPS)
    return path


CLI = [sys.executable, "-m", "expcli"]

# Feature shapes: scalar, small (nested lists), empty, and one of 4,160 bytes (binary).
SHAPES = [(), (1,), (3,), (2, 3), (0,), (65, 64)]
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
NAMES = ["observations/pos", "observations/vel", "next_observations", "actions", "rewards"]
NAMES += ["terminated", "truncated", "infos/x"]
SPECIAL = {  # NaN payloads, both zeros, infinities, sub-normals: as bits
    "float16": [0x7E01, 0xFC00, 0x8000, 0x0001, 0x7C01],
    "float32": [0x7FC1_2345, 0xFF80_0000, 0x8000_0000, 0x0000_0001, 0xFFFF_FFFF],
    "float64": [0x7FF8_0000_0000_0001, 0x8000_0000_0000_0000, 0xFFF0_0000_0000_0000, 1],
}


def tensor(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Random values of ``dtype`` with the special float bit patterns mixed in."""
    kind = np.dtype(dtype)
    raw = rng.integers(0, 256, (*shape, kind.itemsize), dtype=np.uint8)
    array = raw.view(kind).reshape(shape) if kind != np.bool_ else raw[..., 0] % 2 == 1
    flat = array.reshape(-1)
    if dtype in SPECIAL and flat.size:
        bits = np.array(SPECIAL[dtype], dtype=f"u{kind.itemsize}").view(kind)
        picks = rng.integers(0, flat.size, bits.size)
        flat[picks] = bits
    return np.ascontiguousarray(array)


@st.composite
def datasets(draw: st.DrawFn) -> Dataset:
    size, envs = draw(st.integers(0, 5)), draw(st.integers(0, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    tensors = {}
    for name in draw(st.lists(st.sampled_from(NAMES), max_size=5, unique=True)):
        shape = (size, envs, *draw(st.sampled_from(SHAPES)))
        tensors[name] = tensor(rng, draw(st.sampled_from(DTYPES)), shape)
    state = CircularState(
        draw(st.integers(0, max(size - 1, 0))),
        draw(st.integers(0, max(envs - 1, 0))),
        draw(st.booleans()),
        draw(st.none() | st.integers(0, 100)),
    )
    zero_tail = draw(st.booleans())  # unwritten rows left out (zeros) or stored
    if zero_tail and not state.filled:
        valid = state.valid_length(size, envs)
        for array in tensors.values():
            if array.size:
                array.reshape(size * envs, -1)[valid:] = 0
    metadata = {"env_id": "X-v0", "created": "2024-01-02T03:04:05+00:00", "seeds": [1, 2]}
    return Dataset(tensors, state, metadata)


@settings(max_examples=60, deadline=None)
@given(
    dataset=datasets(),
    compression=st.sampled_from([None, *(c for fmt, c in COMPRESSIONS if fmt == "parquet")]),
    group_bytes=st.sampled_from([1, 100, 64 << 20]),
)
def test_round_trip_is_bit_for_bit(
    dataset: Dataset, compression: str | None, group_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        patch.setattr(parquet_format, "GROUP_BYTES", group_bytes)  # many row groups, or one
        path = write_dataset(dataset, Path(folder) / "data.parquet", compression=compression)
        assert_same_dataset(dataset, read_dataset(path))
        lazy, close = parquet_format.open_lazy(path)
        try:
            for name, want in dataset.tensors.items():
                got = lazy.tensors[name]
                for start in range(0, len(want) + 1, 2):  # slices across row groups
                    rows = np.ascontiguousarray(got[start : start + 2]).view(np.uint8)
                    assert (
                        rows.tobytes()
                        == np.ascontiguousarray(want[start : start + 2]).view(np.uint8).tobytes()
                    )
        finally:
            close()


def cartpole(size: int = 6, envs: int = 2, state: CircularState | None = None) -> Dataset:
    rng = np.random.default_rng(0)
    terminated = np.zeros((size, envs), bool)
    terminated[2, 0] = terminated[4, 1] = terminated[5, 0] = True
    truncated = np.zeros((size, envs), bool)
    truncated[3, 1] = True
    return Dataset(
        {
            "observations": rng.standard_normal((size, envs, 4)).astype(np.float32),
            "next_observations": rng.standard_normal((size, envs, 4)).astype(np.float32),
            "actions": rng.integers(0, 2, (size, envs)).astype(np.int64),
            "rewards": rng.standard_normal((size, envs)).astype(np.float32),
            "terminated": terminated,
            "truncated": truncated,
            "frames": rng.integers(0, 255, (size, envs, 42, 42, 3), dtype=np.uint8),
        },
        state or CircularState(0, 0, True, size * envs),
        {"env_id": "CartPole-v1"},
    )


def test_rows_are_transitions_episode_by_episode(tmp_path: Path) -> None:
    dataset = cartpole(state=CircularState(2, 1, True, 25))  # wrapped: oldest is row 2, env 1
    path = write_dataset(dataset, tmp_path / "run.parquet")
    table = pq.read_table(path)
    cols = table.to_pydict()
    assert table.column_names[:6] == [
        "index",
        "episode_index",
        "frame_index",
        "env",
        "row",
        "timestamp",
    ]
    obs = np.array(cols["observations"], np.float32)
    assert np.array_equal(obs, dataset.tensors["observations"][cols["row"], cols["env"]])
    # env 0: rows 3, 4, 5 (done) | 0, 1, 2 (done); env 1: rows 2, 3 (done) | 4 (done) | 5, 0, 1
    rows = list(
        zip(cols["episode_index"], cols["env"], cols["row"], cols["frame_index"], strict=True)
    )
    assert rows == [
        (0, 1, 2, 0), (0, 1, 3, 1),
        (1, 0, 3, 0), (1, 0, 4, 1), (1, 0, 5, 2),
        (2, 1, 4, 0),
        (3, 1, 5, 0), (3, 1, 0, 1), (3, 1, 1, 2),
        (4, 0, 0, 0), (4, 0, 1, 1), (4, 0, 2, 2),
    ]  # fmt: skip
    flat = [r * 2 + e for r, e in zip(cols["row"], cols["env"], strict=True)]
    assert cols["index"] == [(f - 5) % 12 for f in flat]  # counted from the write head round
    assert cols["timestamp"] == [float(f) for f in cols["frame_index"]]  # no fps recorded: 1
    layout = json.loads(pq.ParquetFile(path).metadata.metadata[b"expcli.parquet"])
    assert layout["layout"] == "expcli-parquet/2" and layout["order"] == "episodes"


def test_rows_in_step_order_are_transitions_in_write_order(tmp_path: Path) -> None:
    dataset = cartpole(state=CircularState(2, 1, True, 25))
    dataset.metadata["render_fps"] = 50
    path = tmp_path / "run.parquet"
    parquet_format.write(dataset, WritePlan(path, "parquet"), order=parquet_format.RowOrder.STEPS)
    cols = pq.read_table(path).to_pydict()
    flat = [r * 2 + e for r, e in zip(cols["row"], cols["env"], strict=True)]
    assert flat == [(5 + k) % 12 for k in range(12)]  # from the write head round
    assert cols["index"] == list(range(12))
    episodes = {}
    for k in range(12):
        episodes.setdefault(cols["episode_index"][k], []).append(
            (cols["env"][k], cols["row"][k], cols["frame_index"][k])
        )
    assert list(episodes.values()) == [
        [(1, 2, 0), (1, 3, 1)],
        [(0, 3, 0), (0, 4, 1), (0, 5, 2)],
        [(1, 4, 0)],
        [(1, 5, 0), (1, 0, 1), (1, 1, 2)],
        [(0, 0, 0), (0, 1, 1), (0, 2, 2)],
    ]
    assert np.allclose(cols["timestamp"], np.array(cols["frame_index"]) / 50)
    layout = json.loads(pq.ParquetFile(path).metadata.metadata[b"expcli.parquet"])
    assert layout["layout"] == "expcli-parquet/1" and layout["fps_from"] == "render_fps"
    back = read_dataset(path)
    for name, tensor in dataset.tensors.items():
        assert np.array_equal(np.asarray(back.tensors[name]), tensor), name


def test_column_types_and_footer_metadata(tmp_path: Path) -> None:
    dataset = cartpole()
    dataset.tensors["rewards"] = dataset.tensors["rewards"][..., None]  # (T, N, 1), as collected
    path = write_dataset(dataset, tmp_path / "run.parquet")
    schema = pq.read_schema(path)
    assert schema.field("observations").type == pa.list_(pa.float32(), 4)
    png = pa.struct([("bytes", pa.binary()), ("path", pa.string())])  # HF's Image
    assert schema.field("frames").type == png  # 42x42x3 uint8: an image, a PNG a cell
    assert schema.field("rewards").type == pa.float32()
    assert schema.field("terminated").type == pa.bool_()
    assert schema.field("actions").type == pa.int64()
    kv = pq.ParquetFile(path).metadata.metadata
    header = json.loads(kv[b"expcli"])
    assert header["tensors"]["frames"] == {"dtype": "uint8", "shape": [42, 42, 3]}
    assert header["env_id"] == "CartPole-v1" and header["filled"] is True
    layout = json.loads(kv[b"expcli.parquet"])
    assert layout["layout"] == "expcli-parquet/2" and layout["columns"]["frames"] == "png"
    assert b"pandas" not in kv
    features = json.loads(kv[b"huggingface"])["info"]["features"]
    assert features["frames"] == {"_type": "Image"}
    assert features["observations"] == {
        "feature": {"dtype": "float32", "_type": "Value"},
        "length": 4,
        "_type": "List",
    }
    assert features["index"] == {"dtype": "int64", "_type": "Value"}
    raw = pq.read_schema(save(dataset, tmp_path / "raw.parquet", images="raw"))
    assert raw.field("frames").type == pa.binary(42 * 42 * 3)  # 5,292 bytes: binary


@pytest.mark.parametrize(
    ("given_compression", "codec"),
    [(None, "ZSTD"), ("zstd", "ZSTD"), ("snappy", "SNAPPY"), ("gzip", "GZIP"), ("none", None)],
)
def test_zstd_by_default_and_compression_as_asked(
    tmp_path: Path, given_compression: str | None, codec: str | None
) -> None:
    path = write_dataset(cartpole(), tmp_path / "run.parquet", compression=given_compression)
    meta = pq.ParquetFile(path).metadata
    codecs = {meta.row_group(0).column(i).compression for i in range(meta.num_columns)}
    assert codecs == {codec or "UNCOMPRESSED"}


def test_hdf5_compressions_keep_their_meaning(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="lzf"):
        write_dataset(cartpole(), tmp_path / "run.parquet", compression="lzf")
    with pytest.raises(ConfigError, match="none, gzip, lzf"):
        write_dataset(cartpole(), tmp_path / "run.h5", compression="zstd")


def test_a_convert_over_many_row_groups_with_progress_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """npz -> parquet with a progress count: the count's rows over the npz's lazy rows, both
    read ahead on one thread (a Pong convert hung so once groups held whole rows)."""
    from expcli import convert

    monkeypatch.setattr(parquet_format, "GROUP_BYTES", 6000)  # one row a group
    dataset = cartpole(size=40)
    npz = write_dataset(dataset, tmp_path / "run.npz")
    fractions: list[float] = []

    def run() -> None:
        convert(npz, tmp_path / "run.parquet", progress=lambda _, f: fractions.append(f))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "convert hung"
    assert_same_dataset(dataset, read_dataset(tmp_path / "run.parquet"))
    assert fractions and fractions[-1] == 1.0


def test_rows_read_in_order_decode_the_next_group_ahead_on_its_own_handle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parquet_format, "GROUP_BYTES", 6000)  # one row a group
    dataset = cartpole(size=12)
    path = _in_steps(dataset, tmp_path / "run.parquet")
    lazy, close = parquet_format.open_lazy(path)
    frames = lazy.tensors["frames"]
    assert isinstance(frames, LazyRows)
    try:
        for row in range(12):  # in order, as a convert reads
            assert np.array_equal(
                frames._read(row, row + 1), dataset.tensors["frames"][row : row + 1]
            )
        decoding = [t for t in threading.enumerate() if t.name.startswith("expcli-parquet-decode")]
        assert decoding, "no group was decoded ahead"
    finally:
        close()
    for thread in decoding:
        thread.join(timeout=10)
        assert not thread.is_alive()  # closing the file stops its decoder


def test_a_file_replaced_while_read_in_order_is_refused_not_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decoding thread opens its own handle: on the file that was checked, never on
    another put in its place (it could declare what the checks refuse)."""
    monkeypatch.setattr(parquet_format, "GROUP_BYTES", 6000)  # one row a group
    dataset = cartpole(size=12)
    path = _in_steps(dataset, tmp_path / "run.parquet")
    lazy, close = parquet_format.open_lazy(path)
    frames = lazy.tensors["frames"]
    assert isinstance(frames, LazyRows)
    try:
        _in_steps(cartpole(size=12), tmp_path / "other.parquet")
        (tmp_path / "other.parquet").replace(path)
        with pytest.raises(FormatError, match="replaced or changed while it was read"):
            for row in range(12):
                frames._read(row, row + 1)
    finally:
        close()


def test_row_groups_bound_what_a_read_decodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parquet_format, "GROUP_BYTES", 6000)  # one row (2 transitions) a group
    dataset = cartpole(size=8)
    path = _in_steps(dataset, tmp_path / "run.parquet")
    assert pq.ParquetFile(path).metadata.num_row_groups == 8
    decoded: list[int] = []
    real = pq.ParquetFile.read_row_group

    def counting(self: object, group: int, *args: object, **kwargs: object) -> object:
        decoded.append(group)
        return real(self, group, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counting)
    lazy, close = parquet_format.open_lazy(path)
    try:
        frames = lazy.tensors["frames"]
        assert isinstance(frames, LazyRows)
        assert np.array_equal(frames._read(3, 4), dataset.tensors["frames"][3:4])
        assert sorted(decoded) == [3]  # row 3's two transitions, nothing else
    finally:
        close()


def test_unwritten_rows_are_left_out_when_zero(tmp_path: Path) -> None:
    dataset = cartpole(size=6, state=CircularState(2, 1, False))
    for array in dataset.tensors.values():
        array.reshape(12, -1)[5:] = 0
    path = write_dataset(dataset, tmp_path / "zeros.parquet")
    assert pq.ParquetFile(path).metadata.num_rows == 5
    assert_same_dataset(dataset, read_dataset(path))
    dataset.tensors["rewards"][5, 1] = np.nan  # skrl leaves NaN there: stored, flagged -1
    path = write_dataset(dataset, tmp_path / "nan.parquet")
    table = pq.read_table(path).to_pydict()
    assert len(table["index"]) == 12 and table["episode_index"][5:] == [-1] * 7
    assert_same_dataset(dataset, read_dataset(path))


def test_npz_to_parquet_to_npz_is_byte_identical_through_the_cli(tmp_path: Path) -> None:
    dataset = cartpole(state=CircularState(3, 1, True, 41))
    dataset.tensors["observations"][0, 0, :2] = [-0.0, np.nan]
    npz = write_dataset(dataset, tmp_path / "run.npz")
    for args in (
        [str(npz), str(tmp_path / "run.parquet")],
        [str(tmp_path / "run.parquet"), str(tmp_path / "back.npz"), "--verify"],
    ):
        out = subprocess.run([*CLI, "convert", *args], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
    assert (tmp_path / "back.npz").read_bytes() == npz.read_bytes()


def test_inspect_check_and_replay_buffer_read_parquet(tmp_path: Path) -> None:
    from expcli import load
    from expcli.replay import ReplayBuffer

    dataset = cartpole()
    dataset.tensors["next_observations"][:-1] = dataset.tensors["observations"][1:]
    path = write_dataset(dataset, tmp_path / "run.parquet")
    out = subprocess.run([*CLI, "inspect", str(path), "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["format"] == "parquet" and report["transitions"] == 12
    shapes = {t["name"]: t["shape"] for t in report["tensors"]}
    assert shapes["frames"] == [6, 2, 42, 42, 3]
    checked = subprocess.run(
        [*CLI, "inspect", str(path), "--check"], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "failed" not in checked.stdout
    assert_same_dataset(dataset, load(path))
    batch = ReplayBuffer(str(path), seed=0).sample(64)
    rewards = set(dataset.tensors["rewards"].reshape(-1).tolist())
    assert set(batch["rewards"].reshape(-1).tolist()) <= rewards


def test_a_tensor_named_as_a_bookkeeping_column_is_refused(tmp_path: Path) -> None:
    from expcli.errors import SchemaError

    dataset = Dataset({"index": np.zeros((2, 1), np.int64)})
    with pytest.raises(SchemaError, match="bookkeeping column"):
        write_dataset(dataset, tmp_path / "run.parquet")
    assert not list(tmp_path.iterdir())


def test_old_pyarrow_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pa, "__version__", "14.0.0")
    with pytest.raises(MissingDependencyError, match=r"CVE-2023-47248.*expcli\[parquet\]"):
        parquet_format.pyarrow_parquet()


def test_without_pyarrow_one_line_names_the_extra(tmp_path: Path) -> None:
    npz = write_dataset(cartpole(), tmp_path / "run.npz")
    code = (
        "import sys\n"
        "sys.modules['pyarrow'] = None\n"
        "from expcli.cli import main\n"
        f"sys.argv = ['expcli', 'convert', {str(npz)!r}, {str(tmp_path / 'run.parquet')!r}]\n"
        "main()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and 'pip install "expcli[parquet]"' in lines[0], out.stderr
    assert not (tmp_path / "run.parquet").exists()


@pytest.mark.parametrize(("option", "codec"), [([], "ZSTD"), (["--compression", "none"], None)])
def test_collect_writes_parquet_zstd_unless_told(
    tmp_path: Path, option: list[str], codec: str | None
) -> None:
    path = tmp_path / "run.parquet"
    args = ["collect", "CartPole-v1", "--envs", "2", "--steps", "60", "--mode", "dummy"]
    out = subprocess.run([*CLI, *args, "-q", "-o", str(path), *option], capture_output=True)
    assert out.returncode == 0, out.stderr
    meta = pq.ParquetFile(path).metadata
    assert meta.num_rows == 60
    assert meta.row_group(0).column(5).compression == (codec or "UNCOMPRESSED")
    assert read_dataset(path).metadata["env_id"] == "CartPole-v1"


def test_a_compression_the_format_does_not_take_is_refused_before_collecting(
    tmp_path: Path,
) -> None:
    args = ["collect", "CartPole-v1", "--envs", "2", "--steps", "60", "--mode", "dummy"]
    out = subprocess.run(
        [*CLI, *args, "-o", str(tmp_path / "run.h5"), "--compression", "zstd"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "it takes none, gzip, lzf" in out.stderr
    assert "Traceback" not in out.stderr and not list(tmp_path.iterdir())
