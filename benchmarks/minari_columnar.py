"""Benchmark the minari layout's parquet and arrow storage against pyarrow on the same arrays.

What it measures (medians of ``--repeats`` runs; MB/s of the dataset's tensors; ratios are
the reference's time over expcli's, higher is better for expcli):

write
    ``expcli.convert`` of an expcli folder (npz shards) of about ``--mib`` MiB to
    ``--layout minari --to parquet`` (or ``arrow``), against pyarrow writing the same
    episode tables itself (``pq.write_table`` / an ``pa.ipc`` file per episode, in the
    same settings).
read
    ``open_lazy`` of the minari folder and every tensor read by slices of 16 MiB (what a
    conversion reads; one slice read ahead on a thread): observations, next observations,
    actions, rewards and the flags, each a new array. Against pyarrow reading every
    episode file (``pq.read_table``, threads on; an IPC file through ``pa.OSFile``) and
    every leaf ``to_numpy`` ("views": half the bytes, as observations and next
    observations are one column, and no copy), and the same plus every tensor expcli gives
    copied out of those views ("tensors": the same bytes as expcli's, in a new array).
convert
    ``expcli.convert`` of the minari folder to an expcli folder (npz shards of 128 MiB),
    against converting the source expcli folder to another (the same writer; its mapped
    shards cost about nothing to read): what is left is the minari read's share.

The data: one env column of 4 KiB uint8 observations (mostly zeros, as frames), next
observations the next rows, episodes of 1000 steps.

Run it
    python benchmarks/minari_columnar.py [--mib 1024] [--repeats 3]
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's expcli
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


def pyarrow_read(folder: Path, storage: str, tensors: bool) -> None:
    """Read every episode file and its leaves as numpy; ``tensors``: copy out expcli's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in folder.glob(f"*/part-0.{storage}"):
        if storage == "parquet":
            table = pq.read_table(path)
        else:
            with pa.ipc.open_file(pa.OSFile(str(path))) as reader:
                table = reader.read_all()
        for name in table.column_names:
            array = table.column(name).combine_chunks()
            flat = array.flatten() if hasattr(array, "flatten") else array
            values = flat.to_numpy(zero_copy_only=False)
            if tensors:  # one row per step; observations twice, from rows 0 and 1 on
                rows = values.reshape(len(array), -1)
                for first in (0, 1) if name == "observations" else (0,):
                    rows[first : first + len(array) - 1].copy()


def expcli_read(folder: Path, in_turn: bool) -> None:
    """Every tensor of the minari folder by slices of 16 MiB, each a new array.

    ``in_turn``: a slice of each tensor in turn (16 MiB together: as ``load`` and
    ``inspect`` read), else each tensor whole before the next (as a conversion to one
    file reads).
    """
    from expcli.formats import open_lazy
    from expcli.formats.lazy import SLICE_BYTES

    data, close = open_lazy(folder)
    lazy = [t for t in data.tensors.values() if not isinstance(t, np.ndarray)]
    try:
        if in_turn:
            step = SLICE_BYTES // sum(t.nbytes // len(t) for t in lazy)
            for start in range(0, len(lazy[0]), step):
                for tensor in lazy:
                    tensor[start : start + step]
            return
        for tensor in lazy:
            step = SLICE_BYTES // (tensor.nbytes // len(tensor))
            for start in range(0, len(tensor), step):
                tensor[start : start + step]
    finally:
        close()


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
        back = folder / "back"

        def to_folder(source: Path) -> None:
            shutil.rmtree(back, ignore_errors=True)
            convert(source, back, to="folder")

        folder_s = timed(partial(to_folder, source), args.repeats)
        print(f"{'storage':8} {'step':8} {'expcli s':>9} {'MB/s':>6} {'ref s':>7} ratio  reference")
        for storage in ("parquet", "arrow"):
            target = folder / f"m-{storage}-v0"  # a Minari folder is named as its id

            def to_minari(storage: str = storage, target: Path = target) -> None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    convert(source, target, layout="minari", to=storage)

            write_s = timed(to_minari, args.repeats)
            tables = episode_tables(target, storage)
            reference = folder / "ref"
            ref_write = timed(partial(pyarrow_write, tables, reference, storage), args.repeats)
            tables.clear()
            data_dir = target / "data"
            in_turn = timed(partial(expcli_read, target, True), args.repeats)
            read_s = timed(partial(expcli_read, target, False), args.repeats)
            views = timed(partial(pyarrow_read, data_dir, storage, False), args.repeats)
            copied = timed(partial(pyarrow_read, data_dir, storage, True), args.repeats)
            convert_s = timed(partial(to_folder, target), args.repeats)
            for step, ours, theirs, what in (
                ("write", write_s, ref_write, "pyarrow writes the episode tables"),
                ("read", in_turn, views, "pyarrow read + to_numpy (views); in turn"),
                ("read", in_turn, copied, "pyarrow read + to_numpy + tensors copied; in turn"),
                ("read", read_s, copied, "pyarrow read + to_numpy + tensors copied; one by one"),
                ("convert", convert_s, folder_s, "expcli folder -> npz folder"),
            ):
                print(
                    f"{storage:8} {step:8} {ours:9.2f} {size / ours / 1e6:6.0f} {theirs:7.2f} "
                    f"{fmt_ratio(theirs / ours):6} {what}"
                )
            shutil.rmtree(target)
            shutil.rmtree(reference)
    print(f"peak RSS of this process: {peak_rss_kib() >> 10} MiB")


if __name__ == "__main__":
    main()
