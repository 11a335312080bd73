"""Benchmark Parquet: column encodings and compressions, and expcli's convert against pyarrow.

What it measures
    1. Encodings of one tensor, written with ``pq.write_table`` (row groups of about 64 MiB,
       no dictionary) and read with ``pq.read_table``: nested ``fixed_size_list`` against
       ``fixed_size_binary``, for Atari-like frames (84x84x4 uint8, mostly background), a
       1 KiB float32 vector and an 8-float32 vector; zstd, snappy and none. Size ratio
       (raw / file), write and read MB/s.
    2. expcli ``convert`` npz -> parquet and parquet -> npz of a frame dataset, against
       ``pq.write_table`` / ``pq.read_table`` of the same arrays in the same layout and
       settings (the target: >= 0.7x).

Run it
    python benchmarks/parquet.py [--frames 2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def atari_frames(count: int, rng: np.random.Generator) -> np.ndarray:
    frames = np.zeros((count, 84, 84, 4), np.uint8)
    frames[:, 20:60, 10:70] = rng.integers(0, 4, (count, 40, 60, 4), dtype=np.uint8) * 60
    return frames


def timed(call: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def encodings(frames: int, repeats: int, folder: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from expcli.formats._parquet_columns import BINARY, LIST, Column, to_arrow
    from expcli.spec import TensorSpec

    rng = np.random.default_rng(0)
    cases = [
        ("84x84x4 uint8", atari_frames(frames, rng)),
        ("256 float32", rng.standard_normal((frames * 20, 256)).astype(np.float32)),
        ("8 float32", rng.standard_normal((frames * 200, 8)).astype(np.float32)),
    ]
    print(
        f"{'tensor':15} {'encoding':10} {'codec':7} {'ratio':>7} {'write MB/s':>10} "
        f"{'read MB/s':>9}"
    )
    for label, array in cases:
        spec = TensorSpec("x", array.dtype.name, tuple(array.shape[1:]))
        for encoding in (LIST, BINARY):
            column = Column(spec, encoding)
            table = pa.table({"x": to_arrow(column, array)})
            rows = max(1, (64 << 20) // column.row_bytes)
            for codec in ("zstd", "snappy", "none"):
                path = folder / "e.parquet"

                def write(
                    table: Any = table, codec: str = codec, path: Path = path, rows: int = rows
                ) -> None:
                    pq.write_table(
                        table, path, compression=codec, use_dictionary=False, row_group_size=rows
                    )

                seconds_w = timed(write, repeats)
                seconds_r = timed(lambda path=path: pq.read_table(path), repeats)
                mb = array.nbytes / 1e6
                ratio = array.nbytes / os.path.getsize(path)
                print(
                    f"{label:15} {encoding:10} {codec:7} {ratio:7.1f} {mb / seconds_w:10.0f} "
                    f"{mb / seconds_r:9.0f}"
                )


def conversion(frames: int, repeats: int, folder: Path) -> None:
    import pyarrow.parquet as pq

    from expcli import convert
    from expcli.formats import Dataset, read_dataset, write_dataset
    from expcli.formats import parquet_format as pf
    from expcli.spec import CircularState

    rng = np.random.default_rng(1)
    envs = 8
    size = max(1, frames // envs)
    observations = atari_frames(size * envs, rng).reshape(size, envs, 84, 84, 4)
    dataset = Dataset(
        {
            "observations": observations,
            "actions": rng.integers(0, 6, (size, envs)).astype(np.int64),
            "rewards": rng.integers(-1, 2, (size, envs)).astype(np.float32),
            "terminated": rng.random((size, envs)) < 0.01,
            "truncated": np.zeros((size, envs), bool),
        },
        CircularState(0, 0, True, size * envs),
        {"env_id": "PongLike-v0"},
    )
    npz = write_dataset(dataset, folder / "run.npz")
    out = folder / "run.parquet"
    expcli_w = timed(lambda: convert(npz, out, overwrite=True), repeats)
    table = pq.read_table(out)  # the same arrays, in the same layout
    raw_path = folder / "raw.parquet"

    def raw_write() -> None:
        pq.write_table(
            table,
            raw_path,
            compression="zstd",
            use_dictionary=False,
            write_page_checksum=True,
            row_group_size=(pf.GROUP_BYTES // (84 * 84 * 4 + 60)),
        )

    raw_w = timed(raw_write, repeats)
    back = folder / "back.npz"
    expcli_r = timed(lambda: convert(out, back, overwrite=True), repeats)
    raw_r = timed(lambda: pq.read_table(raw_path), repeats)
    assert back.read_bytes() == npz.read_bytes()
    mb = sum(a.nbytes for a in read_dataset(npz).tensors.values()) / 1e6
    print(
        f"\n{size * envs:,} transitions, {mb:.0f} MB; "
        f"parquet file {out.stat().st_size / 1e6:.1f} MB"
    )
    print(
        f"npz -> parquet  expcli {mb / expcli_w:6.0f} MB/s  pyarrow write_table "
        f"{mb / raw_w:6.0f} MB/s  ratio {raw_w / expcli_w:.2f}"
    )
    print(
        f"parquet -> npz  expcli {mb / expcli_r:6.0f} MB/s  pyarrow read_table  "
        f"{mb / raw_r:6.0f} MB/s  ratio {raw_r / expcli_r:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        encodings(args.frames, args.repeats, Path(folder))
        conversion(args.frames, args.repeats, Path(folder))


if __name__ == "__main__":
    main()
