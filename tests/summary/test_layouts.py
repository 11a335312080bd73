"""Foreign layouts: every number against numpy on the arrays the readers produce."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli import summarize
from expcli.conversion import load
from expcli.formats.layouts import SEAMS_KEY, write_layout
from expcli.spec import CircularState, chronological_rows
from expcli.summary.chronology import segments
from expcli.summary.stats import TensorAccumulator
from tests.format_catalogue import SKRL_EVERY_ROW
from tests.formats.layouts.sample import make_dataset
from tests.summary.reference import check_summary

# Writing lossy datasets in foreign layouts on purpose: their one-line warning of what the
# layout does not keep is tested in tests/formats/layouts/test_layout_losses.py.
pytestmark = pytest.mark.filterwarnings("ignore:.*layout does not keep:UserWarning")

TARGETS = {
    "d4rl": "d.hdf5",
    "tianshou": "t.h5",
    "minari": "minari_folder-v0",
    "skrl": "s.pt",
}


@pytest.mark.parametrize("layout", list(TARGETS))
def test_foreign_layouts(tmp_path: Path, layout: str) -> None:
    path = write_layout(make_dataset(), tmp_path / TARGETS[layout], layout, overwrite=False)
    read = load(path)
    summary = summarize(path, check=True)
    assert summary.layout == layout
    seams = {(row, 0) for row in read.metadata.get(SEAMS_KEY, [])}
    check_summary(summary, read, wrapped=summary.wrapped, seams=seams)
    if layout == "minari":
        # Minari's groups: [3,4] [5,0,1] [2](no flag: a seam) [2,3] [4,5] [0,1](open).
        assert summary.episodes is not None
        assert (summary.episodes.complete, summary.episodes.incomplete) == (4, 2)
        assert not summary.failed, summary.checks


@pytest.mark.parametrize("suffix", SKRL_EVERY_ROW)
def test_skrl_unwritten_rows_are_left_out(tmp_path: Path, suffix: str) -> None:
    """A real skrl memory saved before it filled: its NaN rows are not data."""
    torch = pytest.importorskip("torch")
    from skrl.memories.torch import RandomMemory

    memory = RandomMemory(memory_size=5, num_envs=2, device="cpu")
    memory.create_tensor("observations", size=3, dtype=torch.float32)
    memory.create_tensor("rewards", size=1, dtype=torch.float32)
    memory.create_tensor("terminated", size=1, dtype=torch.bool)
    for step in range(3):
        memory.add_samples(
            observations=torch.full((2, 3), float(step)),
            rewards=torch.ones(2, 1),
            terminated=torch.tensor([[step == 1], [False]]),
        )
    memory.add_samples(observations=torch.full((1, 3), 9.0), rewards=torch.ones(1, 1),
                       terminated=torch.zeros(1, 1, dtype=torch.bool))  # fmt: skip
    memory.save(str(tmp_path), format=suffix)
    path = next((tmp_path / "memories").iterdir())
    summary = summarize(path, check=True)
    assert summary.layout == "skrl"
    assert (summary.transitions, summary.unwritten) == (7, 3)
    stats = {t.name: t for t in summary.tensors}
    assert stats["observations"].nan == 0 and stats["observations"].max == 9.0
    assert not summary.failed
    assert any(f.status == "note" and f.check == "finite" for f in summary.checks or ())


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(1, 9),
    envs=st.integers(1, 4),
    data=st.data(),
)
def test_segments_cover_each_valid_transition_once_in_order(
    size: int, envs: int, data: st.DataObject
) -> None:
    filled = data.draw(st.booleans())
    index = data.draw(st.integers(0, size - 1))
    env = data.draw(st.integers(0, envs - 1))
    state = CircularState(index, env, filled)
    order = chronological_rows(state, size, envs)
    per_column: list[list[int]] = [[] for _ in range(envs)]
    for part in segments(state, size, envs):
        for row in range(part.start, part.stop):
            for j in range(part.first, part.last):
                per_column[j].append(row)
    assert sum(map(len, per_column)) == state.valid_length(size, envs)
    for j, rows in enumerate(per_column):
        assert rows == order[j, : len(rows)].tolist()


@settings(max_examples=100, deadline=None)
@given(
    values=st.lists(
        st.floats(allow_nan=False, width=32, min_value=-(2.0**100), max_value=2.0**100)
        | st.sampled_from([np.nan, np.inf, -np.inf]),
        max_size=60,
    ),
    cuts=st.lists(st.integers(0, 60), max_size=5),
)
def test_accumulator_chunks_agree_with_numpy(values: list[float], cuts: list[int]) -> None:
    array = np.asarray(values, dtype=np.float32)
    acc = TensorAccumulator("x", array.dtype, array.shape)
    bounds = [0, *sorted(c for c in cuts if c <= len(array)), len(array)]
    for a, b in zip(bounds, bounds[1:], strict=False):
        acc.update(array[a:b])
    got = acc.result()
    finite = array[np.isfinite(array)].astype(np.float64)
    assert (got.nan, got.inf) == (int(np.isnan(array).sum()), int(np.isinf(array).sum()))
    if finite.size == 0:
        assert np.isnan(got.mean) and np.isnan(got.min)
        return
    assert (got.min, got.max) == (finite.min(), finite.max())
    scale = max(1.0, float(np.abs(finite).max()))
    assert got.mean == pytest.approx(np.mean(finite), rel=1e-9, abs=1e-12 * scale)
    assert got.std == pytest.approx(np.std(finite), rel=1e-9, abs=1e-12 * scale)
