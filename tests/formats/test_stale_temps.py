"""What a killed writer leaves beside its target is removed by the next write to it, and
only that: temporary files of live processes, of other hosts and of other targets stay."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from expcli.conversion import convert, load, save
from expcli.errors import OutputExistsError
from expcli.files import temp_names as _temp_names
from expcli.formats.dataset import Dataset
from expcli.spec import CircularState


def dataset(rows: int, value: float = 0.0) -> Dataset:
    rng = np.random.default_rng(1)
    return Dataset(
        {"observations": (rng.random((rows, 4, 16)) + value).astype(np.float32)},
        CircularState(0, 0, True),
        {"env_id": "Toy-v0"},
    )


def hidden(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.startswith("."))


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# The child stops itself once its temporary is whole and before the rename: a kill there is
# the worst moment (all written, nothing in place), and no race with a fast write.
_STOP_BEFORE_COMMIT = """
import os, signal, sys
from expcli.files import atomic
commit = atomic._commit_all
def stopped(*args):
    os.kill(os.getpid(), signal.SIGSTOP)
    return commit(*args)
atomic._commit_all = stopped
from expcli.cli import main
sys.argv = ["expcli", "convert", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("name", ["out.csv", "out.h5", "out.pt"])
def test_sigkill_mid_convert_then_the_next_write_cleans_up(tmp_path: Path, name: str) -> None:
    source = save(dataset(40_000), tmp_path / "source.npz")
    out = tmp_path / "out"
    out.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", _STOP_BEFORE_COMMIT, str(source), str(out / name)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status = os.waitpid(child.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), child.communicate()[1].decode()
    child.send_signal(signal.SIGKILL)
    child.communicate()
    assert child.returncode == -signal.SIGKILL
    left = hidden(out)
    assert any(n.endswith(".tmp") for n in left), left
    lock = f".{name}.expcli.lock"  # left too, but held by no one (an OS lock)
    assert all(n.startswith(f".{name}.expcli-{child.pid}-") for n in left if n != lock), left
    assert not (out / name).exists()

    convert(source, out / name)  # the next write to the same target
    assert hidden(out) == []
    assert np.array_equal(
        load(out / name).tensors["observations"], dataset(40_000).tensors["observations"]
    )


def test_only_dead_writers_of_this_host_and_target_are_cleaned(tmp_path: Path) -> None:
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        host = _temp_names._HOST
        other_host = "000000" if host != "000000" else "111111"
        names = {
            "dead": f".out.npz.expcli-{dead_pid()}-{host}-0a0b0c0d.tmp",
            "dead companion": f".out.npz.expcli-{dead_pid()}-{host}-0a0b0c0e.tmp.meta.json",
            "live": f".out.npz.expcli-{live.pid}-{host}-0a0b0c0f.tmp",
            "other host": f".out.npz.expcli-{dead_pid()}-{other_host}-0a0b0c10.tmp",
            "other target": f".out.npz.old.expcli-{dead_pid()}-{host}-0a0b0c11.tmp",
            "not ours": ".out.npz.1234.tmp",
        }
        for label, name in names.items():
            (tmp_path / name).write_text(label)
        folder = tmp_path / f".out.npz.expcli-{dead_pid()}-{host}-0a0b0c12.tmp"
        folder.mkdir()
        (folder / "part").write_text("half a dataset folder")
        save(dataset(10), tmp_path / "out.npz")
        kept = {names[k] for k in ("live", "other host", "other target", "not ours")}
        assert set(hidden(tmp_path)) == kept
    finally:
        live.kill()
        live.wait()


def test_a_sidecar_replaced_by_a_killed_writer_is_put_back(tmp_path: Path) -> None:
    """Killed between renaming the new sidecar and the new CSV into place: the old pair is
    restored by the next write, which then refuses to overwrite it."""
    save(dataset(10), tmp_path / "s.csv")
    old_sidecar = (tmp_path / "s.csv.meta.json").read_text()
    token = f"{dead_pid()}-{_temp_names._HOST}-0a0b0c0d"
    tmp = tmp_path / f".s.csv.expcli-{token}.tmp"
    tmp.write_text("new rows that never got renamed\n")
    os.link(tmp_path / "s.csv.meta.json", tmp_path / f"{tmp.name}.old.meta.json")
    (tmp_path / "new").write_text(json.dumps({"rows": 1}))
    os.replace(tmp_path / "new", tmp_path / "s.csv.meta.json")  # the new sidecar renamed in

    with pytest.raises(OutputExistsError):
        save(dataset(10, value=1.0), tmp_path / "s.csv", overwrite=False)
    assert (tmp_path / "s.csv.meta.json").read_text() == old_sidecar
    assert hidden(tmp_path) == []
    assert np.array_equal(
        load(tmp_path / "s.csv").tensors["observations"], dataset(10).tensors["observations"]
    )
