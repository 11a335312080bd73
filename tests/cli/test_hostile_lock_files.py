"""What stands in the place of an output's lock file is never followed, opened blocking or written.

A symlink planted as ``.NAME.expcli.lock`` aimed every writer's signature at the file it
points to; a FIFO there hung every writer in ``open``. Each writing command now refuses
both in one line, exit 1, with nothing written outside the output (nor the output).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import numpy as np
import pytest

import expcli
from expcli.errors import OutputError
from expcli.files.atomic import open_own
from expcli.files.output_lock import OutputLock, lock_path
from tests.memory_probe import cli_run

VICTIM = b"someone else's file\n"


def _plant(kind: str, where: Path, victim: Path) -> None:
    if kind == "symlink":
        where.symlink_to(victim)
    elif kind == "dangling symlink":
        where.symlink_to(victim.with_name("nowhere"))
    elif kind == "fifo":
        os.mkfifo(where)
    elif kind == "folder":
        where.mkdir()
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(where))
    else:
        raise AssertionError(kind)


KINDS = ["symlink", "dangling symlink", "fifo", "folder", "socket"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_lock_refuses_anything_but_a_regular_file(tmp_path: Path, kind: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    target = tmp_path / "out.h5"
    _plant(kind, lock_path(target), victim)
    with pytest.raises(OutputError) as info:
        OutputLock(target).acquire()
    message = str(info.value)
    assert "\n" not in message and ".out.h5.expcli.lock" in message
    assert "not a regular file" in message
    assert victim.read_bytes() == VICTIM
    assert not (tmp_path / "nowhere").exists()
    assert not target.exists()


def test_a_temporary_swapped_for_a_link_or_a_fifo_is_not_opened(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    link, fifo = tmp_path / "link", tmp_path / "fifo"
    link.symlink_to(victim)
    os.mkfifo(fifo)
    with pytest.raises(OSError):
        open_own(link, os.O_WRONLY | os.O_TRUNC)
    with pytest.raises(OSError):  # ENXIO at once: no reader, and the open does not wait
        open_own(fifo, os.O_WRONLY)
    assert victim.read_bytes() == VICTIM


def _writers(source: Path, out: Path) -> dict[str, tuple[list[str], Path]]:
    """Each writing command, and the output whose lock it takes."""
    return {
        "convert": (["convert", str(source), str(out / "c.h5")], out / "c.h5"),
        "filter": (
            ["filter", str(source), "--top", "2", "-o", str(out / "f.parquet")],
            out / "f.parquet",
        ),
        "merge": (["merge", str(source), str(source), "-o", str(out / "m.npz")], out / "m.npz"),
        "split": (
            ["split", str(source), "-o", str(out / "a.npz"), "-o", str(out / "b.h5")],
            out / "b.h5",
        ),
        "collect file": (_collect(out / "x.npz"), out / "x.npz"),
        "collect folder": (_collect(out / "d"), out / "d"),
    }


def _collect(target: Path) -> list[str]:
    return ["collect", "CartPole-v1", "--steps", "8", "--mode", "dummy", "-q", "-o", str(target)]


WRITERS = ["convert", "filter", "merge", "split", "collect file", "collect folder"]


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
@pytest.mark.parametrize("writer", WRITERS)
def test_every_writer_refuses_a_planted_lock_file(tmp_path: Path, writer: str, kind: str) -> None:
    source = tmp_path / "source.npz"
    done = np.zeros((20, 2, 1), bool)
    done[4::5] = True
    expcli.save(
        expcli.Dataset(
            {
                "observations": np.arange(40, dtype=np.float32).reshape(20, 2, 1),
                "terminated": done,
                "truncated": np.zeros_like(done),
            }
        ),
        source,
    )
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    args, target = _writers(source, out)[writer]
    _plant(kind, lock_path(target), victim)
    before = sorted(os.listdir(out))
    run = cli_run(*args, timeout=60)
    assert not run.timed_out, f"{writer} hung on a {kind} lock file"
    assert run.returncode == 1, run.stderr
    assert len(run.lines) == 1 and "lock file is a" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert victim.read_bytes() == VICTIM
    assert sorted(os.listdir(out)) == before  # no output, no temporary; the plant stays
