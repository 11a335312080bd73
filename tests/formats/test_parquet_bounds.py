"""Parquet files that say honestly how much they hold, and hold too much: refused before decoding.

Reproductions of an adversarial run, each once made every command use gigabytes or a
minute: 310,000 zero 48x48x3 frames in one zstd row group (0.9 MB on disk, 2.1 GB
decoded; a dictionary-encoded variant too), a 60 MB string in the footer's key-value
metadata (1.1 GB as pyarrow parsed and copied it), 2 million small keys (half a minute
per command). Each is now one line and exit 1, in seconds, under 1 GB; the files here are
smaller than those (quicker to make) and past the bounds all the same.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import expcli
from expcli.spec import CircularState
from tests.memory_probe import cli_run, run_child

pytest.importorskip("pyarrow", reason="pyarrow cannot be installed on this Python")

ROOT = Path(__file__).resolve().parents[2]

# Written in a child: the frames are a buffer of zero pages that the writer only reads.
MAKE = """
import json, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
import expcli
from expcli.spec import CircularState

rows, how, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
zeros = np.zeros((4, 1, 48, 48, 3), np.uint8)
flags = np.zeros((4, 1, 1), bool)
small = expcli.Dataset({"observations": zeros, "terminated": flags, "truncated": flags},
                       CircularState(0, 0, True))
expcli.save(small, path + ".small.parquet", images="raw")  # PNG cells: test_parquet_images
source = pq.ParquetFile(path + ".small.parquet")
table, kv = source.read(), dict(source.metadata.metadata)
kv.pop(b"ARROW:schema")
header, layout = json.loads(kv[b"expcli"]), json.loads(kv[b"expcli.parquet"])
if how == "string":
    kv[b"padding"] = b"x" * rows
elif how == "keys":
    kv.update({b"k%d" % i: b"v" for i in range(rows)})
else:
    header["memory_size"], layout["rows"] = rows, rows
    kv[b"expcli"], kv[b"expcli.parquet"] = json.dumps(header).encode(), json.dumps(layout).encode()
    columns = {}
    for field in table.schema:
        if pa.types.is_fixed_size_binary(field.type):
            buffer = pa.py_buffer(np.zeros(rows * field.type.byte_width, np.uint8))
            columns[field.name] = pa.FixedSizeBinaryArray.from_buffers(
                field.type, rows, [None, buffer])
        elif field.name in ("index", "frame_index", "row"):
            columns[field.name] = pa.array(np.arange(rows), field.type)
        else:
            columns[field.name] = pa.array(np.zeros(rows), field.type)
    table = pa.table(columns, schema=table.schema)
pq.write_table(table.replace_schema_metadata(kv), path, row_group_size=max(rows, 4),
               compression="zstd", use_dictionary=how == "dict", write_statistics=False)
"""


def _make(folder: Path, name: str, rows: int, how: str) -> Path:
    path = folder / name
    subprocess.run(
        [sys.executable, "-c", MAKE, str(rows), how, str(path)],
        check=True,
        env={"PYTHONPATH": str(ROOT)},
    )
    (folder / f"{name}.small.parquet").unlink()
    return path


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bounds")
    return {
        # 50,000 frames (346 MB decoded) are past the bound as 310,000 are, and quicker made
        "bomb": _make(folder, "bomb.parquet", 50_000, "plain"),
        "dictionary bomb": _make(folder, "dictionary.parquet", 50_000, "dict"),
        "60 MB string": _make(folder, "string60.parquet", 60_000_000, "string"),
        # past Thrift's list bound as 2 million are
        "200,000 keys": _make(folder, "keys.parquet", 200_000, "keys"),
    }


def _commands(path: Path, out: Path) -> dict[str, list[str]]:
    return {
        "inspect": ["inspect", str(path)],
        "inspect --check": ["inspect", str(path), "--check"],
        "convert": ["convert", str(path), str(out / "out.npz")],
        "filter": ["filter", str(path), "--top", "1", "-o", str(out / "top.h5")],
        "sample": ["sample", str(path), "-b", "4"],
    }


CASES = [
    ("bomb", "inspect"),
    ("bomb", "inspect --check"),
    ("bomb", "convert"),
    ("bomb", "filter"),
    ("bomb", "sample"),
    ("dictionary bomb", "inspect --check"),
    ("dictionary bomb", "convert"),
    ("60 MB string", "convert"),
    ("60 MB string", "inspect --check"),
    ("200,000 keys", "inspect"),
    ("200,000 keys", "convert"),
]


@pytest.mark.parametrize(("file", "command"), CASES)
def test_a_file_that_holds_too_much_is_one_line_in_seconds_and_bounded(
    tmp_path: Path, hostile: dict[str, Path], file: str, command: str
) -> None:
    path = hostile[file]
    run = cli_run(*_commands(path, tmp_path)[command], timeout=60)
    assert not run.timed_out, f"{command} of the {file} ran past a minute"
    assert run.returncode == 1, run.stderr
    assert len(run.lines) == 1 and str(path) in run.stderr and "Traceback" not in run.stderr
    assert run.seconds < 20 and run.peak_mb < 1024, (run.seconds, run.peak_mb)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written, nothing left
    says = "EXPCLI_MAX_ROW_GROUP_BYTES" if "bomb" in file else "footer"
    assert says in run.stderr


def test_the_bound_is_a_setting(tmp_path: Path) -> None:
    """A group over the bound is refused, naming the variable that raises it."""
    frames = np.arange(4 * 2 * 64, dtype=np.float32).reshape(4, 2, 64)
    path = expcli.save(
        expcli.Dataset({"observations": frames}, CircularState(0, 0, True)), tmp_path / "f.parquet"
    )
    assert cli_run("inspect", str(path), timeout=60).returncode == 0
    lowered = {**os.environ, "EXPCLI_MAX_ROW_GROUP_BYTES": "1000"}
    refused = run_child(["-m", "expcli", "inspect", str(path)], timeout=60, env=lowered)
    assert refused.returncode == 1 and "EXPCLI_MAX_ROW_GROUP_BYTES" in refused.stderr


@pytest.mark.parametrize("args", [[], ["--check"], ["filter"]], ids=["inspect", "check", "filter"])
def test_a_written_count_of_2_to_the_70_is_one_line(tmp_path: Path, args: list[str]) -> None:
    """Was an ``OverflowError`` traceback where the circular state met numpy."""
    import json

    import pyarrow.parquet as pq

    frames = np.zeros((4, 2, 3), np.float32)
    path = expcli.save(
        expcli.Dataset({"observations": frames}, CircularState(0, 0, True)), tmp_path / "w.parquet"
    )
    table = pq.read_table(path)
    kv = dict(table.schema.metadata)
    kv[b"expcli"] = json.dumps({**json.loads(kv[b"expcli"]), "written": 2**70}).encode()
    pq.write_table(table.replace_schema_metadata(kv), path)
    if args == ["filter"]:
        command = ["filter", str(path), "--top", "1", "-o", str(tmp_path / "t.npz")]
    else:
        command = ["inspect", str(path), *args]
    run = cli_run(*command, timeout=60)
    assert run.returncode == 1 and len(run.lines) == 1, run.stderr
    assert "beyond 64 bits" in run.stderr and not (tmp_path / "t.npz").exists()
