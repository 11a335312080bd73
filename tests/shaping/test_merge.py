"""merge writes the concatenation of its sources' episodes, whatever their formats and wraps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expcli import RandomMemory, load, save, summarize
from expcli.errors import ConfigError
from expcli.formats.dataset import Dataset
from expcli.formats.layout_keys import SEAMS_KEY, STARTS_CUT_KEY
from expcli.formats.sharded import write as write_folder
from expcli.shaping.verbs import merge
from expcli.spec import CircularState
from tests.format_catalogue import SUFFIXES
from tests.replay.episode_data import memories
from tests.shaping.reference import Episode, episodes, rows_of

FULL = CircularState(0, 0, True)
FORMATS = (*SUFFIXES, "folder")


def written(dataset: Dataset, folder: Path, name: str, fmt: str) -> Path:
    """``dataset`` saved in ``fmt`` (a folder: shards of two rows, so many shards)."""
    if fmt == "folder":
        path = folder / name
        row_bytes = sum(
            int(np.prod(a.shape[1:])) * a.dtype.itemsize for a in dataset.tensors.values()
        )
        write_folder(dataset, path, overwrite=True, shard_bytes=2 * row_bytes)
        return path
    return save(dataset, folder / f"{name}{fmt}")


def expected_rows(sources: list[tuple[Dataset, list[Episode]]]) -> dict[str, np.ndarray]:
    """The sources' episodes one after the other; an open end not last marked truncated."""
    parts = [rows_of(dataset, chosen) for dataset, chosen in sources]
    out = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    ends = np.cumsum([len(e.cells) for _, chosen in sources for e in chosen]) - 1
    closed = [bool(e.terminated or e.truncated) for _, chosen in sources for e in chosen]
    for end, done in zip(ends[:-1], closed[:-1], strict=True):
        if not done:
            out["truncated"][end] = True
    return out


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    a=memories,
    b=memories,
    formats=st.tuples(st.sampled_from(FORMATS), st.sampled_from(FORMATS)),
    out=st.sampled_from(FORMATS),
    keep=st.booleans(),
)
def test_merge_is_the_concatenation_of_episodes(
    tmp_path_factory: pytest.TempPathFactory,
    a: RandomMemory,
    b: RandomMemory,
    formats: tuple[str, str],
    out: str,
    keep: bool,
) -> None:
    folder = tmp_path_factory.mktemp("merge")
    sources, paths = [], []
    for name, memory, fmt in (("a", a, formats[0]), ("b", b, formats[1])):
        dataset = memory.to_dataset()
        paths.append(written(dataset, folder, name, fmt))
        chosen = [e for e in episodes(memory) if keep or e.complete]
        sources.append((dataset, chosen))
    target = folder / ("merged" if out == "folder" else f"merged{out}")
    result = merge(paths, target, incomplete="keep" if keep else "drop")
    expected = expected_rows(sources)
    merged = load(target)
    assert merged.num_envs == 1
    assert result.episodes == sum(len(chosen) for _, chosen in sources)
    assert result.transitions == len(expected["clock"]) == len(merged)
    for name, rows in expected.items():
        np.testing.assert_array_equal(np.asarray(merged.tensors[name])[:, 0], rows, err_msg=name)
    lineage = merged.metadata["lineage"][-1]
    assert lineage["verb"] == "merge"
    assert [s["path"] for s in lineage["sources"]] == [p.name for p in paths]  # beside it
    episodes_of = summarize(target).episodes
    assert episodes_of is not None
    chosen = [e for _, picked in sources for e in picked]
    assert episodes_of.complete == sum(e.complete for e in chosen)
    assert episodes_of.incomplete == sum(not e.complete for e in chosen)
    assert (
        bool(merged.metadata.get(STARTS_CUT_KEY) or merged.metadata.get(SEAMS_KEY))
        == any(not e.complete for e in chosen[:-1])
        or not chosen[-1].complete
    )


def test_a_difference_is_refused_in_one_line_and_nothing_is_written(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    tensors = {
        "observations": rng.standard_normal((4, 2, 3)).astype(np.float32),
        "terminated": np.zeros((4, 2, 1), dtype=bool),
        "truncated": np.zeros((4, 2, 1), dtype=bool),
    }
    a = save(Dataset(tensors, FULL, {"env_id": "A-v0"}), tmp_path / "a.npz")
    b = save(Dataset(tensors, FULL, {"env_id": "B-v0"}), tmp_path / "b.npz")
    wide = dict(tensors, observations=tensors["observations"].astype(np.float64))
    c = save(Dataset(wide, FULL, {"env_id": "A-v0"}), tmp_path / "c.npz")
    with pytest.raises(ConfigError, match=r"env_id \"B-v0\" against \"A-v0\" \(--allow env-id"):
        merge([a, b], tmp_path / "out.npz")
    with pytest.raises(ConfigError, match="tensor 'observations' is float64, expected float32"):
        merge([a, c], tmp_path / "out.npz")
    assert not (tmp_path / "out.npz").exists()
    result = merge([a, b], tmp_path / "out.npz", allow=["env-id"])
    recorded = load(tmp_path / "out.npz").metadata["lineage"][0]["arguments"]
    assert recorded["allow"] == ["env-id"]
    assert "B-v0" in json.dumps(recorded["allowed_differences"])
    assert result.transitions == 16
