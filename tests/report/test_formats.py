"""A report of every format, layout and folder expcli reads: its numbers are summarize's
(``inspect --json``'s, carried whole in the page), and its player's frames are the frames
the reader gives, pixel for pixel."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from expcli import load, summarize
from expcli.formats import Dataset, sharded, write_dataset
from expcli.formats.layouts import write_layout
from expcli.report import write_report
from expcli.spec import CircularState
from tests.format_catalogue import (
    FILE_FORMATS,
    LAYOUT_DEFAULT_FILES,
    LAYOUT_FOLDERS,
    SHARD_FORMATS,
    suffix_of,
)
from tests.report.datasets import frames_dataset
from tests.report.page_data import carried, png, same_json

DATA = Path(__file__).parents[1] / "data"
Writer = Callable[[Dataset, Path], Path]


def _file(suffix: str) -> Writer:
    return lambda data, folder: write_dataset(data, folder / f"d{suffix}")


def _shards(fmt: str) -> Writer:
    def write(data: Dataset, folder: Path) -> Path:
        rows_bytes = sum(a[0].nbytes for a in data.tensors.values())
        sharded.write(data, folder / "shards", overwrite=False, shard_bytes=7 * rows_bytes,
                      shard_format=fmt)  # fmt: skip
        return folder / "shards"

    return write


def _layout(layout: str, name: str, storage: str | None = None) -> Writer:
    def write(data: Dataset, folder: Path) -> Path:
        with warnings.catch_warnings():  # every layout says what it does not keep
            warnings.filterwarnings("ignore", ".*layout does not keep", UserWarning)
            return write_layout(data, folder / name, layout, overwrite=False, format=storage)

    return write


def _given(name: str) -> Writer:
    return lambda data, folder: DATA / name


OWN: dict[str, Writer] = {
    **{fmt: _file(suffix_of(fmt)) for fmt in FILE_FORMATS},
    **{f"{fmt}-shards": _shards(fmt) for fmt in SHARD_FORMATS},
}
"""expcli's own files and folders: they keep the circular state, so they are written wrapped."""

WRITERS: dict[str, Writer] = {
    **OWN,
    **{lay: _layout(lay, f"{lay}{suffix_of(fmt)}") for lay, fmt in LAYOUT_DEFAULT_FILES},
    **{f"{lay}-{to}": _layout(lay, f"{lay}-v0", to) for lay, to in LAYOUT_FOLDERS},  # Minari: an id
    "lerobot-made": _given("lerobot_made"),  # written by LeRobot itself
}
"""Every file format and shard format; each file layout in its default format (the others
are the same formats' readers), each folder layout in each of its storages."""


@pytest.mark.parametrize("kind", list(WRITERS))
def test_a_report_of_every_format_and_layout(tmp_path: Path, kind: str) -> None:
    data = frames_dataset(30, 2, state=CircularState(11, 1, True) if kind in OWN else None)
    source = WRITERS[kind](data, tmp_path)
    page = tmp_path / "report.html"
    summary = write_report(source, html=page, random_episodes=0)
    assert same_json(carried(page, "summary-json"), summarize(source).to_json(per_env=True))
    assert same_json(summary.to_json(per_env=True), carried(page, "summary-json"))
    text = page.read_text(encoding="utf-8")
    assert summary.episodes is not None and summary.episodes.complete > 0
    assert f'data-count="{summary.episodes.complete}"' in text
    episodes = carried(page, "player-data")["episodes"]
    assert 1 <= len(episodes) <= 3 and {"best", "worst", "median"} <= {
        name for e in episodes for name in e["names"]
    }
    read = load(source)
    images = [name for name, a in read.tensors.items()
              if name.startswith("observations") and a.ndim == 5]  # fmt: skip
    for episode in episodes:
        assert episode["length"] == len(episode["steps"])  # short: every step shown
        if episode["rewards"] is not None:
            assert sum(episode["rewards"]) == pytest.approx(episode["return"], abs=1e-5)
        for name in images:
            frames = episode["frames"][name]
            assert len(frames["images"]) == episode["length"]
            for uri, row in zip(frames["images"], frames["rows"], strict=True):
                stored = np.asarray(read.tensors[name][row, episode["env"]])
                assert np.array_equal(png(uri), stored), (name, row)
    if kind == "lerobot-made":
        assert images  # LeRobot's image feature plays
