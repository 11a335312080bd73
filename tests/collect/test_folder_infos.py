"""``collect --infos`` to a sharded folder, and to a file spooled through one: the
``infos/<key>`` tensors are stored as an in-memory run stores them, bit for bit, even for a
key first met after shards were written (those shards read it as NaN, as the in-memory
run's rows before that step are), and a resumed run goes on storing them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import expcli
from tests.cli.test_collect_cmd import COUNTING_ID
from tests.collect.test_folder_collect import expcli_cli

# CountingEnv reports {"t": t} on even steps only: the key is first met at the second row
RUN = [*("collect", COUNTING_ID, "--envs", "2", "--seed", "3", "--mode", "dummy"), "--infos"]
STEPS = ["--steps", "40", "-q"]


def test_folder_and_spooled_file_equal_an_in_memory_run(tmp_path: Path) -> None:
    expcli_cli(*RUN, *STEPS, "-o", str(tmp_path / "memory.npz"), "--no-spool")
    expcli_cli(*RUN, *STEPS, "-o", str(tmp_path / "run"), "--shard-size", "1")
    expcli_cli(*RUN, *STEPS, "-o", str(tmp_path / "spooled.npz"), "--spool", "--shard-size", "1")
    want = expcli.load(tmp_path / "memory.npz")
    assert "infos/t" in want.tensors
    for got in (expcli.load(tmp_path / "run"), expcli.load(tmp_path / "spooled.npz")):
        assert sorted(got.tensors) == sorted(want.tensors)
        for name, array in want.tensors.items():
            assert got.tensors[name].dtype == array.dtype, name
            assert got.tensors[name].tobytes() == array.tobytes(), name
    shards = json.loads((tmp_path / "run" / "manifest.json").read_text())["shards"]
    assert shards[0]["missing"] == ["infos/t"] and "missing" not in shards[1]


def test_resumed_run_goes_on_storing_infos(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    expcli_cli(*RUN, *STEPS, "-o", str(folder), "--shard-size", "1")
    manifest = json.loads((folder / "manifest.json").read_text())
    # as a kill after the first shard leaves it: one row, before any info was met
    manifest["shards"] = [{k: v for k, v in manifest["shards"][0].items() if k != "missing"}]
    manifest["memory_size"] = 1
    del manifest["tensors"]["infos/t"]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    expcli_cli("collect", COUNTING_ID, "--resume", str(folder), "-q")  # its module, given again
    whole = expcli.load(folder)
    assert whole.memory_size == 20 and len(whole.metadata["collector"]["segments"]) == 2
    t = whole.tensors["infos/t"][..., 0]
    reached = whole.tensors["observations"][..., 0] + 1  # the step's t (obs[0] is t before it)
    even = reached % 2 == 0
    assert even[1:].any() and np.array_equal(t[even], reached[even])
    assert np.isnan(t[~even]).all()
