"""``--storage`` names a folder layout's storage; ``--to`` names formats (issue 39).

``--to`` naming a minari or lerobot storage is the old spelling: still taken, with one
note line; ``--storage`` where no folder layout is written, or both at once, is refused.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli import convert, save
from expcli.cli.app import app
from expcli.errors import ConfigError
from expcli.formats import Dataset
from expcli.formats.layouts import storage_or_format
from expcli.formats.rows import Layout
from expcli.spec import CircularState

pytest.importorskip("pyarrow")
pytest.importorskip("h5py")


def _source(tmp_path: Path) -> Path:
    rows = 6
    flags = np.zeros((rows, 1, 1), bool)
    flags[2] = flags[5] = True
    dataset = Dataset(
        {
            "observations": np.arange(rows * 2, dtype=np.float32).reshape(rows, 1, 2),
            "actions": np.arange(rows, dtype=np.int64).reshape(rows, 1, 1),
            "rewards": np.ones((rows, 1, 1), np.float32),
            "terminated": flags,
            "truncated": np.zeros((rows, 1, 1), bool),
            "next_observations": np.arange(2, rows * 2 + 2, dtype=np.float32).reshape(rows, 1, 2),
        },
        CircularState(0, 0, True),
    )
    return save(dataset, tmp_path / "run.npz")


def cli(*args: str) -> object:
    return CliRunner().invoke(app, list(args))


def test_storage_and_the_old_to_both_pick_a_minari_folders_storage(tmp_path: Path) -> None:
    source = _source(tmp_path)
    for flag, target in (("--storage", "new-v0"), ("--to", "old-v0")):
        done = CliRunner().invoke(
            app, ["convert", str(source), str(tmp_path / target), "--layout", "minari",
                  flag, "parquet"],
        )  # fmt: skip
        assert done.exit_code == 0, done.output
        assert list((tmp_path / target / "data").rglob("*.parquet"))
        assert not list((tmp_path / target / "data").rglob("*.hdf5"))
        noted = "note: --to parquet picks the minari layout's storage as --storage parquet"
        assert (noted in " ".join(done.stderr.split())) == (flag == "--to")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--storage", "parquet"], "--storage picks the storage of a layout kept in a folder"),
        (["--layout", "skrl", "--storage", "pt"], "the skrl layout writes a file"),
        (["--layout", "minari", "--to", "hdf5", "--storage", "arrow"], "give its storage once"),
    ],
)
def test_storage_where_no_folder_layout_is_written_is_refused_in_one_line(
    tmp_path: Path, args: list[str], said: str
) -> None:
    source = _source(tmp_path)
    done = CliRunner().invoke(app, ["convert", str(source), str(tmp_path / "out-v0"), *args])
    assert done.exit_code == 2
    assert said in " ".join(done.stderr.split()) and len(done.stderr.strip().splitlines()) <= 2
    assert not (tmp_path / "out-v0").exists()


def test_the_python_api_takes_storage_and_the_old_to() -> None:
    assert storage_or_format(Layout.MINARI, None, "arrow") == ("arrow", False)
    assert storage_or_format(Layout.MINARI, "arrow", None) == ("arrow", True)
    assert storage_or_format(Layout.SKRL, "npz", None) == ("npz", False)
    assert storage_or_format(Layout.EXPCLI, "parquet", None) == ("parquet", False)
    with pytest.raises(ConfigError, match="writes a file"):
        storage_or_format(Layout.EXPCLI, None, "parquet")


def test_convert_takes_storage(tmp_path: Path) -> None:
    source = _source(tmp_path)
    convert(source, tmp_path / "arrowed-v0", layout="minari", storage="arrow")
    assert list((tmp_path / "arrowed-v0" / "data").rglob("*.arrow"))
