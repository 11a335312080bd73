"""``expcli collect --layout``: the run goes to a folder ``TARGET-collecting`` and is converted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from expcli import load
from expcli.cli.app import app


def collect(*args: str) -> object:
    return CliRunner().invoke(app, ["collect", "CartPole-v1", "--mode", "dummy", *args])


def test_a_run_collected_in_the_lerobot_layout_equals_the_same_run_in_a_file(
    tmp_path: Path,
) -> None:
    target, plain = tmp_path / "cartpole-lr", tmp_path / "cartpole.npz"
    common = ["--envs", "3", "--steps", "40", "--seed", "5"]
    done = collect(*common, "--layout", "lerobot", "-o", str(target))
    assert done.exit_code == 0, done.stderr + done.stdout
    assert "lerobot layout" in done.stdout
    assert (target / "meta" / "info.json").is_file()
    assert not (tmp_path / "cartpole-lr-collecting").exists()  # removed once converted
    assert collect(*common, "-o", str(plain)).exit_code == 0
    got, want = load(target), load(plain)
    assert sorted(got.tensors) == sorted(want.tensors)
    for name, array in want.tensors.items():
        assert np.array_equal(got.tensors[name], array), name
    assert got.state == want.state


def test_the_target_is_checked_before_the_envs_start(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()
    done = collect("--steps", "5", "--layout", "lerobot", "-o", str(target))
    assert done.exit_code != 0 and "exists" in done.stderr
    assert not (tmp_path / "taken-collecting").exists()
    assert collect("--steps", "5", "--layout", "lerobot").exit_code == 2  # no --output


def test_an_earlier_run_left_collecting_is_named_with_how_to_finish_it(tmp_path: Path) -> None:
    (tmp_path / "run-v0-collecting").mkdir()
    done = collect("--steps", "5", "--layout", "minari", "-o", str(tmp_path / "run-v0"))
    assert done.exit_code == 2
    assert "holds an earlier run" in done.stderr and "--resume" in done.stderr
    assert "expcli convert" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_storage_picks_the_layouts_storage_and_quiet_prints_the_target_only(
    tmp_path: Path,
) -> None:
    target = tmp_path / "cartpole-minari-v0"
    done = collect("--envs", "2", "--steps", "30", "--layout", "minari", "--storage", "arrow",
                   "-o", str(target), "-q")  # fmt: skip
    assert done.exit_code == 0, done.stderr + done.stdout
    assert done.stdout.strip() == str(target)
    episodes = sorted((target / "data").glob("*/part-0.arrow"))
    assert episodes and not list((target / "data").glob("*/*.parquet"))
    assert load(target).tensors["observations"].shape[:2] == (30, 1)  # one env column
    refused = collect("--steps", "5", "--to", "parquet", "-o", str(tmp_path / "x.pt"))
    assert refused.exit_code == 2 and "--layout" in refused.stderr
    refused = collect("--steps", "5", "--storage", "parquet", "-o", str(tmp_path / "x.pt"))
    assert refused.exit_code == 2 and "--storage picks the storage" in refused.stderr
    wrong = collect("--steps", "5", "--layout", "minari", "--storage", "csv", "-o",
                    str(tmp_path / "y"))  # fmt: skip
    assert wrong.exit_code == 2 and not (tmp_path / "y-collecting").exists()
