"""The committed golden files (``tests/data``, see its README) read back exactly.

They were written by an earlier expcli, so a reader or writer that drifts from the
``expcli/1`` schema (names, dtypes, shapes, circular state, metadata, CSV sidecar) fails
here. The expected values are spelled out below, not computed by expcli.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from expcli import load
from expcli.formats import detect_format
from expcli.spec import CircularState

DATA = Path(__file__).parent / "data"
NAN, INF = np.nan, np.inf

EXPECTED: dict[str, np.ndarray] = {
    "observations": np.array(
        [
            [[NAN, -0.75], [-0.5, -0.25]],
            [[0.0, 0.25], [0.5, -0.0]],
            [[1.0, INF], [1.5, 1.75]],
        ],
        dtype=np.float32,
    ),
    "actions": np.array([[[0], [1]], [[2], [3]], [[1], [0]]], dtype=np.int64),
    "rewards": np.array([[[0.5], [-1.0]], [[2.0], [0.0]], [[0.001], [3.0]]], dtype=np.float32),
    "terminated": np.array([[[False], [False]], [[True], [False]], [[False], [True]]]),
    "truncated": np.array([[[False], [True]], [[False], [False]], [[False], [False]]]),
    "infos/steps": np.array([[7, 8], [9, 10], [11, 12]], dtype=np.int32),
    "frames": np.array(
        [
            [[[0, 1], [2, 3]], [[4, 5], [6, 7]]],
            [[[8, 9], [10, 11]], [[12, 13], [14, 15]]],
            [[[16, 17], [18, 19]], [[20, 21], [22, 23]]],
        ],
        dtype=np.uint8,
    ),
}

FILES = {
    "golden.pt": "pt",
    "golden.npz": "npz",
    "golden.csv": "csv",
    "golden.h5": "hdf5",
    "golden.parquet": "parquet",
    "golden_episodes.parquet": "parquet",
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_golden_file_reads_back_exactly(name: str) -> None:
    path = DATA / name
    assert detect_format(path) == FILES[name]
    dataset = load(path)
    assert sorted(dataset.tensors) == sorted(EXPECTED)
    for key, expected in EXPECTED.items():
        actual = np.asarray(dataset.tensors[key])
        assert actual.dtype == expected.dtype, key
        assert actual.shape == expected.shape, key
        # bit for bit: NaN where NaN, -0.0 stays negative
        assert actual.tobytes() == expected.tobytes(), key
    assert dataset.state == CircularState(memory_index=1, env_index=1, filled=True)
    assert (dataset.memory_size, dataset.num_envs, len(dataset)) == (3, 2, 6)
    assert dataset.metadata == {
        "env_id": "Golden-v0",
        "seed": 7,
        "created": "2025-01-01T00:00:00+00:00",
        "collector": {"mode": "dummy", "steps": 6},
    }


def _frames(first: int) -> np.ndarray:
    """Cells ``first, first + 1, ...`` of the golden frames: 64 bytes each, counting mod 251."""
    return (np.arange(first * 64, (first + 1) * 64) % 251).astype(np.uint8).reshape(8, 8)


@pytest.mark.parametrize(
    "name",
    [
        "golden_frames.pt",
        "golden_frames.npz",
        "golden_frames.h5",
        "golden_frames.parquet",
        "golden_frames_folder",
    ],
)
def test_golden_file_of_the_once_form_reads_back_exactly(name: str) -> None:
    """Schema ``expcli/2`` (``tests/data/make_golden_frames.py``): next observations once."""
    dataset = load(DATA / name)
    observations = np.stack([np.stack([_frames(2 * t + n) for n in range(2)]) for t in range(4)])
    following = np.stack([observations[1], observations[2], observations[3], observations[0]])
    following[1, 0] = 255 - observations[2, 0]
    following[3] = observations[0] + 7
    assert dataset.tensors["observations"].tobytes() == observations.tobytes()
    assert dataset.tensors["next_observations"].dtype == np.uint8
    assert dataset.tensors["next_observations"].shape == (4, 2, 8, 8)
    assert dataset.tensors["next_observations"].tobytes() == following.tobytes()
    assert dataset.tensors["actions"].reshape(-1).tolist() == [0, 1, 2, 3, 1, 0, 3, 2]
    assert np.flatnonzero(dataset.tensors["terminated"]).tolist() == [2]
    assert dataset.state == CircularState(memory_index=0, env_index=0, filled=True)
    assert dataset.metadata == {"env_id": "GoldenFrames-v0", "created": "2026-11-27T00:00:00+00:00"}


def test_golden_episode_parquet_holds_its_episodes_one_after_another() -> None:
    """``expcli-parquet/2``: episodes in the order they start at the write head (row 1, env 1)."""
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow cannot be installed")
    cols = pq.read_table(DATA / "golden_episodes.parquet").to_pydict()
    keys = ("episode_index", "env", "row", "frame_index")
    assert list(zip(*(cols[k] for k in keys), strict=True)) == [
        (0, 1, 1, 0), (0, 1, 2, 1),  # the oldest transition, row 1 of env 1: terminated at 2
        (1, 0, 2, 0), (1, 0, 0, 1), (1, 0, 1, 2),  # wrapped round, terminated at row 1
        (2, 1, 0, 0),  # truncated
    ]  # fmt: skip
    assert cols["index"] == [0, 2, 1, 3, 5, 4]  # chronological, from the write head
    assert cols["timestamp"] == [0.0, 1.0, 0.0, 1.0, 2.0, 0.0]  # no fps recorded: 1


def test_golden_csv_without_its_sidecar_is_rows_only(tmp_path: Path) -> None:
    """The CSV rows alone (as skrl reads them): row ``t * num_envs + env``, no metadata."""
    rows = tmp_path / "rows.csv"
    rows.write_bytes((DATA / "golden.csv").read_bytes())
    dataset = load(rows, num_envs=2)
    assert dataset.metadata.get("env_id") is None
    assert np.array_equal(dataset.tensors["actions"].reshape(-1), [0, 1, 2, 3, 1, 0])


def test_golden_parquet_and_npz_convert_to_the_same_npz_bytes(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow", reason="pyarrow cannot be installed on this Python")
    from expcli import convert

    convert(DATA / "golden.parquet", tmp_path / "from-parquet.npz")
    convert(DATA / "golden.npz", tmp_path / "from-npz.npz")  # today's zip entries' dates
    npz = (tmp_path / "from-npz.npz").read_bytes()
    assert (tmp_path / "from-parquet.npz").read_bytes() == npz
