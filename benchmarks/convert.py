"""Benchmark dataset conversion: expcli against the raw library calls on the same arrays.

What it measures
    A ``--size-mb`` MiB dataset (default 512; (T, 16 envs, feature): observations and
    next_observations (4, float32), actions (1, int64), rewards (1, float32), terminated and
    truncated (1, bool); 46 bytes per transition). Raw calls, every write fsynced: torch.save /
    torch.load(weights_only=True, mmap False and True), np.savez / np.load(allow_pickle=False),
    h5py writes (~1 MiB chunks of whole rows, expcli's layout; and contiguous) / reads of both.
    expcli ``convert`` for every ordered pair of pt, npz, h5 (output fsynced). CSV on
    ``--csv-transitions`` (default 100,000): expcli npz -> csv against np.savetxt of the same 2-D
    table (float32 '%.9g', which round-trips, the rest '%d'); csv -> npz against np.loadtxt.

How it times
    Each measurement runs in a fresh child (``--one KIND``) that imports what the call needs
    (torch only for pt), loads its inputs (a writer: the arrays), takes its peak RSS (VmHWM;
    ru_maxrss would inherit the parent's across fork + exec) as baseline, then times the call.
    "+RSS" is peak minus baseline, the largest of the repeats. Sources are written once and read
    from the warm page cache. MiB/s: array bytes over seconds; medians of ``--repeats`` (default
    3), interleaved round-robin.

Targets
    Each conversion >= 70% of the slower of the target's raw writer (h5: chunked, as expcli
    writes) and the source's raw reader (pt: the faster torch.load). CSV >= np.savetxt's rows/s.

Run it
    python benchmarks/convert.py [--quick (64 MiB, 20,000 CSV transitions)] [--repeats 1]
        [--csv-only (the CSV table alone)]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _report import fmt_ratio, load_average, peak_rss_kib, ratio, version

# Benchmark the checkout this script lives in, not some installed copy.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NUM_ENVS = 16
MIB = 1 << 20
CHUNK_BYTES = 1 << 20
BYTES_PER_TRANSITION = 2 * 16 + 8 + 4 + 1 + 1  # two float32 (4,), int64, float32, two bool
FORMATS = ("pt", "npz", "h5")
MODULES = {"pt": "pt_format", "npz": "npz_format", "h5": "hdf5_format", "csv": "csv_format"}
WRITERS = {"pt": "torch.save", "npz": "np.savez", "h5": "h5py write chunked"}
READERS = {"pt": ["torch.load", "torch.load mmap"], "npz": ["np.load"], "h5": ["h5py read chunked"]}
RAW = ["torch.save", "torch.load", "torch.load mmap", "np.savez", "np.load"]
RAW += [f"h5py {op} {layout}" for op in ("write", "read") for layout in ("chunked", "contiguous")]
PAIRS = [f"{s} -> {t}" for s, t in itertools.permutations(FORMATS, 2)]
CSV = {"npz -> csv": "np.savetxt", "np.savetxt": "", "csv -> npz": "np.loadtxt", "np.loadtxt": ""}
RAW_FILES = {"torch.save": "raw.pt", "np.savez": "raw.npz", "np.savetxt": "raw.csv"}
RAW_FILES |= {k: f"raw_{k.split()[-1]}.h5" for k in RAW if " write " in k}
Work = tuple[Callable[[], object], "Path | None"]  # the timed call; the file it writes
Arrays = dict[str, Any]  # name -> numpy array shaped (T, N, feature)


def make_arrays(transitions: int, seed: int = 0) -> Arrays:
    rng = np.random.default_rng(seed)
    steps = max(2, transitions // NUM_ENVS)
    obs = rng.standard_normal((steps + 1, NUM_ENVS, 4), dtype=np.float32)
    return {
        "observations": obs[:-1].copy(),
        "next_observations": obs[1:].copy(),
        "actions": rng.integers(0, 4, (steps, NUM_ENVS, 1), dtype=np.int64),
        "rewards": rng.standard_normal((steps, NUM_ENVS, 1), dtype=np.float32),
        "terminated": rng.random((steps, NUM_ENVS, 1)) < 0.01,
        "truncated": rng.random((steps, NUM_ENVS, 1)) < 0.001,
    }


def load_inputs(path: Path) -> Arrays:
    with np.load(path, allow_pickle=False) as z:
        return {name: z[name] for name in z.files}


def prepare(kind: str, d: Path) -> Work:
    """Untimed set-up of one measurement (before the RSS baseline): the call to time, and the
    file it writes (fsynced inside the timing)."""
    out = d / "out" / "raw"
    if "save" in kind or "write" in kind:  # a writer: its input arrays, in memory
        arrays = load_inputs(d / f"{'csv_' * (kind == 'np.savetxt')}inputs.npz")
    if " -> " in kind:
        from expcli.conversion import convert

        src, dst = kind.split(" -> ")
        for fmt in (src, dst):  # import the format modules before the timing
            importlib.import_module(f"expcli.formats.{MODULES[fmt]}")
        if src == "pt":  # reading .pt imports torch, as torch.load has it imported already
            importlib.import_module("torch")
        source, target = d / f"{'csv_' * ('csv' in kind)}src.{src}", out.with_suffix(f".{dst}")
        return (lambda: convert(source, target, overwrite=True)), target
    if kind.startswith("torch"):
        import torch

        if kind == "torch.save":
            tensors = {k: torch.from_numpy(v) for k, v in arrays.items()}
            return (lambda: torch.save(tensors, out)), out

        def torch_load() -> None:
            loaded = torch.load(d / "raw.pt", weights_only=True, mmap=kind.endswith("mmap"))
            for t in loaded.values():  # pages a memory map in; cheap for tensors already read
                t.numpy().reshape(-1).view(np.uint8).max()

        return torch_load, None
    if kind.startswith("h5py"):
        import h5py

        layout = kind.split()[-1]
        if " write " in kind:

            def h5py_write() -> None:
                with h5py.File(out, "w") as f:
                    for name, a in arrays.items():
                        rows = max(1, min(len(a), CHUNK_BYTES // max(a[0].nbytes, 1)))
                        chunks = (rows, *a.shape[1:]) if layout == "chunked" else None
                        f.create_dataset(name, data=a, chunks=chunks)

            return h5py_write, out

        def h5py_read() -> Arrays:
            with h5py.File(d / f"raw_{layout}.h5", "r") as f:
                return {name: f[name][()] for name in f}

        return h5py_read, None
    if kind == "np.savez":
        return (lambda: np.savez(out.with_suffix(".npz"), **arrays)), out.with_suffix(".npz")
    if kind == "np.load":
        return (lambda: load_inputs(d / "raw.npz")), None
    if kind == "np.loadtxt":
        return (lambda: np.loadtxt(d / "raw.csv", delimiter=",", skiprows=1)), None
    flat = {k: a.reshape(-1, a.shape[-1]) for k, a in arrays.items()}  # np.savetxt: one table
    header = ",".join(f"{k}.{i}" for k, a in flat.items() for i in range(a.shape[1]))
    fmts = ["%.9g" if a.dtype.kind == "f" else "%d" for a in flat.values() for _ in a.T]
    table = np.concatenate([a.astype(np.float64) for a in flat.values()], axis=1)
    return (lambda: np.savetxt(out, table, fmts, ",", header=header, comments="")), out


def child(kind: str, folder: Path) -> int:
    """Run one measurement and print it as one JSON line."""
    try:
        work, written = prepare(kind, folder)
        gc.collect()
        base, t0 = peak_rss_kib(), time.perf_counter()
        work()
        if written is not None:
            fd = os.open(written, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        seconds = time.perf_counter() - t0
    except Exception as exc:  # the parent reports it as "skipped"
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:120]}))
        return 1
    print(json.dumps({"seconds": seconds, "base_kib": base, "peak_kib": peak_rss_kib()}))
    return 0


def setup(
    d: Path, size_mb: int, csv_transitions: int, csv_only: bool = False
) -> tuple[int, int, list[str]]:
    """Write every source file (only the CSV ones with ``csv_only``); returns the dataset's
    bytes, the CSV rows and setup notes."""
    from expcli.conversion import save
    from expcli.formats.dataset import Dataset
    from expcli.spec import CircularState

    def save_as(arrays: Arrays, path: Path) -> None:
        try:
            save(Dataset(arrays, state=CircularState(filled=True)), path)
        except Exception as exc:  # the conversions from it are then skipped
            notes.append(f"expcli save {path.name} failed ({type(exc).__name__}: {exc})"[:140])

    notes: list[str] = []
    (d / "out").mkdir()
    arrays = make_arrays(size_mb * MIB // BYTES_PER_TRANSITION if not csv_only else 2)
    nbytes = sum(a.nbytes for a in arrays.values())
    np.savez(d / "inputs.npz", **arrays)
    for fmt in FORMATS if not csv_only else ():
        save_as(arrays, d / f"src.{fmt}")
    small = make_arrays(csv_transitions, seed=1)
    np.savez(d / "csv_inputs.npz", **small)
    save_as(small, d / "csv_src.npz")
    save_as(small, d / "csv_src.csv")
    del arrays
    gc.collect()
    for kind, name in RAW_FILES.items():
        if csv_only and kind != "np.savetxt":
            continue
        work, written = prepare(kind, d)
        work()
        os.replace(str(written), d / name)
    os.sync()
    return nbytes, len(small["observations"]) * NUM_ENVS, notes


Runs = dict[str, list[dict[str, float | str]]]


def measure(kinds: Sequence[str], d: Path, repeats: int) -> Runs:
    """Every kind ``repeats`` times, each in a fresh child, round-robin; one failure ends a kind."""
    runs: Runs = {k: [] for k in kinds}
    for r, kind in itertools.product(range(repeats), kinds):
        if kind == kinds[0]:
            print(f"  repeat {r + 1}/{repeats}", flush=True)
        if error(runs, kind):
            continue
        cmd = [sys.executable, str(Path(__file__).resolve()), "--one", kind, "--dir", str(d)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        for p in (d / "out").iterdir():
            p.unlink()
        try:
            runs[kind].append(json.loads(proc.stdout.strip().splitlines()[-1]))
        except (IndexError, ValueError):
            lines = proc.stderr.strip().splitlines() or ["no output"]
            runs[kind].append({"error": lines[-1][:120]})
    return runs


def error(runs: Runs, kind: str) -> str | None:
    return next((str(x["error"]) for x in runs.get(kind, []) if "error" in x), None)


def rate(runs: Runs, kind: str, work: float) -> float | None:
    """Median work (bytes or rows) per second; None when the kind failed."""
    if error(runs, kind) or not runs.get(kind):
        return None
    return statistics.median(work / float(x["seconds"]) for x in runs[kind])


def cells(runs: Runs, kind: str, work: float, unit: float) -> list[str]:
    """Rate, spread, baseline, peak and +RSS (MiB) of one kind; "skipped" when it failed."""
    if (mid := rate(runs, kind, work)) is None:
        return ["skipped", "", "", "", ""]
    rates = [work / float(x["seconds"]) for x in runs[kind]]
    kib = [(float(x["base_kib"]), float(x["peak_kib"])) for x in runs[kind]]
    base, peak = statistics.median(b for b, _ in kib) / 1024, max(p for _, p in kib) / 1024
    extra = max(p - b for b, p in kib) / 1024
    spread = f"{(max(rates) - min(rates)) / mid:.0%}"
    return [f"{mid / unit:,.0f}", spread, f"{base:,.0f}", f"{peak:,.0f}", f"{extra:,.0f}"]


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        cols = zip(row, widths, strict=True)
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(cols))

    print(line(header))
    print("-" * len(line(header)))
    for row in rows:
        print(line(row))


def reference(runs: Runs, pair: str, nbytes: int) -> tuple[str, float | None]:
    """The slower of the target format's raw writer and the source's (faster) raw reader."""
    src, dst = pair.split(" -> ")
    reader = max(READERS[src], key=lambda k: rate(runs, k, nbytes) or 0.0)
    options = [(k, rate(runs, k, nbytes)) for k in (reader, WRITERS[dst])]
    if any(r is None for _, r in options):
        return " / ".join(k for k, _ in options), None
    return min(options, key=lambda o: o[1] or 0.0)


def report(
    runs: Runs, nbytes: int, rows: int, csv_only: bool = False
) -> list[tuple[str, float | None, float]]:
    """Print the three tables (the CSV one alone with ``csv_only``); returns the targets:
    text, measured ratio, threshold."""
    stats = ["MiB/s", "spread", "base MiB", "peak MiB", "+RSS MiB"]
    table: list[list[str]] = []
    targets: list[tuple[str, float | None, float]] = []
    if not csv_only:
        print_table(["raw library call", *stats], [[k, *cells(runs, k, nbytes, MIB)] for k in RAW])
        print()
    for pair in PAIRS if not csv_only else ():
        ref, ref_rate = reference(runs, pair, nbytes)
        value = ratio(rate(runs, pair, nbytes), ref_rate)
        ref_cell = "-" if ref_rate is None else f"{ref_rate / MIB:,.0f}"
        row = [*cells(runs, pair, nbytes, MIB), ref, ref_cell, fmt_ratio(value)]
        table.append([f"expcli {pair}", *row])
        targets.append((f"{pair} >= 0.70x {ref}", value, 0.7))
    if not csv_only:
        print_table(["conversion", *stats, "slower raw call", "MiB/s", "ratio"], table)
        print()
    table = []
    for kind, ref in CSV.items():
        value = ratio(rate(runs, kind, rows), rate(runs, ref, rows))
        label = f"expcli {kind}" if "->" in kind else kind
        vs = f"{fmt_ratio(value)} {ref}" if ref else ""
        table.append([label, *cells(runs, kind, rows, 1.0), vs])
    print_table([f"csv ({rows:,} rows)", "rows/s", *stats[1:], "vs"], table)
    csv = ratio(rate(runs, "npz -> csv", rows), rate(runs, "np.savetxt", rows))
    targets.append(("npz -> csv >= 1.00x np.savetxt rows/s", csv, 1.0))
    for kind in runs:
        if reason := error(runs, kind):
            print(f"  skipped {kind}: {reason}")
    return targets


def print_environment(args: argparse.Namespace, d: Path, nbytes: int, rows: int) -> None:
    import h5py

    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    cores = f"{os.cpu_count()} cores (nproc {len(os.sched_getaffinity(0))}), {platform.machine()}"
    same = os.stat(d).st_dev == os.stat(__file__).st_dev
    steps = nbytes // (BYTES_PER_TRANSITION * NUM_ENVS)
    print(
        f"machine: {cores}; {load_average()}; python "
        f"{platform.python_version()}; {now}\ntorch {version('torch')}, "
        f"numpy {np.__version__}, h5py {h5py.__version__} (HDF5 {h5py.version.hdf5_version}); "
        f"files in {d} (same disk as the checkout: {same})\ndataset: {nbytes / MIB:,.0f} MiB = "
        f"{steps:,} rows x {NUM_ENVS} envs x {BYTES_PER_TRANSITION} bytes; csv {rows:,} "
        f"transitions; medians of {args.repeats} runs"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size-mb", type=int, default=None, help="dataset MiB (default 512)")
    p.add_argument("--csv-transitions", type=int, default=None, help="default 100,000")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="64 MiB and 20,000 CSV transitions")
    p.add_argument("--csv-only", action="store_true", help="measure and print the CSV table only")
    p.add_argument("--one", choices=[*RAW, *PAIRS, *CSV], help=argparse.SUPPRESS)
    p.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.size_mb = args.size_mb or (64 if args.quick else 512)
    args.csv_transitions = args.csv_transitions or (20_000 if args.quick else 100_000)
    if args.size_mb < 1 or args.csv_transitions < 2 * NUM_ENVS or args.repeats < 1:
        p.error("--size-mb and --repeats must be >= 1, --csv-transitions >= 32")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.one:
        return child(args.one, args.dir)
    started = time.perf_counter()
    d = Path(tempfile.mkdtemp(prefix="expcli-convert-bench-"))
    try:
        if shutil.disk_usage(d).free < 12 * args.size_mb * MIB:
            print(f"not enough free space in {d} for a {args.size_mb} MiB dataset")
            return 1
        nbytes, rows, notes = setup(d, args.size_mb, args.csv_transitions, args.csv_only)
        print_environment(args, d, nbytes, rows)
        runs = measure([*CSV] if args.csv_only else [*RAW, *PAIRS, *CSV], d, args.repeats)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print()
    targets = report(runs, nbytes, rows, args.csv_only)
    for note in notes:
        print(f"  note - {note}")
    print("  note - a writer's baseline holds its input arrays; reads come from the page cache")
    print(f"  note - {load_average()} at the end")
    print("\ntargets:")
    width = max(len(t[0]) for t in targets)
    for text, value, threshold in targets:
        verdict = "N/A " if value is None else "PASS" if value >= threshold else "FAIL"
        print(f"  {verdict}  {text:<{width}}  measured {fmt_ratio(value):>6}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
