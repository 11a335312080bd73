"""Benchmark ``expcli inspect --html --plot`` on Pong folders of about 0.6 and 1.2 GB.

What it measures
    Pong runs (``ale_py:ALE/Pong-v5``, random policy, 4 env columns, 210x160x3 frames stored
    once: about 100 kB a transition) collected into sharded folders of ``--sizes-gb`` (default
    0.6 and 1.2), in the temporary folder, deleted at the end (``--keep`` keeps them). For
    each: ``write_report(folder, html=..., plot=...)`` (``inspect --html --plot``) against
    ``summarize(folder)`` (plain ``inspect``: the same pass without the report), the size of
    the HTML, and the peak RSS above the baseline.

How it times
    Each measurement runs in a fresh child (``--one KIND FOLDER OUT``) that imports what it
    needs (expcli's report, matplotlib, Pillow), takes its resident memory as the baseline,
    then times the call and reports its peak RSS (VmHWM) above that baseline. The folders are
    read from the warm page cache (each is read once before timing). Medians of
    ``--repeats`` (default 3), interleaved round-robin.

Targets
    The report <= 25 MB and its peak <= 600 MiB above the baseline, at both sizes.

Run it
    python benchmarks/report.py [--sizes-gb 0.6 1.2] [--repeats 3] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._report import load_average, peak_rss_kib, version

MIB = 1 << 20
ENVS = 4
BYTES_PER_STEP = 210 * 160 * 3 + 64  # one frame (next observations stored once) and the rest
KINDS = ("inspect", "report")


def collect(folder: Path, size_gb: float) -> None:
    steps = int(size_gb * 1e9 / BYTES_PER_STEP)
    subprocess.run(
        [sys.executable, "-m", "expcli", "collect", "ale_py:ALE/Pong-v5", "--envs", str(ENVS),
         "--steps", str(steps), "--seed", "0", "--mode", "subproc", "-o", str(folder), "-q"],
        check=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip


def run_one(kind: str, folder: Path, out: Path) -> dict[str, float]:
    """Time one measurement in this process: seconds, peak RSS above the baseline, HTML size."""
    import matplotlib.figure  # noqa: F401  (imported before the baseline, as the report's)
    import PIL.Image  # noqa: F401

    from expcli.report import write_report
    from expcli.summary import summarize

    baseline = _rss_kib()
    started = time.perf_counter()
    if kind == "report":
        write_report(folder, html=out / "report.html", plot=out / "returns.png")
    else:
        summarize(folder)
    seconds = time.perf_counter() - started
    html = out / "report.html"
    return {
        "seconds": seconds,
        "above_mib": (peak_rss_kib() - baseline) / 1024,
        "html_mb": html.stat().st_size / 1e6 if kind == "report" else 0.0,
    }


def _rss_kib() -> int:
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


def _child(kind: str, folder: Path, out: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--one", kind, str(folder), str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


def _warm(folder: Path) -> int:
    size = 0
    for path in folder.rglob("*"):
        if path.is_file():
            size += path.stat().st_size
            with open(path, "rb") as f:
                while f.read(64 * MIB):
                    pass
    return size


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-gb", type=float, nargs="+", default=[0.6, 1.2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the collected folders")
    parser.add_argument("--one", nargs=3, metavar=("KIND", "FOLDER", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        kind, folder, out = args.one
        print(json.dumps(run_one(kind, Path(folder), Path(out))))
        return
    tmp = Path(tempfile.mkdtemp(prefix="expcli-bench-report-", dir=os.environ.get("TMPDIR")))
    try:
        folders, sizes = {}, {}
        for size_gb in args.sizes_gb:
            folder = folders[size_gb] = tmp / f"pong-{round(size_gb * 1000)}mb"
            started = time.perf_counter()
            collect(folder, size_gb)
            print(f"collected {folder} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        results: dict[tuple[float, str], list[dict[str, float]]] = {}
        for _ in range(args.repeats):
            for size_gb, folder in folders.items():
                sizes[size_gb] = _warm(folder)
                for kind in KINDS:
                    out = tmp / f"out-{round(size_gb * 1000)}mb-{kind}"
                    out.mkdir(exist_ok=True)
                    results.setdefault((size_gb, kind), []).append(_child(kind, folder, out))
        _table(args, sizes, results)
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def _table(
    args: argparse.Namespace,
    sizes: dict[float, int],
    results: dict[tuple[float, str], list[dict[str, float]]],
) -> None:
    print(f"expcli inspect --html --plot of Pong folders ({ENVS} envs), median of {args.repeats}")
    print(
        f"python {platform.python_version()}, matplotlib {version('matplotlib')}, "
        f"pillow {version('pillow')}, {os.cpu_count()} cores, {load_average()}"
    )
    print()
    header = (
        f"{'folder':>9} {'what':<34} {'seconds':>8} {'vs inspect':>11} {'HTML':>9} "
        f"{'peak above baseline':>20}"
    )
    print(header)
    print("-" * len(header))
    for size_gb, size in sizes.items():
        plain = statistics.median(r["seconds"] for r in results[(size_gb, "inspect")])
        for kind in KINDS:
            runs = results[(size_gb, kind)]
            seconds = statistics.median(r["seconds"] for r in runs)
            above = max(r["above_mib"] for r in runs)
            html = max(r["html_mb"] for r in runs)
            what = "inspect --html --plot (report)" if kind == "report" else "inspect (summarize)"
            shown = f"{html:.1f} MB" if kind == "report" else "-"
            print(
                f"{size / 1e9:>6.2f} GB {what:<34} {seconds:>8.1f} {seconds / plain:>10.2f}x "
                f"{shown:>9} {above:>16.0f} MiB"
            )
    print()
    print("targets: the report <= 25 MB; its peak <= 600 MiB above the baseline")


if __name__ == "__main__":
    main()
