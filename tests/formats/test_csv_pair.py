"""A CSV and its sidecar are one output: refused together, replaced together, and put back
together when the second rename fails."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli.cli import app
from expcli.conversion import convert, load, save
from expcli.errors import OutputError, OutputExistsError
from expcli.files.atomic import check_before_commit
from expcli.formats.dataset import Dataset
from expcli.spec import CircularState


def dataset(value: float) -> Dataset:
    return Dataset(
        {"observations": np.full((5, 2, 3), value, np.float32)},
        CircularState(0, 0, True),
        {"env_id": f"Toy-{value}"},
    )


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_convert_refuses_an_existing_sidecar(tmp_path: Path) -> None:
    source = save(dataset(1.0), tmp_path / "a.npz")
    (tmp_path / "s.csv.meta.json").write_text('{"mine": true}')
    result = CliRunner().invoke(app, ["convert", str(source), str(tmp_path / "s.csv")])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"error: {tmp_path / 's.csv.meta.json'}: already exists; "
        "pass --overwrite (in Python, overwrite=True) to replace it"
    )
    assert sorted(os.listdir(tmp_path)) == ["a.npz", "s.csv.meta.json"]
    assert (tmp_path / "s.csv.meta.json").read_text() == '{"mine": true}'

    convert(source, tmp_path / "s.csv", overwrite=True)
    again = load(tmp_path / "s.csv")
    assert again.metadata["env_id"] == "Toy-1.0" and (again.tensors["observations"] == 1.0).all()
    assert sorted(os.listdir(tmp_path)) == ["a.npz", "s.csv", "s.csv.meta.json"]


def test_a_failed_csv_rename_puts_the_old_sidecar_back(tmp_path: Path) -> None:
    save(dataset(1.0), tmp_path / "s.csv")
    before = snapshot(tmp_path)

    def folder_in_the_way(tmp: Path) -> None:  # another program, between our two renames
        (tmp_path / "s.csv").unlink()
        (tmp_path / "s.csv").mkdir()

    with check_before_commit(folder_in_the_way), pytest.raises(OutputError, match="is a folder"):
        save(dataset(2.0), tmp_path / "s.csv", overwrite=True)
    assert snapshot(tmp_path) == {"s.csv.meta.json": before["s.csv.meta.json"]}
    assert sorted(os.listdir(tmp_path)) == ["s.csv", "s.csv.meta.json"]  # no temporary left


def test_losing_the_race_for_the_csv_removes_the_new_sidecar(tmp_path: Path) -> None:
    def someone_else_writes_it(tmp: Path) -> None:
        (tmp_path / "s.csv").write_text("theirs")

    with check_before_commit(someone_else_writes_it), pytest.raises(OutputExistsError):
        save(dataset(2.0), tmp_path / "s.csv", overwrite=False)
    assert snapshot(tmp_path) == {"s.csv": b"theirs"}
