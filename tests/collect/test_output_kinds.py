"""Collect's output kinds are pieces given rows, a metadata provider and the settings.

A ``FolderOutput`` is driven here by a bare ``Collector`` (no ``CollectJob``): it writes
the shards of the rows it is given, asks the provider for the metadata, and the folder
reads back as the rows collected; ``--resume`` of that folder goes on through
``continue_folder``, reading the stored shards through the sharded folder's reader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import expcli
from expcli.collect import Collector
from expcli.collect.folder_run import FolderOutput
from expcli.collect.output_parts import RunRows
from expcli.collect.settings import CollectSettings
from expcli.envs import ParallelEnv
from expcli.formats.rows import WritePlan
from expcli.formats.table import SHARDED_FOLDER
from expcli.memory import RandomMemory


def _run(folder: Path, settings: CollectSettings, asked: list[Any]) -> Any:
    env = ParallelEnv.from_id("CartPole-v1", 2, para_mode="dummy")
    try:
        memory = RandomMemory(64, 2, device="cpu")  # a staging area: 64 rows per shard
        collector = Collector(env, memory, seed=settings.seed)

        def metadata(in_file: tuple[int, int] | None) -> dict[str, Any]:
            asked.append(in_file)
            return {"env_id": "CartPole-v1", "collector": {"mode": "dummy"}}

        plan = WritePlan(folder, SHARDED_FOLDER, frames=settings.frames)
        output = FolderOutput(RunRows(memory, collector.tracker), plan, settings, metadata)
        assert settings.steps is not None
        stats = collector.collect(settings.steps)
        return output.finish(stats)
    finally:
        env.close()


def test_a_folder_output_writes_the_rows_it_is_given(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    settings = CollectSettings("CartPole-v1", envs=2, steps=300, seed=3).validate()
    asked: list[Any] = []
    saved = _run(folder, settings, asked)
    assert saved is not None and saved.path == folder and saved.transitions == 300
    assert (300, saved.episodes) in asked  # the final manifest's counts
    dataset = expcli.load(folder)
    assert len(dataset) == 300
    assert dataset.metadata["collector"]["collect_settings"]["steps"] == 300
    assert dataset.metadata["collector"]["segments"] == [{"segment": 0, "seed": 3, "first_row": 0}]

    again = CollectSettings("CartPole-v1", envs=2, steps=500, seed=4, resuming=True).validate()
    resumed = _run(folder, again, [])
    assert resumed is not None and resumed.transitions == 500
    whole = expcli.load(folder)
    assert len(whole) == 500
    assert np.array_equal(
        np.asarray(whole.tensors["observations"])[:150], np.asarray(dataset.tensors["observations"])
    )
    assert [s["segment"] for s in whole.metadata["collector"]["segments"]] == [0, 1]
