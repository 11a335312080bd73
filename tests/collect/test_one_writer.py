"""One writer per output: while a collect writes a folder (or a spooled file), a second
collect, an --overwrite, a --resume or a convert into it is refused in one line naming
the holder, and the holder's folder ends with every row it reported; a kill -9 leaves no
lock behind."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

import expcli
from expcli.collect.job import CollectJob
from expcli.collect.settings import CollectSettings
from expcli.errors import OutputExistsError, OutputLockedError
from expcli.files.output_lock import lock_path
from tests.collect.test_folder_collect import ENV, EXPCLI, RUN, expcli_cli


def _holder(*args: str) -> subprocess.Popen[str]:
    """A long collect run, writing its output once this returns.

    Its 10 M steps are about 0.9 GB spooled (file and spool), well inside a CI disk; the
    run is stopped long before it ends. If it exits or stalls, its output is the failure.
    """
    child = subprocess.Popen(
        [*EXPCLI, *RUN, "--steps", "10000000", *args, "-q"],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = Path(args[args.index("-o") + 1])
    deadline = time.monotonic() + 120
    while not _started(output):
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            out, _ = child.communicate()
            pytest.fail(f"the holder exited ({child.returncode}) or stalled: {out}")
        time.sleep(0.02)
    return child


def _started(output: Path) -> bool:
    if not output.suffix:
        return (output / "manifest.json").exists()
    return any(output.parent.glob(f".{output.name}.expcli-*/manifest.json"))


def _stop(child: subprocess.Popen[str]) -> int:
    """Ctrl-C the holder; the transitions it says it saved."""
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 130, out
    found = re.search(r"saved ([\d,]+) transitions", out)
    assert found is not None, out
    return int(found.group(1).replace(",", ""))


def _refused(done: subprocess.CompletedProcess[str], holder: subprocess.Popen[str]) -> None:
    """Exit 1 and one line naming the holder's pid, host and start time."""
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, lines
    assert f"pid {holder.pid} on host {socket.gethostname()} since " in lines[0]
    assert "another writer holds it" in lines[0]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A small dataset file to convert into the holder's output."""
    tensors = {"observations": np.zeros((10, 1, 4), np.float32)}
    return expcli.save(expcli.Dataset(tensors), tmp_path / "small.npz")


def test_every_second_writer_of_a_folder_is_refused(tmp_path: Path, source: Path) -> None:
    folder = tmp_path / "run"
    late = CollectJob(CollectSettings(env_id="CartPole-v1", steps=100, output=folder))
    holder = _holder("-o", str(folder), "--shard-size", "300")
    try:
        with pytest.raises(OutputLockedError) as info:
            late.start()  # made before the folder was: two `collect -o run/` at once
        assert info.value.holder["pid"] == str(holder.pid)
        for contender in (
            [*RUN, "--steps", "500", "-o", str(folder)],
            [*RUN, "--steps", "500", "-o", str(folder), "--overwrite"],
            ["collect", "--resume", str(folder)],
            ["convert", str(source), str(folder)],
            ["convert", str(source), str(folder), "--overwrite"],
        ):
            _refused(expcli_cli(*contender, check=False), holder)
    finally:
        saved = _stop(holder)
    assert not lock_path(folder).exists()  # a clean run leaves no lock file
    dataset = expcli.load(folder)
    assert len(dataset) == saved and dataset.metadata["collector"]["steps"] == saved
    expcli_cli("inspect", "--check", str(folder))
    with pytest.raises(OutputExistsError):
        late.start()  # the winner's folder is there now: still not replaced


def test_a_spooled_file_has_one_writer(tmp_path: Path, source: Path) -> None:
    target = tmp_path / "big.npz"
    holder = _holder("-o", str(target), "--spool", "--shard-size", "300")
    try:
        for contender in (
            [*RUN, "--steps", "500", "-o", str(target), "--overwrite"],
            ["convert", str(source), str(target), "--overwrite"],
        ):
            _refused(expcli_cli(*contender, check=False), holder)
    finally:
        saved = _stop(holder)
    assert len(expcli.load(target)) == saved
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.npz", "small.npz"]


def test_a_killed_writer_leaves_no_lock(tmp_path: Path, source: Path) -> None:
    folder = tmp_path / "run"
    holder = _holder("-o", str(folder), "--shard-size", "300")
    holder.send_signal(signal.SIGKILL)
    holder.communicate(timeout=60)
    assert lock_path(folder).exists()  # its file stays, but no process holds it
    expcli.convert(source, folder, overwrite=True)  # the next writer, at once
    assert expcli.load(folder).memory_size == 10
    assert sorted(os.listdir(tmp_path)) == ["run", "small.npz"]
