"""Benchmark how Parquet stores frames: raw bytes, HF ``Image`` (PNG), HF ``Array3D``, lists.

What it measures
    Real Pong screens, three cases: the 210x160x3 RGB frames ``expcli collect`` records
    (8 envs, ``--seed 0``, next observations stored once), the same screens as 84x84
    grayscale (an image), and 4-frame stacks of those, ``(4, 84, 84)`` (not an image: the
    layout Gymnasium's ``FrameStackObservation`` gives). Each candidate form of the
    ``observations`` column:

    * raw: ``fixed_size_binary[H*W*C]`` (``--images raw``), zstd;
    * png: expcli's PNG cells in HF's ``Image`` struct, zlib level 6, filter none (the
      default); png1: the same at level 1; pillow: PNGs written by Pillow (level 6 and its
      adaptive filters), as HF's ``Image`` feature encodes numpy arrays;
    * array: HF ``Array2D``/``Array3D`` written by ``datasets`` (``Dataset.to_parquet``, its
      own settings: snappy);
    * list: nested ``fixed_size_list<uint8>`` with HF's ``List(length=...)`` features (the
      raw bytes as a type HF can view as arrays: no HF feature views a binary as one).

    Columns: the file's bytes against the same frames in an uncompressed ``.npz`` (1/x),
    the write rate (MB of frames a second; expcli's ``save`` for raw and png, pyarrow's
    ``write_table`` of the built column for pillow and list, ``to_parquet`` for array),
    expcli's sampling (``ReplayBuffer`` of 32 random transitions through a block cache of
    1/8 the frames' bytes, every tensor gathered: ms a batch, median; files expcli
    writes), HF's ``with_format("numpy")`` read of the column in order (frames a second,
    from its first row, 1,024 rows or 5 s) and of 32 random rows (ms), what HF's numpy
    format gives, and whether polars and duckdb read the column. Then the whole-file Pong
    bound: ``expcli convert`` npz -> Parquet of the RGB run in the default form, <= 1/50
    of the npz.

Run it
    python benchmarks/parquet_frames.py [--steps 2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _report import load_average, version
from _sampling_frames import pong_run
from parquet import timed

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BATCH = 32


def cases(npz: Path) -> dict[str, Any]:
    """The three datasets: the RGB run as collected, its screens grey 84x84, and stacks."""
    from expcli import load
    from expcli.formats.dataset import Dataset

    rgb = load(npz)
    frames = np.asarray(rgb.tensors["observations"])
    rows, cols = np.linspace(0, 209, 84).astype(int), np.linspace(0, 159, 84).astype(int)
    grey = frames[:, :, rows][:, :, :, cols] @ np.array([0.299, 0.587, 0.114])
    grey = grey.round().astype(np.uint8)  # (T, N, 84, 84)
    stacks = np.stack([np.roll(grey, k, axis=0) for k in range(3, -1, -1)], axis=2)
    rest = {k: np.asarray(v) for k, v in rgb.tensors.items() if "observations" not in k}
    return {
        "Pong 210x160x3": rgb,
        "grey 84x84": Dataset({"observations": grey, **rest}, rgb.state, rgb.metadata),
        "stacks 4x84x84": Dataset({"observations": stacks, **rest}, rgb.state, rgb.metadata),
    }


def expcli_form(dataset: Any, path: Path, images: str) -> float:
    from expcli import save

    start = time.perf_counter()
    save(dataset, path, images=images)
    return time.perf_counter() - start


def column_form(frames: np.ndarray, path: Path, form: str) -> float:
    """Write ``frames`` (n, *f) as one column of ``form`` with pyarrow or ``datasets``."""
    import io
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from expcli.formats._hf_features import HF_KEY, hf_metadata
    from expcli.formats._parquet_columns import LIST, Column, to_arrow
    from expcli.spec import TensorSpec

    start = time.perf_counter()
    if form == "array":
        import datasets

        kind = datasets.Array2D if frames.ndim == 3 else datasets.Array3D
        features = datasets.Features({"observations": kind(frames.shape[1:], "uint8")})
        datasets.Dataset.from_dict({"observations": frames}, features=features).to_parquet(
            str(path)
        )  # datasets' own settings (snappy)
        return time.perf_counter() - start
    if form == "pillow":
        from PIL import Image

        blobs = []
        for frame in frames:
            out = io.BytesIO()
            Image.fromarray(frame).save(out, format="PNG")
            blobs.append(out.getvalue())
        column = pa.StructArray.from_arrays(
            [pa.array(blobs, pa.binary()), pa.nulls(len(blobs), pa.string())], ["bytes", "path"]
        )
        features = {"observations": {"_type": "Image"}}
        meta = {HF_KEY: json.dumps({"info": {"features": features}}).encode()}
        table = pa.Table.from_arrays([column], ["observations"]).replace_schema_metadata(meta)
    else:
        spec = TensorSpec("observations", "uint8", frames.shape[1:])
        column = to_arrow(Column(spec, LIST), frames)
        schema = pa.schema([("observations", column.type)])
        schema = schema.with_metadata({HF_KEY: hf_metadata(schema, ())})
        table = pa.Table.from_arrays([column], schema=schema)
    pq.write_table(table, path, compression="zstd", use_dictionary=False, row_group_size=256)
    return time.perf_counter() - start


def sample_ms(path: Path, frame_bytes: int, repeats: int) -> float:
    """expcli's ``ReplayBuffer`` of 32 random transitions, a block cache of 1/8 the frames.

    A file larger than memory, as training reads it: most draws decode a row group.
    """
    from expcli.replay import DatasetStorage, RandomSampler, ReplayBuffer

    storage = DatasetStorage.open(path, cache_bytes=max(1 << 20, frame_bytes // 8))
    buffer = ReplayBuffer(storage, sampler=RandomSampler(), batch_size=BATCH, seed=0)
    for _ in range(20):  # the cache filled
        buffer.sample()
    times = [timed(buffer.sample, 1) for _ in range(max(30, repeats * 10))]
    storage.close()
    return statistics.median(times) * 1e3


def hf_rates(path: Path, repeats: int) -> tuple[float, float, str]:
    """HF ``with_format("numpy")``: frames a second of a column read in order, ms of 32 rows.

    In order: batches of 32 from the first row on, up to 1,024 rows or 5 s (a nested list
    decodes at a few rows a second); at random: ``repeats * 5`` draws, or as many as fit
    in 5 s.
    """
    import datasets

    datasets.disable_progress_bars()
    data = datasets.Dataset.from_parquet(str(path), cache_dir=str(path.parent / "hf"))
    data = data.select_columns(["observations"]).with_format("numpy")
    rows = data[:1]["observations"]
    seen = f"{getattr(rows, 'dtype', type(rows).__name__)} {list(np.shape(rows))[1:]}"
    start, read = time.perf_counter(), 0
    for batch in data.select(range(min(len(data), 1024))).iter(batch_size=BATCH):
        read += len(batch["observations"])
        if time.perf_counter() - start > 5:
            break
    in_order = read / (time.perf_counter() - start)
    rng = np.random.default_rng(0)
    times: list[float] = []
    while len(times) < max(10, repeats * 5) and sum(times) < 5:
        draw = rng.integers(0, len(data), BATCH).tolist()
        times.append(timed(lambda d=draw: data[d]["observations"], 1))
    return in_order, statistics.median(times) * 1e3, seen


def others_read(path: Path) -> str:
    """Whether polars and duckdb read the column (its first cell)."""
    import duckdb
    import polars

    said = []
    try:
        polars.read_parquet(path, columns=["observations"], n_rows=1)
        said.append("polars")
    except Exception as e:  # what failed is the finding
        said.append(f"polars: {type(e).__name__}")
    try:
        duckdb.sql(f"SELECT observations FROM read_parquet('{path}') LIMIT 1").fetchall()
        said.append("duckdb")
    except Exception as e:
        said.append(f"duckdb: {type(e).__name__}")
    return ", ".join(said)


def measure(name: str, dataset: Any, folder: Path, repeats: int) -> None:
    frames = np.asarray(dataset.tensors["observations"])
    flat = frames.reshape(-1, *frames.shape[2:])
    npz = folder / f"{name}.npz"
    np.savez(npz, observations=flat)
    mb, npz_bytes = flat.nbytes / 1e6, npz.stat().st_size
    print(f"\n{name}: {len(flat):,} frames, {mb:,.0f} MB; npz {npz_bytes / 1e6:,.0f} MB")
    print(
        f"{'form':8} {'MB':>8} {'vs npz':>8} {'write MB/s':>10} {'sample ms':>9} "
        f"{'HF frames/s':>11} {'HF 32 ms':>8}  HF numpy gives / others"
    )
    image = frames.shape[-1] in (1, 3, 4) or frames.ndim == 4
    forms = ["raw", "png", "png1", "pillow", "array", "list"] if image else ["raw", "array", "list"]
    for form in forms:
        path = folder / f"{name}-{form}.parquet".replace(" ", "_")
        if form in ("raw", "png", "png1"):
            from expcli.formats import _parquet_columns

            default = _parquet_columns.PNG_LEVEL
            _parquet_columns.PNG_LEVEL = 1 if form == "png1" else default
            seconds = statistics.median(
                expcli_form(dataset, path, "raw" if form == "raw" else "png")
                for _ in range(repeats)
            )
            _parquet_columns.PNG_LEVEL = default
            sample = f"{sample_ms(path, flat.nbytes, repeats):9.2f}"
        else:
            seconds = statistics.median(column_form(flat, path, form) for _ in range(repeats))
            sample = f"{'-':>9}"
        size = path.stat().st_size
        rate, ms, seen = hf_rates(path, repeats)
        print(
            f"{form:8} {size / 1e6:8.1f} {'1/' + format(npz_bytes / size, ',.0f'):>8} "
            f"{mb / seconds:10.0f} {sample} {rate:11,.0f} {ms:8.2f}  {seen}; {others_read(path)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="Pong transitions (8 envs)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        f"pyarrow {version('pyarrow')}, datasets {version('datasets')}, Pillow "
        f"{version('pillow')}, polars {version('polars')}, duckdb {version('duckdb')}; "
        f"{load_average()}"
    )
    with tempfile.TemporaryDirectory(prefix="expcli-frames-") as scratch:
        folder = Path(scratch)
        npz = pong_run(folder, args.steps)
        for name, dataset in cases(npz).items():
            measure(name, dataset, folder, args.repeats)
        from benchmarks.parquet_scale import pong_rows  # the repository is on the path now

        pong_rows(folder, args.steps)  # the whole run, npz -> Parquet


if __name__ == "__main__":
    main()
