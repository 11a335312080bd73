"""merge, split and filter at scale (issue 25): speed against ``convert``, and bounded memory.

Each row runs in a fresh interpreter (seconds, and peak RSS above the RSS it had once its
imports were done), ``--repeats`` times (median seconds, largest peak), at ``--sizes`` GB
(default 1 and 2) of two kinds of data, written as npz: CartPole-like small rows (16 envs,
episodes of about 50 steps) and 84x84 uint8 frames (8 envs). Every verb writes npz, as the
``convert`` it is set beside does (npz -> npz, the same bytes through the same writer):

* ``convert``: the baseline, the whole file rewritten.
* ``merge``: two files of half the size each into one (the same bytes out as ``convert``).
* ``split``: 90/10 into two files, by whole episodes.
* ``filter``: ``--where "length >= 5"`` (most episodes stay).

The ratio is convert's seconds over the verb's, each on the same input bytes in the same
run (>= 0.7x is the target); the peaks' target is <= 300 MiB above baseline, and the two
sizes' peaks < 50 MiB apart. Run it alone: ``flock /tmp/expcli-cpu.lock python -m
benchmarks.shaping``; files go under ``--scratch`` and are removed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from benchmarks._report import load_average
from benchmarks.parquet_scale import make_npz

CHILD = """
import sys, time

def kib(field):
    return int(next(x for x in open("/proc/self/status") if x.startswith(field)).split()[1])

verb, out, sources = sys.argv[1], sys.argv[2], sys.argv[3:]
import numpy
import expcli.formats.npz_format
from expcli.conversion import convert
from expcli.shaping.verbs import filter_episodes, merge, split
before, start = kib("VmRSS:"), time.perf_counter()
if verb == "convert":
    convert(sources[0], out, overwrite=True)
elif verb == "merge":
    merge(sources, out, overwrite=True)
elif verb == "split":
    split(sources[0], [out, out + ".val.npz"], fractions=[0.9, 0.1], overwrite=True)
else:
    filter_episodes(sources[0], out, where="length >= 5", overwrite=True)
print(time.perf_counter() - start, (kib("VmHWM:") - before) / 1024)
"""

VERBS = ("convert", "merge", "split", "filter")


def run_child(folder: Path, verb: str, out: Path, sources: list[Path]) -> tuple[float, float]:
    script = folder / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    os.sync()
    done = subprocess.run(
        [sys.executable, str(script), verb, str(out), *map(str, sources)],
        check=True,
        capture_output=True,
        text=True,
    )
    seconds, peak = map(float, done.stdout.split())
    for path in folder.glob("out*"):
        path.unlink()
    return seconds, peak


def rows(scratch: Path, sizes: list[float], repeats: int) -> None:
    print(
        f"\n{'data':8} {'GB':>4} {'verb':8} {'seconds':>8} {'x convert':>10} {'peak MiB':>9}",
        flush=True,
    )
    for frames in (False, True):
        kind = "frames" if frames else "rows"
        for size in sizes:
            whole, halves = scratch / "whole.npz", [scratch / "a.npz", scratch / "b.npz"]
            make_npz(whole, size, frames)
            for half in halves:
                make_npz(half, size / 2, frames)
            timings: dict[str, list[float]] = {verb: [] for verb in VERBS}
            peaks: dict[str, float] = dict.fromkeys(VERBS, 0.0)
            for _ in range(repeats):  # round robin: the machine's noise hits every verb
                for verb in VERBS:
                    sources = halves if verb == "merge" else [whole]
                    seconds, peak = run_child(scratch, verb, scratch / "out.npz", sources)
                    timings[verb].append(seconds)
                    peaks[verb] = max(peaks[verb], peak)
            base = statistics.median(timings["convert"])
            for verb in VERBS:
                median = statistics.median(timings[verb])
                print(
                    f"{kind:8} {size:4.1f} {verb:8} {median:8.2f} {base / median:9.2f}x "
                    f"{peaks[verb]:9.0f}",
                    flush=True,
                )
            for path in (whole, *halves):
                path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,2", help="GB of data (default 1,2)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scratch", type=Path, default=None)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(dir=args.scratch, prefix="expcli-shaping-"))
    print(f"load average: {load_average()}")
    try:
        rows(scratch, [float(s) for s in args.sizes.split(",")], args.repeats)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
