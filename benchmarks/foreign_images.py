"""HF ``Image`` columns of foreign tables: converting them to npz against expcli's own frames.

The same 84x84x3 uint8 frames (noise over a plain background, as Atari-like frames
compress) in three Parquet files: expcli's own (frames as binary, its footer read), and an
HF ``datasets``-style table (``struct<bytes, path>``, ``{"_type": "Image"}``, row groups of
100 rows as HF writes images) of PNG, and of JPEG. Each row is ``convert SOURCE out.npz``
in a fresh interpreter (``foreign_tables.convert``), ``--repeats`` times: median seconds,
frames a second, the rate as a multiple of the own file's, and the largest peak RSS above
the RSS once imports were done. Beside it, Pillow alone decoding the same bytes
(``np.asarray(Image.open(...))``): the floor that decoding images sets, whoever reads them.

    flock /tmp/expcli-cpu.lock python -m benchmarks.foreign_images --frames 4000 8000
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._report import fmt_ratio, load_average, version
from benchmarks.foreign_tables import convert


def frames(count: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    out = np.full((count, 84, 84, 3), 90, np.uint8)
    out[:, 20:40, 30:60] = rng.integers(0, 256, (count, 20, 30, 3), dtype=np.uint8)
    return out


def encoded(rows: np.ndarray, kind: str) -> list[bytes]:
    from PIL import Image

    blobs = []
    for frame in rows:
        buffer = io.BytesIO()
        Image.fromarray(frame).save(buffer, kind, **({"quality": 90} if kind == "JPEG" else {}))
        blobs.append(buffer.getvalue())
    return blobs


def sources(folder: Path, rows: np.ndarray) -> dict[str, tuple[Path, list[bytes]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from expcli.formats import Dataset, write_dataset
    from expcli.spec import CircularState

    count = len(rows)
    done = (np.arange(count) % 100 == 99).reshape(count, 1, 1)
    tensors = {
        "observations": rows[:, None],
        "actions": np.zeros((count, 1, 1), np.int64),
        "terminated": done,
        "truncated": np.zeros_like(done),
    }
    own = folder / f"own-{count}.parquet"
    write_dataset(Dataset(tensors, CircularState(0, 0, True), {}), own, overwrite=True)
    out: dict[str, tuple[Path, list[bytes]]] = {"own": (own, [])}
    features = {"observations": {"_type": "Image"}}
    for kind in ("PNG", "JPEG"):
        blobs = encoded(rows, kind)
        images = pa.StructArray.from_arrays(
            [pa.array(blobs, pa.binary()), pa.nulls(count, pa.string())], ["bytes", "path"]
        )
        table = pa.table(
            {
                "observations": images,
                "actions": np.zeros(count, np.int64),
                "terminations": done[:, 0, 0],
            }
        ).replace_schema_metadata({"huggingface": json.dumps({"info": {"features": features}})})
        path = folder / f"{kind.lower()}-{count}.parquet"
        pq.write_table(table, path, row_group_size=100)
        out[kind.lower()] = (path, blobs)
    return out


def pillow_rate(blobs: list[bytes]) -> float:
    from PIL import Image

    start = time.perf_counter()
    for blob in blobs:
        np.asarray(Image.open(io.BytesIO(blob)))
    return len(blobs) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, nargs="*", default=[4000, 8000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scratch", type=Path, default=None)
    args = parser.parse_args()
    print(
        f"expcli foreign images; Pillow {version('pillow')}, pyarrow {version('pyarrow')}; "
        f"{load_average()}"
    )
    print(
        f"{'source -> npz':14} {'frames':>7} {'seconds':>8} {'frames/s':>9} {'x own':>6} "
        f"{'peak MiB':>9} {'Pillow alone/s':>15}"
    )
    with tempfile.TemporaryDirectory(dir=args.scratch) as scratch:
        folder = Path(scratch)
        for count in args.frames:
            made = sources(folder, frames(count))
            own_rate = None
            for name, (path, blobs) in made.items():
                seconds, peak, _ = convert(folder, path, args.repeats)
                rate = count / seconds
                own_rate = own_rate or rate
                alone = f"{pillow_rate(blobs):>15.0f}" if blobs else f"{'':>15}"
                print(
                    f"{name:14} {count:>7} {seconds:>8.2f} {rate:>9.0f} "
                    f"{fmt_ratio(rate / own_rate):>6} {peak:>9.0f} {alone}"
                )


if __name__ == "__main__":
    main()
