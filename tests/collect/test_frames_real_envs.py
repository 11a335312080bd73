"""Frames once on real envs: a seeded run stored once reads back as the same run stored full.

Each case collects one ``--seed``-ed run twice, ``--frames full`` and ``--frames once``, to
every native target (``.pt``, ``.npz``, ``.h5``, ``.parquet``, and folders of npz and
Parquet shards small enough that shard boundaries fall inside episodes). Every tensor must
read back bit for bit, the once file must hold exactly the next-observation cells that are
not the next row's observation (episode ends and each file's or shard's last row, nothing
else), and the run must replay in gymnasium stepped by hand (``tests.real_envs.oracle``),
which checks each episode end's true final observation: Pong (episodes cut by a frame
limit: truncation), CartPole (16-byte cells, below ``FRAMES_CELL_BYTES``: stored full),
MiniGrid (a Dict whose ``image`` leaf is stored once and ``direction`` leaf full, episodes
cut by ``max_steps``), and one run in subprocesses with ``--async none``. A few files are
also written spooled (shards merged into the file) or from a wrapped memory. The oracle
replays the once form; the full form is the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli import load
from expcli.cli.app import app
from expcli.formats import open_lazy
from expcli.formats.frames import FRAMES_CELL_BYTES, DerivedRows
from tests.format_catalogue import SHARD_FORMATS, frames_once, suffix_of
from tests.formats.test_frames import same_bytes
from tests.real_envs.needs import require
from tests.real_envs.oracle import assert_replays

DROP_MISSION = "tests.real_envs.own_envs:drop_mission"


@dataclass(frozen=True)
class Run:
    """One seeded ``expcli collect`` run and what its once form stores once."""

    label: str
    env_id: str
    options: tuple[str, ...]
    once: tuple[str, ...]
    needs: tuple[str, ...] = ()
    truncates: bool = True
    envs: int = 2
    steps: int = 100
    shard_rows: int = 7

    def arguments(self, output: Path, frames: str, target: str) -> list[str]:
        """The collect arguments writing ``target`` (see ``TARGETS``) to ``output``."""
        args = ["collect", self.env_id, "--envs", str(self.envs), "--steps", str(self.steps)]
        args += ["--seed", "5", "--frames", frames, "-o", str(output), "-q", *self.options]
        if target.endswith("shards"):
            args += ["--shard-size", str(self.shard_rows)]
            args += ["--shard-format", target.removesuffix(" shards")]
        elif target.endswith("spooled"):
            args += ["--spool"]
        elif target.endswith("wrapped"):
            args += ["--memory-size", str(self.steps // self.envs // 3 + 1)]
        return args


RUNS = {
    run.label: run
    for run in (
        Run(
            "Pong",
            "ale_py:ALE/Pong-v5",
            ("--mode", "dummy", "--env-kwargs", '{"max_num_frames_per_episode": 100}'),
            ("next_observations",),
            needs=("ale_py",),
            steps=150,
        ),
        Run("CartPole", "CartPole-v1", ("--mode", "dummy"), (), truncates=False, envs=3, steps=120),
        Run(
            "MiniGrid",
            "minigrid:MiniGrid-Empty-5x5-v0",
            ("--mode", "dummy", "--wrapper", DROP_MISSION, "--env-kwargs", '{"max_steps": 9}'),
            ("next_observations/image",),
            needs=("minigrid",),
            envs=3,
            steps=120,
        ),
        Run(
            "MiniGrid-subproc-none",
            "minigrid:MiniGrid-Empty-5x5-v0",
            ("--mode", "subproc", "--async", "none", "--wrapper", DROP_MISSION)
            + ("--env-kwargs", '{"max_steps": 15}'),
            ("next_observations/image",),
            needs=("minigrid",),
            envs=3,
            steps=120,
            shard_rows=6,
        ),
    )
}
TARGETS = (
    *(suffix_of(fmt) for fmt in frames_once()),
    *(f"{shards} shards" for shards in SHARD_FORMATS),
)
"""Every native target (each file format that stores next observations once, each shard
format); a file may also be ``spooled`` (shards merged) or ``wrapped`` (a memory of a third
of the run's rows, its oldest overwritten: the oracle cannot replay it)."""
CASES = [
    pytest.param(label, target, id=f"{label}-{target.replace(' ', '-')}")
    for label, target in (
        *((label, target) for label in RUNS if "subproc" not in label for target in TARGETS),
        ("MiniGrid-subproc-none", "npz shards"),
        ("MiniGrid", ".h5 spooled"),
        ("Pong", ".parquet spooled"),
        ("Pong", ".npz wrapped"),
        ("MiniGrid", ".parquet wrapped"),
    )
]


def collect(run: Run, folder: Path, frames: str, target: str) -> Path:
    """The run stored in ``frames`` form to ``target`` (a file suffix or a shard format)."""
    suffix = "" if target.endswith("shards") else target.split()[0]
    output = folder / f"{frames}-{target.split()[-1]}{suffix}"
    result = CliRunner().invoke(app, run.arguments(output, frames, target))
    assert result.exit_code == 0, result.stderr + result.stdout
    return output


def pieces(path: Path) -> list[tuple[Path, int, bool]]:
    """The files of ``path`` with the row each starts at, and whether its last row wraps."""
    if path.is_file():
        return [(path, 0, True)]
    manifest = json.loads((path / "manifest.json").read_text())
    out, start = [], 0
    for entry in manifest["shards"]:
        out.append((path / entry["file"], start, False))
        start += int(entry["rows"])
    assert len(out) > 1, "the run should span several shards"
    return out


def stored_cells(array: Any) -> np.ndarray | None:
    """The flat cells a once tensor holds on disk; ``None`` for a tensor stored whole.

    An npz, ``.pt`` or HDF5 file's tensor lists them; a Parquet column holds them as its
    non-null cells.
    """
    if isinstance(array, DerivedRows):
        return np.asarray(array.cells)
    valid = getattr(array, "valid", None)
    if valid is not None:
        return np.flatnonzero(np.asarray(valid[:]).reshape(-1))
    return None


def differing_cells(following: np.ndarray, observations: np.ndarray, wrap: bool) -> np.ndarray:
    """Flat cells whose bytes are not the next row's observation (numpy, as a reference).

    Without ``wrap`` every cell of the last row counts: its next row is not in the file.
    """
    size, envs = following.shape[:2]
    ahead = np.roll(observations, -1, axis=0)
    a, b = (np.ascontiguousarray(x).reshape(size, envs, -1) for x in (following, ahead))
    differ = (a.view(np.uint8) != b.view(np.uint8)).any(axis=2)
    if not wrap:
        differ[-1] = True
    return np.flatnonzero(differ)


def check_stored_cells(path: Path, full: dict[str, np.ndarray], once: tuple[str, ...]) -> None:
    """Each file of ``path`` holds exactly the cells that differ from the next row's, or all.

    A shard keeps its last row whole: its next row is the next shard's.
    """
    for file, start, wrap in pieces(path):
        lazy, close = open_lazy(file)
        try:
            found = {}
            for name, array in lazy.tensors.items():
                cells = stored_cells(array)
                if cells is None:
                    continue
                rows = slice(start, start + array.shape[0])
                observations = full[name.removeprefix("next_")][rows]
                expected = differing_cells(full[name][rows], observations, wrap)
                assert np.array_equal(cells, expected), (file.name, name)
                found[name] = cells.size / (array.shape[0] * array.shape[1])
        finally:
            close()
        assert sorted(found) == sorted(once), file.name
        assert all(share < 0.5 for share in found.values()), (file.name, found)


def metadata(meta: dict[str, Any], frames: str) -> dict[str, Any]:
    """``meta`` without what differs between two runs of each form: time, ``--frames``.

    A folder records its settings (to resume with); a file does not.
    """
    out = {**meta, "created": None, "collector": dict(meta["collector"])}
    settings = out["collector"].pop("collect_settings", None)
    if settings is not None:
        assert settings.pop("frames") == frames
        out["collector"]["collect_settings"] = settings
    return out


def disk_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.iterdir())


@pytest.fixture(scope="module")
def replayed() -> set[str]:
    """The runs whose once form the oracle has replayed already (one target each)."""
    return set()


@pytest.mark.parametrize(("label", "target"), CASES)
def test_once_reads_back_as_the_full_run(
    tmp_path: Path, label: str, target: str, replayed: set[str]
) -> None:
    run = RUNS[label]
    require(run.needs)
    full_path = collect(run, tmp_path, "full", target)
    once_path = collect(run, tmp_path, "once", target)
    full, once = load(full_path), load(once_path)
    assert once.state == full.state
    assert sorted(once.tensors) == sorted(full.tensors)
    for name, expected in full.tensors.items():
        assert same_bytes(once.tensors[name], np.asarray(expected)), name
    assert metadata(full.metadata, "full") == metadata(once.metadata, "once")

    tensors = {name: np.asarray(array) for name, array in full.tensors.items()}
    check_stored_cells(once_path, tensors, run.once)
    check_stored_cells(full_path, tensors, ())
    oldest = full.state.memory_index
    assert (oldest > 0) == target.endswith("wrapped")
    tensors = {name: np.roll(array, -oldest, axis=0) for name, array in tensors.items()}
    nexts = [name for name in tensors if name.startswith("next_observations")]
    big = [name for name in nexts if tensors[name][0, 0].nbytes >= FRAMES_CELL_BYTES]
    assert nexts and big == list(run.once)
    if run.once and "parquet" in target:
        # episode by episode, a next observation is the next row's in the file: zstd finds
        # the repeat in the full form too (MiniGrid's small shards: once 53,958 bytes,
        # full 53,521); the nulls save the bytes before compression, not always after
        assert disk_bytes(once_path) < disk_bytes(full_path) * 1.05
    elif run.once:
        assert disk_bytes(once_path) < disk_bytes(full_path)
    check_episode_ends(tensors, run.once, run.truncates)
    if label not in replayed and not oldest:
        replayed.add(label)
        report = assert_replays(once_path)
        assert report.transitions == run.steps and report.episodes > 0


def check_episode_ends(
    tensors: dict[str, np.ndarray], once: tuple[str, ...], truncates: bool
) -> None:
    """Episodes end inside the run (some truncated, if ``truncates``), their next observations kept.

    At least one truncated (or else ended) row's next observation differs from the
    following row's, the reset's: the once form cannot have derived it.
    """
    truncated = tensors["truncated"][..., 0]
    ended = tensors["terminated"][..., 0] | truncated
    assert ended[:-1].any()
    assert truncated[:-1].any() == truncates
    if truncates:
        ended = truncated
    for name in once:
        following = tensors[name][:-1][ended[:-1]]
        reset = tensors[name.removeprefix("next_")][1:][ended[:-1]]
        assert (following != reset).reshape(len(following), -1).any(axis=1).any(), name
