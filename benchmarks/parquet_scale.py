"""Parquet at scale (issue 23): bounded memory, a query engine beside ``inspect``, frame bytes.

Rows, each measured in a fresh interpreter (seconds, and peak RSS above the RSS it had once
its imports were done), ``--repeats`` times (median seconds, largest peak):

* ``convert`` npz -> parquet and back, and npz -> a folder of Parquet shards and back, at
  ``--sizes`` GB (default 1 and 2) of two kinds of data: CartPole-like small rows (16 envs,
  46 bytes a transition: the bookkeeping columns are as large as the data) and 84x84 uint8
  frames (8 envs, a plain background).
  Beside each file convert, pyarrow's own ``write_table`` of the table written (same
  row groups, compression, checksums and statistics) or ``read_table`` of the file read
  (which stops at Arrow memory: the convert also writes, checksums and syncs an npz, so
  ``read_table`` on to ``np.savez`` of its columns is timed too, and so is expcli's own
  read of every tensor slice by slice with nothing written, ``read s``: the like of
  ``read_table``), and expcli's rate as a multiple of each. Targets: >= 0.7x pyarrow;
  each peak <= 300 MiB, and the two sizes' peaks < 50 MiB apart.
* duckdb's ``SELECT episode_index, sum(rewards) ... GROUP BY 1`` over a ``--transitions``
  (default 1,000,000) CartPole Parquet file and a folder of Parquet shards of it, against
  ``expcli inspect --json`` of the same data (which computes every tensor's statistics and
  the episode returns); both checked to give the same number of episodes.
* The bytes of ``--pong`` (default 8,000) Pong transitions (210x160x3 frames) collected to
  npz, against the same run converted to Parquet (zstd). Target: <= 1/100.

Run it alone (``flock /tmp/expcli-cpu.lock python -m benchmarks.parquet_scale``); files go
under ``--scratch`` and are removed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from benchmarks._report import load_average, version

CHILD = """
import sys, time

def kib(field):
    return int(next(x for x in open("/proc/self/status") if x.startswith(field)).split()[1])

source, target, shards = sys.argv[1], sys.argv[2], sys.argv[3]
import numpy, pyarrow, pyarrow.parquet as pq
import expcli.formats.parquet_format, expcli.formats.npz_format, expcli.formats.sharded
from expcli.conversion import convert
before, start = kib("VmRSS:"), time.perf_counter()
convert(source, target, overwrite=True, shard_format=shards if shards != "-" else None)
seconds, peak = time.perf_counter() - start, (kib("VmHWM:") - before) / 1024
# pyarrow's own, after the peak was read: the same arrays, layout and settings
raw = saved = float("nan")
if target.endswith(".parquet"):
    file = pq.ParquetFile(target)
    table, group = file.read(), file.metadata.row_group(0).num_rows
    binary = [f.name for f in table.schema if not pyarrow.types.is_fixed_size_binary(f.type)]
    start = time.perf_counter()
    pq.write_table(table, target + ".raw", compression="zstd", use_dictionary=False,
                   write_statistics=binary, write_page_checksum=True, row_group_size=group)
    raw = time.perf_counter() - start
    del table
elif source.endswith(".parquet"):
    start = time.perf_counter()
    table = pq.read_table(source)
    raw = time.perf_counter() - start
    start = time.perf_counter()  # and on to the same npz, the pyarrow way
    table = pq.read_table(source)
    arrays = {}
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        if pyarrow.types.is_fixed_size_binary(column.type):
            arrays[name] = numpy.frombuffer(column.buffers()[1], numpy.uint8)
        else:
            while pyarrow.types.is_fixed_size_list(column.type):
                column = column.flatten()
            arrays[name] = column.to_numpy(zero_copy_only=False)
    numpy.savez(target + ".raw.npz", **arrays)
    saved = time.perf_counter() - start
    del table, arrays
# expcli's read alone (what read_table does: decode, no npz to write), slice by slice
lazy = float("nan")
if source.endswith(".parquet"):
    from expcli.formats.lazy import SLICE_BYTES, LazyRows
    from expcli.formats.registry import open_lazy
    start = time.perf_counter()
    dataset, close = open_lazy(source)
    for array in dataset.tensors.values():
        if isinstance(array, LazyRows):
            step = max(1, SLICE_BYTES // max(1, array.nbytes // max(1, len(array))))
            for first in range(0, len(array), step):
                array[first:first + step]
    close()
    lazy = time.perf_counter() - start
print(seconds, peak, raw, saved, lazy)
"""

SMALL_ENVS, FRAME_ENVS, FRAME = 16, 8, 84 * 84


def make_npz(path: Path, gigabytes: float, frames: bool) -> None:
    """The npz in a child, so that this process's memory stays small."""
    code = textwrap.dedent(
        """
        import sys
        import numpy as np
        from expcli.formats import Dataset, write_dataset
        from expcli.formats.lazy import LazyRows
        from expcli.spec import CircularState
        path, gigabytes, frames = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "frames"
        envs, width = (8, 84 * 84) if frames else (16, 4)
        row = envs * (width * (1 if frames else 8) + 4 + 8 + 2)
        rows = int(gigabytes * 2**30 // row)
        rng = np.random.default_rng(0)
        if frames:
            observations = np.lib.format.open_memmap(
                path + ".obs.npy", "w+", np.uint8, (rows, envs, width))
            for start in range(0, rows, 4096):
                block = observations[start:start + 4096]
                block[:] = 0
                block[:, :, ::97] = rng.integers(0, 255, block[:, :, ::97].shape, np.uint8)
            tensors = {"observations": observations}
        else:
            tensors = {
                "observations": rng.random((rows, envs, 4), dtype=np.float32),
                "next_observations": rng.random((rows, envs, 4), dtype=np.float32),
            }
        tensors |= {
            "actions": rng.integers(0, 2, (rows, envs, 1)),
            "rewards": np.ones((rows, envs, 1), np.float32),
            "terminated": rng.random((rows, envs, 1)) < 0.02,
            "truncated": np.zeros((rows, envs, 1), bool),
        }
        write_dataset(Dataset(tensors, CircularState(0, 0, True)), path, overwrite=True)
        """
    )
    kind = "frames" if frames else "small"
    subprocess.run([sys.executable, "-c", code, str(path), str(gigabytes), kind], check=True)
    Path(str(path) + ".obs.npy").unlink(missing_ok=True)


def convert_child(
    folder: Path, source: Path, target: Path, shards: str = "-"
) -> tuple[float, float, float, float, float]:
    """Seconds and peak MiB above baseline of ``convert(source, target)`` in a child.

    And the seconds of pyarrow's own ``write_table`` of what was written (a Parquet
    target) or ``read_table`` of what was read (a Parquet source), NaN for a folder; for
    a Parquet source also ``read_table`` on to ``np.savez`` of its columns (the same npz
    bytes, the pyarrow way), and expcli's own read of every tensor slice by slice, with
    no npz written (what ``read_table`` does).
    """
    script = folder / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    os.sync()
    out = subprocess.run(
        [sys.executable, str(script), str(source), str(target), shards],
        check=True,
        capture_output=True,
        text=True,
    )
    seconds, peak, raw, saved, lazy = map(float, out.stdout.split())
    return seconds, peak, raw, saved, lazy


def conversion_rows(scratch: Path, sizes: list[float], repeats: int) -> None:
    print(
        f"\n{'convert':40} {'GB':>4} {'seconds':>8} {'MB/s':>7} {'peak MiB':>9} "
        f"{'pyarrow s':>9} {'x pyarrow':>9} {'+savez s':>9} {'x':>5} {'read s':>7} {'x':>5}"
    )
    directions = {
        "npz -> parquet": ("data.npz", "data.parquet", "-"),
        "parquet -> npz": ("data.parquet", "back.npz", "-"),
        "npz -> parquet shards": ("data.npz", "shards", "parquet"),
        "parquet shards -> npz": ("shards", "back.npz", "-"),
    }
    for frames in (False, True):
        kind = "84x84 frames" if frames else "CartPole-like rows"
        peaks: dict[str, list[float]] = {label: [] for label in directions}
        for gigabytes in sizes:
            npz = scratch / "data.npz"
            make_npz(npz, gigabytes, frames)
            mb = npz.stat().st_size / 1e6
            for label, (source, target, shards) in directions.items():
                runs = [
                    convert_child(scratch, scratch / source, scratch / target, shards)
                    for _ in range(repeats)
                ]  # medians of the times, the largest peak
                seconds, raw, saved, lazy = (
                    statistics.median(r[i] for r in runs) for i in (0, 2, 3, 4)
                )
                peak = max(r[1] for r in runs)
                peaks[label].append(peak)
                versus = "" if raw != raw else f"{raw:9.2f} {raw / seconds:9.2f}"  # NaN: none
                if saved == saved:
                    versus += f" {saved:9.2f} {saved / seconds:5.2f}"
                if lazy == lazy:  # expcli's read alone against read_table
                    versus += f" {lazy:7.2f} {raw / lazy:5.2f}"
                print(
                    f"{kind + ' ' + label:40} {gigabytes:4g} {seconds:8.1f} "
                    f"{mb / seconds:7.0f} {peak:9.0f} {versus}"
                )
                if target == "back.npz" and gigabytes <= 1:
                    same = (scratch / target).read_bytes() == npz.read_bytes()
                    print(f"{'':40} back to npz byte-identical: {same}")
            for leftover in (
                "data.npz",
                "data.parquet",
                "data.parquet.raw",
                "back.npz",
                "back.npz.raw.npz",
            ):
                (scratch / leftover).unlink(missing_ok=True)
            shutil.rmtree(scratch / "shards", ignore_errors=True)
        for label, values in peaks.items():
            spread = max(values) - min(values)
            verdict = "ok" if max(values) <= 300 and spread < 50 else "MISSED"
            print(
                f"{kind + ' ' + label:40} peaks {', '.join(f'{v:.0f}' for v in values)} MiB; "
                f"apart {spread:.0f} MiB (target <= 300, < 50): {verdict}"
            )


def query_rows(scratch: Path, transitions: int, repeats: int) -> None:
    import duckdb

    from expcli.formats import Dataset, write_dataset
    from expcli.formats.sharded import write as write_folder
    from expcli.spec import CircularState

    envs = 16
    rows = transitions // envs
    rng = np.random.default_rng(0)
    tensors = {
        "observations": rng.random((rows, envs, 4), dtype=np.float32),
        "actions": rng.integers(0, 2, (rows, envs, 1)),
        "rewards": np.ones((rows, envs, 1), np.float32),
        "terminated": rng.random((rows, envs, 1)) < 0.05,
        "truncated": np.zeros((rows, envs, 1), bool),
    }
    dataset = Dataset(tensors, CircularState(0, 0, True))
    path, folder = scratch / "cartpole.parquet", scratch / "cartpole"
    write_dataset(dataset, path, overwrite=True)
    write_folder(dataset, folder, overwrite=True, shard_bytes=4 << 20, shard_format="parquet")
    shards = len(list(folder.glob("shard-*.parquet")))
    for data, files, what in (
        (path, str(path), "one Parquet file"),
        (folder, f"{folder}/shard-*.parquet", f"a folder of {shards} Parquet shards"),
    ):
        sql = (
            f"SELECT episode_index, sum(rewards) FROM read_parquet('{files}') "
            "WHERE episode_index >= 0 GROUP BY 1"
        )
        duck, ours = [], []
        episodes = 0
        for _ in range(repeats):
            start = time.perf_counter()
            episodes = len(duckdb.sql(sql).fetchall())
            duck.append(time.perf_counter() - start)
            start = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-m", "expcli", "inspect", str(data), "--json"],
                check=True,
                capture_output=True,
                text=True,
            )
            ours.append(time.perf_counter() - start)
        summary = json.loads(out.stdout)
        counted = summary["episodes"]["complete"] + summary["episodes"]["incomplete"]
        assert counted == episodes, (counted, episodes)  # the same episodes, both ways
        print(
            f"\n{transitions:,} CartPole-like transitions in {what}: duckdb GROUP BY episode "
            f"{statistics.median(duck):.2f} s ({episodes:,} episodes, in process); "
            f"expcli inspect --json {statistics.median(ours):.2f} s (a fresh process, every "
            f"tensor's statistics and the episodes)"
        )


def pong_rows(scratch: Path, steps: int) -> None:
    npz, parquet = scratch / "pong.npz", scratch / "pong.parquet"
    expcli = [sys.executable, "-m", "expcli"]
    subprocess.run(
        [*expcli, "collect", "ale_py:ALE/Pong-v5", "--envs", "8", "--steps", str(steps),
         "--seed", "0", "--output", str(npz), "--overwrite"],
        check=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    start = time.perf_counter()
    subprocess.run([*expcli, "convert", str(npz), str(parquet), "--overwrite"], check=True)
    seconds = time.perf_counter() - start
    a, b = npz.stat().st_size, parquet.stat().st_size
    print(
        f"\nPong, {steps:,} transitions: npz {a / 1e6:,.0f} MB, parquet (zstd) "
        f"{b / 1e6:,.1f} MB: 1/{a / b:,.0f} (target <= 1/100); convert took {seconds:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1.0, 2.0])
    parser.add_argument("--transitions", type=int, default=1_000_000)
    parser.add_argument("--pong", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--only", choices=["convert", "query", "pong"], nargs="*")
    args = parser.parse_args()
    only = set(args.only or ["convert", "query", "pong"])
    print(
        f"pyarrow {version('pyarrow')}, duckdb {version('duckdb')}, numpy {np.__version__}; "
        f"{os.cpu_count()} CPUs; {load_average()}"
    )
    scratch = Path(tempfile.mkdtemp(prefix="expcli-parquet-", dir=args.scratch))
    try:
        if "convert" in only:
            conversion_rows(scratch, args.sizes, args.repeats)
        if "query" in only:
            query_rows(scratch, args.transitions, args.repeats)
        if "pong" in only:
            pong_rows(scratch, args.pong)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
