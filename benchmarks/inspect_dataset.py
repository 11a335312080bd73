"""Benchmark ``expcli inspect`` against reading the arrays and calling numpy on them.

What it measures
    A ``--size-mb`` MiB dataset (default 2048; (T, 16 envs, feature): observations and
    next_observations (4, float32), actions (1, int64), rewards (1, float32), terminated and
    truncated (1, bool); 46 bytes per transition), written once as HDF5 and as npz. For each:
    ``summarize(path)`` (what ``expcli inspect`` computes: min, max, mean, std, NaN and inf
    counts of every tensor in float64, episode statistics) against the peer: h5py /
    ``np.load(allow_pickle=False)`` reading each array whole, then numpy's ``min``, ``max``,
    ``mean`` and ``std`` on it (one array at a time, so the peer holds the largest array).

How it times
    Each measurement runs in a fresh child (``--one KIND PATH``) that imports what it needs,
    then times the call and reports its peak RSS (VmHWM). Files are read from the warm page
    cache (each is read once before timing). Medians of ``--repeats`` (default 3), interleaved
    round-robin, so the machine's load hits every row alike.

Targets
    expcli's time <= 1.5x the peer's on the same file, and its peak RSS <= 300 MiB.

Run it
    python benchmarks/inspect_dataset.py [--size-mb 512] [--repeats 3]

    (Not ``inspect.py``: run as a script, a file of that name in this folder would hide the
    standard library's ``inspect`` module from numpy in every benchmark here.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._report import load_average, peak_rss_kib, version

NUM_ENVS = 16
MIB = 1 << 20
BYTES_PER_TRANSITION = 2 * 16 + 8 + 4 + 1 + 1
KINDS = ("expcli", "numpy")
SUFFIXES = ("h5", "npz")


def make_dataset(size_mb: int) -> Any:
    """A dataset whose tensors are generated slice by slice as they are written."""
    from expcli.formats import Dataset
    from expcli.formats.lazy import LazyRows
    from expcli.spec import CircularState

    rows = max(2, size_mb * MIB // BYTES_PER_TRANSITION // NUM_ENVS)

    def generator(name: str, feature: tuple[int, ...], dtype: Any) -> LazyRows:
        def read(start: int, stop: int) -> np.ndarray:
            rng = np.random.default_rng([start, len(name)])
            shape = (stop - start, NUM_ENVS, *feature)
            if np.dtype(dtype).kind == "b":
                return rng.random(shape) < (0.02 if name == "terminated" else 0.005)
            if np.dtype(dtype).kind == "i":
                return rng.integers(0, 4, shape, dtype=dtype)
            return rng.standard_normal(shape, dtype=np.float32)

        return LazyRows((rows, NUM_ENVS, *feature), np.dtype(dtype), read)

    tensors = {
        "observations": generator("observations", (4,), np.float32),
        "next_observations": generator("next_observations", (4,), np.float32),
        "actions": generator("actions", (1,), np.int64),
        "rewards": generator("rewards", (1,), np.float32),
        "terminated": generator("terminated", (1,), np.bool_),
        "truncated": generator("truncated", (1,), np.bool_),
    }
    return Dataset(tensors, CircularState(rows // 3, 0, True), {"env_id": "Bench-v0"})


def run_one(kind: str, path: Path) -> dict[str, float]:
    """Time one measurement in this process; returns seconds and peak RSS in MiB."""
    if kind == "expcli":
        from expcli.summary import summarize

        started = time.perf_counter()
        summarize(path)
    elif path.suffix == ".npz":
        started = time.perf_counter()
        with np.load(path, allow_pickle=False) as archive:
            for name in archive.files:
                _numpy_stats(archive[name])
    else:
        import h5py

        started = time.perf_counter()
        with h5py.File(path, "r") as f:
            for name in f:
                _numpy_stats(f[name][()])
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "rss_mib": peak_rss_kib() / 1024}


def _numpy_stats(array: np.ndarray) -> None:
    if array.ndim == 0:  # the metadata string
        return
    array.min(), array.max(), array.mean(), array.std()


def _child(kind: str, path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--one", kind, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(args.one[0], Path(args.one[1]))))
        return
    from expcli.formats import write_dataset

    with tempfile.TemporaryDirectory(prefix="expcli-bench-", dir=os.environ.get("TMPDIR")) as tmp:
        dataset = make_dataset(args.size_mb)
        paths = {s: write_dataset(dataset, Path(tmp) / f"bench.{s}") for s in SUFFIXES}
        for path in paths.values():  # warm the page cache
            with open(path, "rb") as f:
                while f.read(64 * MIB):
                    pass
        results: dict[tuple[str, str], list[dict[str, float]]] = {}
        for _ in range(args.repeats):
            for suffix, path in paths.items():
                for kind in KINDS:
                    results.setdefault((suffix, kind), []).append(_child(kind, path))
        _report(args, paths, results)


def _report(
    args: argparse.Namespace,
    paths: dict[str, Path],
    results: dict[tuple[str, str], list[dict[str, float]]],
) -> None:
    print(
        f"expcli inspect vs read + numpy min/max/mean/std: {args.size_mb} MiB per file, "
        f"{NUM_ENVS} envs, median of {args.repeats}"
    )
    print(
        f"python {platform.python_version()}, numpy {version('numpy')}, "
        f"h5py {version('h5py')}, {os.cpu_count()} cores, {load_average()}"
    )
    print()
    header = (
        f"{'file':<6} {'what':<44} {'seconds':>8} {'MB/s':>7} {'peak RSS':>10} {'time ratio':>11}"
    )
    print(header)
    print("-" * len(header))
    for suffix, path in paths.items():
        size = path.stat().st_size
        peer = statistics.median(r["seconds"] for r in results[(suffix, "numpy")])
        for kind in KINDS:
            runs = results[(suffix, kind)]
            seconds = statistics.median(r["seconds"] for r in runs)
            rss = max(r["rss_mib"] for r in runs)
            what = (
                "expcli summarize (stats + episodes, streamed)"[:44]
                if kind == "expcli"
                else ("h5py read + numpy stats" if suffix == "h5" else "np.load + numpy stats")
            )
            print(
                f"{suffix:<6} {what:<44} {seconds:>8.2f} {size / MIB / seconds:>7.0f} "
                f"{rss:>7.0f} MiB {seconds / peer:>10.2f}x"
            )
    print()
    print("targets: expcli time <= 1.50x the peer's; expcli peak RSS <= 300 MiB")


if __name__ == "__main__":
    main()
