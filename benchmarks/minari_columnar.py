"""Benchmark the minari layout's parquet and arrow storage against pyarrow on the same arrays.

What it measures
    ``expcli.convert`` of an expcli folder (npz shards) of about ``--mib`` MiB to
    ``--layout minari --to parquet`` (and ``arrow``) and back to an expcli folder, against
    pyarrow writing and reading the same episode tables itself: ``pq.write_table`` /
    ``pq.read_table`` (and ``pa.ipc`` files) of the tables in the folder expcli wrote, one
    file per episode, in the same settings. The data: one env column of 4 KiB uint8
    observations (mostly zeros, as frames), next observations the next rows, episodes of
    1000 steps. Medians of ``--repeats`` runs, MB/s of the dataset's bytes, ratios
    against pyarrow (higher is better for expcli). expcli's "read" is a whole conversion
    back (decoding every episode and writing npz shards); pyarrow's reads every column to
    numpy and writes nothing.

Run it
    python benchmarks/minari_columnar.py [--mib 1024] [--repeats 1]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import warnings
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _report import fmt_ratio, load_average, peak_rss_kib, version
from parquet import timed

FEATURE = 4096
EPISODE = 1000


def dataset(mib: int) -> Any:
    from expcli.formats import Dataset
    from expcli.spec import CircularState

    rows = (mib << 20) // (2 * FEATURE)  # observations and next observations
    rng = np.random.default_rng(0)
    frames = np.zeros((rows + 1, 1, FEATURE), np.uint8)
    frames[:, :, ::16] = rng.integers(0, 255, (rows + 1, 1, FEATURE // 16), dtype=np.uint8)
    ends = np.zeros((rows, 1, 1), bool)
    ends[EPISODE - 1 :: EPISODE] = True
    tensors: dict[str, np.ndarray] = {
        "observations": frames[:-1],
        "next_observations": frames[1:],
        "actions": rng.integers(0, 18, (rows, 1, 1)),
        "rewards": rng.random((rows, 1, 1), dtype=np.float32),
        "terminated": ends,
        "truncated": np.zeros((rows, 1, 1), bool),
    }
    return Dataset(tensors, CircularState(0, 0, True), {"env_id": "Frames-v0"})


def episode_tables(folder: Path, storage: str) -> list[Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted((folder / "data").glob(f"*/part-0.{storage}"), key=lambda p: int(p.parent.name))
    if storage == "parquet":
        return [pq.read_table(p) for p in files]
    tables = []
    for path in files:
        with pa.ipc.open_file(pa.OSFile(str(path))) as reader:
            tables.append(reader.read_all())
    return tables


def pyarrow_write(tables: list[Any], folder: Path, storage: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.rmtree(folder, ignore_errors=True)
    for number, table in enumerate(tables):
        target = folder / str(number)
        target.mkdir(parents=True)
        if storage == "parquet":
            pq.write_table(
                table, target / "part-0.parquet", row_group_size=len(table), use_dictionary=False
            )
            continue
        with (
            pa.OSFile(str(target / "part-0.arrow"), "wb") as sink,
            pa.ipc.new_file(sink, table.schema) as out,
        ):
            out.write_table(table, max_chunksize=len(table))


def pyarrow_read(folder: Path, storage: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in folder.glob(f"*/part-0.{storage}"):
        if storage == "parquet":
            table = pq.read_table(path)
        else:
            with pa.ipc.open_file(pa.OSFile(str(path))) as reader:
                table = reader.read_all()
        for name in table.column_names:  # as numpy, as expcli gives them
            array = table.column(name).combine_chunks()
            flat = array.flatten() if hasattr(array, "flatten") else array
            flat.to_numpy(zero_copy_only=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()

    from expcli import convert, save

    print(f"pyarrow {version('pyarrow')}, numpy {np.__version__}, {load_average()}")
    print(f"{os.cpu_count()} cpus; {args.mib} MiB, {args.repeats} repeat(s), median seconds")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        folder = Path(tmp)
        data = dataset(args.mib)
        size = sum(a.nbytes for a in data.tensors.values())
        source = save(data, folder / "run", "folder")
        del data
        print(f"{'storage':8} {'direction':10} {'expcli s':>9} {'pyarrow s':>9} {'MB/s':>7} ratio")
        for storage in ("parquet", "arrow"):
            target, back = folder / f"m-{storage}", folder / "back"

            def to_minari(storage: str = storage, target: Path = target) -> None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    convert(source, target, layout="minari", to=storage)

            def from_minari(target: Path = target, back: Path = back) -> None:
                shutil.rmtree(back, ignore_errors=True)
                convert(target, back, to="folder")

            write_s = timed(to_minari, args.repeats)
            read_s = timed(from_minari, args.repeats)
            tables = episode_tables(target, storage)
            reference = folder / "ref"
            ref_write = timed(partial(pyarrow_write, tables, reference, storage), args.repeats)
            tables.clear()
            ref_read = timed(partial(pyarrow_read, reference, storage), args.repeats)
            for direction, ours, theirs in (
                ("write", write_s, ref_write),
                ("read", read_s, ref_read),
            ):
                rate = size / ours / 1e6
                print(
                    f"{storage:8} {direction:10} {ours:9.2f} {theirs:9.2f} {rate:7.0f} "
                    f"{fmt_ratio(theirs / ours)}"
                )
            shutil.rmtree(target)
            shutil.rmtree(reference)
    print(f"peak RSS of this process: {peak_rss_kib() >> 10} MiB")


if __name__ == "__main__":
    main()
