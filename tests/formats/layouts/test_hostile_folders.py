"""LeRobot and Minari folders under the rules of sharded ones: no link out, no pipe, rows in order.

Each hostile folder below was read as if it were whole before: a ``data/chunk-000`` linked
to another dataset's, a data file or ``meta/episodes`` linked out, a ``videos/`` folder
linked out, a Minari ``main_data.hdf5`` or episode linked out; a LeRobot data file with its
rows reversed gave observations equal to neither the rows nor their reverse; a FIFO in
place of ``meta/info.json`` was called "not a Minari dataset folder". Each is now one
error naming its layout, and nothing outside the folder is read.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from expcli import load
from expcli.errors import FormatError
from tests.fuzz.seeds import CORPUS
from tests.memory_probe import cli_run


def _copy(tmp_path: Path, seed: str) -> tuple[Path, Path]:
    """The seed copied to ``tmp/data``, and an untouched copy of it outside, to link to."""
    root, outside = tmp_path / "data", tmp_path / "outside"
    shutil.copytree(CORPUS / seed, root)
    shutil.copytree(CORPUS / seed, outside)
    return root, outside


def _link_out(root: Path, outside: Path, relative: str) -> None:
    """``root/relative`` replaced by a link to the same thing outside the folder."""
    inside = root / relative
    if inside.is_dir():
        shutil.rmtree(inside)
    else:
        inside.unlink()
    inside.symlink_to(outside / relative, target_is_directory=(outside / relative).is_dir())


LINKS = [
    ("lerobot", "data/chunk-000"),
    ("lerobot", "data/chunk-000/file-000.parquet"),
    ("lerobot", "data"),
    ("lerobot", "meta/episodes"),
    ("lerobot", "meta/episodes/chunk-000/file-000.parquet"),
    ("lerobot", "meta/info.json"),
    ("lerobot", "meta/expcli.json"),
    ("lerobot", "meta"),
    ("lerobot-made", "data/chunk-000/file-000.parquet"),
    ("lerobot-video", "videos"),
    ("lerobot-video", "videos/observation.images.cam/chunk-000/file-000.mp4"),
    ("minari", "data/main_data.hdf5"),
    ("minari", "data/metadata.json"),
    ("minari", "data"),
    ("minari-parquet", "data/1"),
    ("minari-parquet", "data/1/part-0.parquet"),
    ("minari-arrow", "data/0/part-0.arrow"),
]


@pytest.mark.parametrize(("seed", "relative"), LINKS)
def test_a_link_out_of_the_folder_is_refused_naming_the_layout(
    tmp_path: Path, seed: str, relative: str
) -> None:
    root, outside = _copy(tmp_path, seed)
    load(root)  # the seed reads whole
    if seed == "lerobot-video":
        pytest.importorskip("av")
    _link_out(root, outside, relative)
    layout = "LeRobot" if seed.startswith("lerobot") else "Minari"
    with pytest.raises(FormatError) as info:
        load(root)
    message = str(info.value)
    assert f"a {layout} folder is read only from the regular files inside it" in message
    assert "symbolic link" in message and "\n" not in message


@pytest.mark.parametrize("seed", ["lerobot", "lerobot-made"])
def test_a_fifo_in_place_of_info_json_is_refused_as_lerobot(tmp_path: Path, seed: str) -> None:
    root, _ = _copy(tmp_path, seed)
    (root / "meta" / "info.json").unlink()
    os.mkfifo(root / "meta" / "info.json")
    run = cli_run("inspect", str(root), "--check", timeout=30)
    assert not run.timed_out and run.returncode == 1, run.stderr
    assert len(run.lines) == 1 and "LeRobot" in run.stderr and "Minari" not in run.stderr


@pytest.mark.parametrize("seed", ["lerobot", "lerobot-made"])
def test_rows_out_of_index_order_are_refused(tmp_path: Path, seed: str) -> None:
    root, _ = _copy(tmp_path, seed)
    data = root / "data" / "chunk-000" / "file-000.parquet"
    table = pq.read_table(data)
    pq.write_table(table.take(list(reversed(range(len(table))))), data)
    with pytest.raises(FormatError, match="out of LeRobot's index order") as info:
        load(root)
    assert info.value.path == str(data) and info.value.key == "index"
    run = cli_run("convert", str(root), str(tmp_path / "out.npz"), timeout=30)
    assert run.returncode == 1 and len(run.lines) == 1, run.stderr
    assert not (tmp_path / "out.npz").exists()


def test_every_command_refuses_a_linked_chunk_in_one_line(tmp_path: Path) -> None:
    root, outside = _copy(tmp_path, "lerobot")
    _link_out(root, outside, "data/chunk-000")
    out = tmp_path / "out"
    out.mkdir()
    for args in (
        ["inspect", str(root)],
        ["inspect", str(root), "--check"],
        ["convert", str(root), str(out / "x.npz")],
        ["sample", str(root), "-b", "2"],
    ):
        run = cli_run(*args, timeout=30)
        assert run.returncode == 1 and len(run.lines) == 1, (args, run.stderr)
        assert "symbolic link" in run.stderr and run.seconds < 20
    assert os.listdir(out) == []
