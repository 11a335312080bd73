"""What a kill -9 leaves in a dataset folder: the shards of its manifest, and maybe the
torn temporary file of the shard being written. ``inspect`` says so (one row) and the next
``--resume`` removes it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from expcli.files.temp_names import _HOST
from tests.cli.test_collect_cmd import COUNTING_ID
from tests.collect.test_folder_collect import ENV, EXPCLI, expcli_cli

RUN = ["collect", COUNTING_ID, "--envs", "2", "--steps", "40", "--mode", "dummy"]


def _dead_pid() -> int:
    """A pid no process has (the highest the system gives, in all likelihood unused)."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) - 1


def _leftovers_row(folder: Path) -> list[str]:
    done = subprocess.run(
        [*EXPCLI, "inspect", str(folder)],
        capture_output=True,
        text=True,
        env={**ENV, "COLUMNS": "400"},
        check=True,
    )
    lines = done.stdout.splitlines()
    return [" ".join(line.split()) for line in lines if line.startswith("leftovers")]


def test_inspect_names_a_torn_temporary_shard_and_resume_removes_it(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    expcli_cli(*RUN, "--shard-size", "5", "-o", str(folder), "-q")
    # as a kill -9 in the third shard's write leaves it: two shards listed, one torn
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["shards"] = manifest["shards"][:2]
    manifest["memory_size"] = 10
    (folder / "manifest.json").write_text(json.dumps(manifest))
    for extra in ("shard-000002.npz", "shard-000003.npz"):
        (folder / extra).unlink()
    torn = folder / f".shard-000002.npz.expcli-{_dead_pid()}-{_HOST}-0badf00d.tmp"
    torn.write_bytes(b"PK\x03\x04 torn")
    assert _leftovers_row(folder) == [
        "leftovers 1 temporary file from an interrupted write (removed by the next --resume)"
    ]
    summary = json.loads(expcli_cli("inspect", str(folder), "--json").stdout)
    assert summary["leftover_temporary_files"] == 1
    expcli_cli("collect", "--resume", str(folder), "--trust-settings", "-q")  # a test env id
    assert not torn.exists()
    assert _leftovers_row(folder) == []
