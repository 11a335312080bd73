"""Start-up of a tiny collect against gymnasium's own import (issue 42, "The front door").

Each command runs ``--repeats`` times (default 10) in a fresh interpreter, round robin so
that the machine's noise hits every row alike; the table gives each one's median wall
time, its ratio to ``python -c "import gymnasium"`` and the difference in seconds. The
target is a collect of 100 CartPole steps within 0.5 s of gymnasium's import. Rows:

* ``import gymnasium``: the floor, what any collect of a Gymnasium env pays;
* ``expcli --help``: the CLI's own start (typer, rich, the commands' registration);
* ``expcli collect CartPole-v1 --steps 100``: the figure the README quotes (``-o`` a
  fresh ``.npz`` in a scratch folder, removed at the end);
* ``expcli sample FILE``: one batch of 256 from the file that collect wrote.

The children run with ``PYTHONDONTWRITEBYTECODE`` unset, so the warm-up round leaves
expcli's bytecode in ``__pycache__`` as an installed package has it (without it every run
compiles expcli's sources again: about 0.4 s more here). ``--baseline DIR`` adds the
expcli rows of another checkout (``PYTHONPATH=DIR``), run round robin with this one's, so
that before and after meet the same load. Run it on a quiet machine:
``python -m benchmarks.startup``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks._report import fmt_ratio, load_average, ratio, version

Row = tuple[list[str], Path | None]
"""A command line, and the checkout whose expcli it runs (None: none asked for)."""


def commands(scratch: Path, trees: dict[str, Path | None]) -> dict[str, Row]:
    """The rows of the table: label -> command line and checkout, the floor first."""
    cli = [sys.executable, "-m", "expcli"]
    rows: dict[str, Row] = {"import gymnasium": ([sys.executable, "-c", "import gymnasium"], None)}
    for tag, tree in trees.items():
        out = str(scratch / f"run{len(rows)}.npz")
        collect = ["collect", "CartPole-v1", "--steps", "100", "--overwrite", "-o", out]
        rows[f"expcli --help{tag}"] = ([*cli, "--help"], tree)
        rows[f"expcli collect CartPole-v1 --steps 100{tag}"] = ([*cli, *collect], tree)
        rows[f"expcli sample (256 of those 100){tag}"] = (
            [*cli, "sample", out, "--seed", "0"],
            tree,
        )
    return rows


def wall_seconds(row: Row, scratch: Path) -> float:
    """Seconds one run of the row's command takes, start to exit (its output discarded).

    It runs in ``scratch``: ``python -m`` puts the working folder first on ``sys.path``,
    where a checkout would hide the one asked for.
    """
    command, tree = row
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    start = time.perf_counter()
    subprocess.run(
        command,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=scratch,
    )
    return time.perf_counter() - start


def measure(rows: dict[str, Row], repeats: int, scratch: Path) -> dict[str, list[float]]:
    """Every row ``repeats`` times, round robin, after one unmeasured warm-up round."""
    for row in rows.values():  # warm the page cache and write the file sample reads
        wall_seconds(row, scratch)
    times: dict[str, list[float]] = {label: [] for label in rows}
    for _ in range(repeats):
        for label, row in rows.items():
            times[label].append(wall_seconds(row, scratch))
    return times


def report(times: dict[str, list[float]]) -> None:
    """The table: median seconds, ratio and difference to the first row."""
    medians = {label: statistics.median(values) for label, values in times.items()}
    floor_label = next(iter(medians))
    floor = medians[floor_label]
    width = max(map(len, medians))
    print(f"\n{'command':{width}} {'median s':>9} {'min s':>7} {'ratio':>7} {'diff s':>7}")
    for label, median in medians.items():
        print(
            f"{label:{width}} {median:9.3f} {min(times[label]):7.3f} "
            f"{fmt_ratio(ratio(median, floor)):>7} {median - floor:+7.3f}"
        )
    print(f"(ratio and diff against '{floor_label}'; {len(times[floor_label])} runs each)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another checkout (e.g. `git archive main | tar -x -C /tmp/base`) whose expcli "
        "rows run beside this one's, round robin: before and after on the same load",
    )
    args = parser.parse_args()
    here = Path(__file__).resolve().parents[1]
    trees: dict[str, Path | None] = {"": here}
    if args.baseline is not None:
        trees = {" (baseline)": args.baseline.resolve(), "": here}
    print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores; Python {platform.python_version()}, "
        f"gymnasium {version('gymnasium')}, typer {version('typer')}; {load_average()}"
    )
    scratch = Path(tempfile.mkdtemp(prefix="expcli-startup-"))
    try:
        report(measure(commands(scratch, trees), args.repeats, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(load_average())


if __name__ == "__main__":
    main()
