"""split partitions the episodes exactly; filter keeps exactly the episodes numpy selects."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expcli import RandomMemory, load
from expcli.errors import ConfigError, SchemaError
from expcli.shaping.verbs import filter_episodes, split
from tests.replay.episode_data import memories
from tests.shaping.reference import episodes
from tests.shaping.test_merge import FORMATS, written

SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def clocks_of(path: Path) -> list[tuple[int, ...]]:
    """The episodes of a one-column output, each as the clocks of its samples."""
    data = load(path)
    clock = np.asarray(data.tensors["clock"])[:, 0, 0]
    done = (np.asarray(data.tensors["terminated"]) | np.asarray(data.tensors["truncated"]))[:, 0, 0]
    ends = [*np.flatnonzero(done).tolist()]
    if not ends or ends[-1] != len(clock) - 1:
        ends.append(len(clock) - 1)
    out, start = [], 0
    for end in ends:
        out.append(tuple(int(c) for c in clock[start : end + 1]))
        start = end + 1
    return [e for e in out if e]


@SETTINGS
@given(
    memory=memories, fmt=st.sampled_from(FORMATS), seed=st.integers(0, 5), parts=st.integers(2, 3)
)
def test_split_partitions_the_complete_episodes(
    tmp_path_factory: pytest.TempPathFactory, memory: RandomMemory, fmt: str, seed: int, parts: int
) -> None:
    folder = tmp_path_factory.mktemp("split")
    source = written(memory.to_dataset(), folder, "src", fmt)
    clock = memory.tensors["clock"].numpy().reshape(-1)
    complete = [tuple(int(clock[c]) for c in e.cells) for e in episodes(memory) if e.complete]
    outputs = [folder / f"part{i}.npz" for i in range(parts)]
    results = split(source, outputs, seed=seed)
    found = [clocks_of(p) for p in outputs]
    assert sorted(e for part in found for e in part) == sorted(complete)  # each exactly once
    assert [r.episodes for r in results] == [len(part) for part in found]
    sizes = sorted(len(part) for part in found)
    assert sizes[-1] - sizes[0] <= 1  # equal shares
    again = [folder / f"again{i}.npz" for i in range(parts)]
    split(source, again, seed=seed)
    assert [clocks_of(p) for p in again] == found  # reproducible


@SETTINGS
@given(
    memory=memories,
    fmt=st.sampled_from(FORMATS),
    threshold=st.integers(-4, 4),
    longest=st.integers(1, 6),
)
def test_filter_keeps_what_numpy_selects(
    tmp_path_factory: pytest.TempPathFactory,
    memory: RandomMemory,
    fmt: str,
    threshold: int,
    longest: int,
) -> None:
    folder = tmp_path_factory.mktemp("filter")
    source = written(memory.to_dataset(), folder, "src", fmt)
    clock = memory.tensors["clock"].numpy().reshape(-1)
    found = episodes(memory)
    returns = np.asarray([e.returns for e in found])
    lengths = np.asarray([len(e.cells) for e in found])
    complete = np.asarray([e.complete for e in found], dtype=bool)
    where = f"return >= {threshold} and (length < {longest} or env == 0)"
    filter_episodes(source, folder / "out.npz", where=where)
    envs = np.asarray([e.env for e in found])
    mask = (returns >= threshold) & ((lengths < longest) | (envs == 0)) & complete
    expected = [tuple(int(clock[c]) for c in found[i].cells) for i in np.flatnonzero(mask)]
    target = folder / "out.npz"
    assert clocks_of(target) == expected


@SETTINGS
@given(memory=memories, count=st.integers(1, 5))
def test_top_keeps_the_best_complete_episodes(
    tmp_path_factory: pytest.TempPathFactory, memory: RandomMemory, count: int
) -> None:
    folder = tmp_path_factory.mktemp("top")
    source = written(memory.to_dataset(), folder, "src", ".npz")
    clock = memory.tensors["clock"].numpy().reshape(-1)
    found = list(episodes(memory))
    complete = [i for i, e in enumerate(found) if e.complete]
    best = sorted(complete, key=lambda i: (-found[i].returns, i))[:count]
    target = folder / "top.npz"
    filter_episodes(source, target, top=str(count))
    assert clocks_of(target) == [tuple(int(clock[c]) for c in found[i].cells) for i in sorted(best)]


def test_keep_and_drop_tensors(tmp_path: Path) -> None:
    from tests.replay.episode_data import make_memory

    memory = make_memory(6, 2, [2] * 8, seed=3)
    source = written(memory.to_dataset(), tmp_path, "src", ".npz")
    filter_episodes(source, tmp_path / "kept.npz", keep=["observations"], incomplete="keep")
    assert sorted(load(tmp_path / "kept.npz").tensors) == [
        "observations",
        "terminated",
        "truncated",
    ]
    filter_episodes(source, tmp_path / "dropped.npz", drop=["rewards", "clock"], incomplete="keep")
    assert sorted(load(tmp_path / "dropped.npz").tensors) == [
        "observations",
        "terminated",
        "truncated",
    ]
    with pytest.raises(ConfigError, match="--drop terminated: the done flags stay"):
        filter_episodes(source, tmp_path / "x.npz", drop=["terminated"])
    with pytest.raises(SchemaError, match="no tensor 'rewardz'"):
        filter_episodes(source, tmp_path / "x.npz", keep=["rewardz"])
    with pytest.raises(ConfigError, match=r"--where: unknown field 'retrun' at column 1"):
        filter_episodes(source, tmp_path / "x.npz", where="retrun > 0")
    assert not (tmp_path / "x.npz").exists()


def test_a_seam_stays_a_seam_even_at_the_end(tmp_path: Path) -> None:
    """A foreign layout's seam (an end the env never gave) keeps its listing when kept."""
    from expcli import save, summarize
    from expcli.formats.dataset import Dataset
    from expcli.formats.layout_keys import SEAMS_KEY
    from expcli.spec import CircularState

    truncated = np.zeros((9, 1, 1), dtype=bool)
    truncated[[2, 8]] = True  # row 8 is a seam: the last row, glued by a reader
    terminated = np.zeros((9, 1, 1), dtype=bool)
    terminated[5] = True
    tensors = {"rewards": np.ones((9, 1, 1), np.float32), "terminated": terminated,
               "truncated": truncated}  # fmt: skip
    source = save(Dataset(tensors, CircularState(0, 0, True), {SEAMS_KEY: [8]}), tmp_path / "s.npz")
    before = summarize(source).episodes
    assert before is not None and (before.complete, before.incomplete) == (2, 1)
    filter_episodes(source, tmp_path / "kept.npz", incomplete="keep", envs="0")
    after = summarize(tmp_path / "kept.npz").episodes
    assert after is not None and (after.complete, after.incomplete) == (2, 1)
    assert load(tmp_path / "kept.npz").metadata[SEAMS_KEY] == [8]
    filter_episodes(source, tmp_path / "dropped.npz", envs="0")
    assert len(load(tmp_path / "dropped.npz")) == 6
