"""Tables expcli did not write (issue 38): speed against expcli's own Parquet, bounded memory.

Each row is ``convert SOURCE out.npz`` in a fresh interpreter, ``--repeats`` times (median
seconds, largest peak RSS above the RSS it had once its imports were done):

* **Speed**, per-step CartPole-like rows (16 envs) at two sizes (``--small`` and ``--large``
  GB of npz), so that start-up cancels in the marginal rate (transitions a second between the
  two sizes). Sources, all of the same transitions:
  ``own``: expcli's own Parquet (its footer read, nothing inferred);
  ``copy``: the same file rewritten by pyarrow without expcli's footer, as a polars or duckdb
  copy is (read from its columns: episodes placed by their episode and step columns);
  ``hf``: the same rows as HF ``datasets`` writes a Minari-style table: Minari's names
  (``terminations``/``truncations``), lists for vectors, sorted by episode, row groups of
  1,000 rows, no env column. Target: each foreign rate >= 0.7x ``own``'s.
  Beside each, pyarrow's own way to the same npz (``read_table``, each column to numpy,
  ``np.savez``), and expcli's rate as a multiple of it: how fast that file's shape can be
  decoded at all (an HF table's lists and small row groups cost pyarrow too).
* **Memory**, 84x84 uint8 frames (8 envs, a plain background) as an ``hf`` table (frames as
  ``list<uint8>``) of ``--frames`` GB (default 0.5 and 1). Target: each peak <= 300 MiB
  above the baseline and the two peaks < 50 MiB apart.

Run it alone (``flock /tmp/expcli-cpu.lock python -m benchmarks.foreign_tables``); files go
under ``--scratch`` and are removed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from benchmarks._report import load_average, version
from benchmarks.parquet_scale import make_npz

CHILD = """
import sys, time

def kib(field):
    return int(next(x for x in open("/proc/self/status") if x.startswith(field)).split()[1])

import warnings
import numpy, pyarrow, pyarrow.parquet
import expcli.formats.parquet_format, expcli.formats.npz_format, expcli.formats.foreign_table
from expcli.conversion import convert
warnings.simplefilter("ignore")
before, start = kib("VmRSS:"), time.perf_counter()
convert(sys.argv[1], sys.argv[2], overwrite=True)
seconds, peak = time.perf_counter() - start, (kib("VmHWM:") - before) / 1024
raw = float("nan")
if sys.argv[3] == "raw":  # pyarrow's way to the same npz: read_table, columns to numpy, savez
    start = time.perf_counter()
    table = pyarrow.parquet.read_table(sys.argv[1])
    arrays = {}
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        rows = len(column)
        while pyarrow.types.is_list(column.type) or pyarrow.types.is_fixed_size_list(column.type):
            column = column.flatten()
        if pyarrow.types.is_fixed_size_binary(column.type):
            values = numpy.frombuffer(column.buffers()[1], numpy.uint8)
        else:
            values = column.to_numpy(zero_copy_only=False)
        arrays[name] = values.reshape(rows, -1)
    numpy.savez(sys.argv[2] + ".raw.npz", **arrays)
    raw = time.perf_counter() - start
print(seconds, peak, raw)
"""

REWRITE = """
import sys
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

source, target, kind = sys.argv[1], sys.argv[2], sys.argv[3]
file = pq.ParquetFile(source)
if kind == "copy":  # the same row groups and columns, no expcli footer
    with pq.ParquetWriter(target, file.schema_arrow.remove_metadata(), compression="zstd") as w:
        for group in range(file.num_row_groups):
            w.write_table(file.read_row_group(group).replace_schema_metadata(None))
    sys.exit()
table = file.read(columns=["episode_index", "frame_index", "observations", "actions",
                           "rewards", "terminated", "truncated"]).replace_schema_metadata(None)
table = table.sort_by([("episode_index", "ascending"), ("frame_index", "ascending")])
names = {"terminated": "terminations", "truncated": "truncations"}
columns, fields = [], []
for name in table.column_names:
    column = table.column(name).combine_chunks()
    if pa.types.is_fixed_size_binary(column.type):  # frames: HF Sequence(Value("uint8"))
        width = column.type.byte_width
        values = np.frombuffer(column.buffers()[1], np.uint8)[: len(column) * width]
        offsets = np.arange(0, (len(column) + 1) * width, width, dtype=np.int32)
        column = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
    elif pa.types.is_fixed_size_list(column.type):
        column = column.cast(pa.list_(column.type.value_type))
    columns.append(column)
    fields.append(names.get(name, name))
pq.write_table(pa.table(columns, names=fields), target, row_group_size=1000, compression="zstd")
"""


def child(folder: Path, code: str, *args: str) -> str:
    script = folder / f"child-{abs(hash(code))}.py"
    script.write_text(textwrap.dedent(code))
    os.sync()
    out = subprocess.run(
        [sys.executable, str(script), *args], check=True, capture_output=True, text=True
    )
    return out.stdout


def sources(folder: Path, gigabytes: float, frames: bool, kinds: list[str]) -> dict[str, Path]:
    """expcli's own Parquet of ``gigabytes`` of npz, and the foreign tables made from it."""
    npz = folder / f"{gigabytes}.npz"
    make_npz(npz, gigabytes, frames)
    own = folder / f"{gigabytes}-own.parquet"
    subprocess.run(
        [sys.executable, "-m", "expcli", "convert", str(npz), str(own), "--overwrite"],
        check=True,
        capture_output=True,
    )
    npz.unlink()
    made = {"own": own}
    for kind in (k for k in kinds if k != "own"):
        made[kind] = folder / f"{gigabytes}-{kind}.parquet"
        child(folder, REWRITE, str(own), str(made[kind]), kind)
    if "own" not in kinds:
        own.unlink()
        del made["own"]
    return made


def transitions(path: Path) -> int:
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_rows)


def convert(
    folder: Path, source: Path, repeats: int, raw: bool = False
) -> tuple[float, float, float]:
    """Median seconds and largest peak MiB of ``convert(source, out.npz)`` in children.

    And the median seconds of pyarrow's way to the same npz (``raw``; else NaN).
    """
    runs = []
    target = folder / "o.npz"
    for _ in range(repeats):
        out = child(folder, CHILD, str(source), str(target), "raw" if raw else "-")
        seconds, peak, pyarrow = map(float, out.split())
        runs.append((seconds, peak, pyarrow))
        target.unlink()
        Path(str(target) + ".raw.npz").unlink(missing_ok=True)
    return (
        statistics.median(r[0] for r in runs),
        max(r[1] for r in runs),
        statistics.median(r[2] for r in runs),
    )


def speed_rows(scratch: Path, small: float, large: float, repeats: int) -> None:
    kinds = ["own", "copy", "hf"]
    measured: dict[str, list[tuple[int, float, float, float]]] = {k: [] for k in kinds}
    for gigabytes in (small, large):
        with tempfile.TemporaryDirectory(dir=scratch) as name:
            folder = Path(name)
            for kind, path in sources(folder, gigabytes, False, kinds).items():
                seconds, peak, raw = convert(folder, path, repeats, raw=True)
                measured[kind].append((transitions(path), seconds, peak, raw))
    print(
        f"\n{'per-step rows -> npz':22} {'transitions':>11} {'small s':>8} {'large s':>8} "
        f"{'marginal/s':>11} {'x own':>6} {'pyarrow/s':>10} {'x pyarrow':>9} {'peak MiB':>9}"
    )
    (n0, s0, _, _), (n1, s1, _, _) = measured["own"]
    own_rate = (n1 - n0) / (s1 - s0)
    for kind in kinds:
        (n0, s0, p0, r0), (n1, s1, p1, r1) = measured[kind]
        rate, raw_rate = (n1 - n0) / (s1 - s0), (n1 - n0) / (r1 - r0)
        print(
            f"{kind:22} {n1:>11,} {s0:>8.2f} {s1:>8.2f} {rate:>11,.0f} "
            f"{rate / own_rate:>5.2f}x {raw_rate:>10,.0f} {rate / raw_rate:>8.2f}x "
            f"{max(p0, p1):>9.0f}"
        )


def memory_rows(scratch: Path, sizes: list[float], repeats: int) -> None:
    print(f"\n{'frames (hf table) -> npz':26} {'GB':>5} {'seconds':>8} {'MB/s':>7} {'peak MiB':>9}")
    peaks = []
    for gigabytes in sizes:
        with tempfile.TemporaryDirectory(dir=scratch) as name:
            folder = Path(name)
            path = sources(folder, gigabytes, True, ["hf"])["hf"]
            seconds, peak, _ = convert(folder, path, repeats)
            peaks.append(peak)
            rate = gigabytes * 2**30 / 1e6 / seconds
            print(f"{'hf':26} {gigabytes:>5} {seconds:>8.2f} {rate:>7.0f} {peak:>9.0f}")
    print(f"peaks {max(peaks) - min(peaks):.0f} MiB apart (target < 50; each <= 300)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=float, default=0.05)
    parser.add_argument("--large", type=float, default=0.25)
    parser.add_argument("--frames", type=float, nargs="+", default=[0.5, 1.0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--only", choices=["speed", "memory"], nargs="*")
    args = parser.parse_args()
    print(f"expcli foreign tables; pyarrow {version('pyarrow')}; {load_average()}")
    only = args.only or ["speed", "memory"]
    if "speed" in only:
        speed_rows(args.scratch, args.small, args.large, args.repeats)
    if "memory" in only:
        memory_rows(args.scratch, args.frames, args.repeats)


if __name__ == "__main__":
    main()
