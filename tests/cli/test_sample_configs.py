"""Every file in sample_configs/ runs as is (output redirected to a temporary folder)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli import load
from expcli.cli.app import app

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "sample_configs").glob("*.toml"))


def _params() -> list[object]:
    marks = {"cartpole_ray.toml": [pytest.mark.ray]}
    return [pytest.param(c, id=c.stem, marks=marks.get(c.name, [])) for c in CONFIGS]


def test_there_is_one_config_per_mode() -> None:
    modes = {tomllib.loads(c.read_text())["mode"] for c in CONFIGS}
    assert {"dummy", "subproc", "ray"} <= modes
    assert any(tomllib.loads(c.read_text())["env"] == "Pendulum-v1" for c in CONFIGS)


@pytest.mark.parametrize("config", _params())
def test_config_runs(config: Path, tmp_path: Path) -> None:
    if tomllib.loads(config.read_text())["mode"] == "ray":
        pytest.importorskip("ray")
    settings = tomllib.loads(config.read_text())
    out = tmp_path / Path(settings["output"]).name
    result = CliRunner().invoke(app, ["collect", "--config", str(config), "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    dataset = load(out)
    meta = dataset.metadata
    assert meta["env_id"] == settings["env"] and meta["collector"]["mode"] == settings["mode"]
    assert dataset.num_envs == settings["envs"]
    if "steps" in settings:
        assert len(dataset) == settings["steps"]
    else:
        done = np.asarray(dataset.tensors["terminated"]) | np.asarray(dataset.tensors["truncated"])
        assert int(done.sum()) >= settings["episodes"]
    for key, value in settings.get("env-kwargs", {}).items():
        assert meta["env_spec"]["kwargs"][key] == value
