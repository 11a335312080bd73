"""``expcli convert``: a thin layer over ``expcli.conversion.convert``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from expcli.cli._console import BarUpdate, file_progress, out_console
from expcli.cli._errors import reports_errors
from expcli.cli._read_options import NumEnvs, warn_unrecorded_envs

PROGRESS_MIN_BYTES = 8 * 1024 * 1024


@reports_errors
def convert_cmd(
    src: Annotated[
        Path, typer.Argument(help="Dataset to read (.pt, .npz, .csv, .h5, or a Minari folder).")
    ],
    dst: Annotated[
        Path,
        typer.Argument(
            help="File to write; its suffix names the format. `-` writes npz, pt or csv "
            "(rows only) to stdout; name the format with --to."
        ),
    ],
    to: Annotated[
        str | None, typer.Option("--to", help="Output format: pt, npz, csv or hdf5.")
    ] = None,
    compression: Annotated[
        str, typer.Option("--compression", help="HDF5 compression: none, gzip or lzf.")
    ] = "none",
    layout: Annotated[
        str,
        typer.Option(
            "--layout", help="Write for another library: expcli, skrl, tianshou, minari, d4rl."
        ),
    ] = "expcli",
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace DST if it exists.")
    ] = False,
    verify: Annotated[
        bool, typer.Option("--verify", help="Read the output back and compare every tensor first.")
    ] = False,
    num_envs: NumEnvs = None,
) -> None:
    """Convert a dataset between pt, npz, csv and HDF5 (and foreign layouts), losslessly."""
    from rich.markup import escape

    from expcli.conversion import convert
    from expcli.errors import printable

    warn_unrecorded_envs(src, num_envs)
    if str(dst) == "-":
        _to_stdout(src, to, compression, layout, verify, num_envs)
        return
    options: dict[str, object] = {"to": to, "compression": compression, "layout": layout}
    options.update(overwrite=overwrite, num_envs=num_envs)
    with file_progress(src, "converting", min_bytes=PROGRESS_MIN_BYTES, total=2.0) as bar:
        progress = None if bar is None else _phases_on(bar)
        result = convert(src, dst, verify=verify, progress=progress, **options)  # type: ignore[arg-type]
    read, written = (escape(printable(str(p))) for p in (result.src, result.dst))
    out_console().print(
        f"converted {read} ({_mb(result.bytes_read)}, {result.src_format}) -> "
        f"{written} ({_mb(result.bytes_written)}, {result.dst_format}"
        f"{'' if result.layout == 'expcli' else ', ' + result.layout + ' layout'}): "
        f"{result.tensors} tensors, {result.transitions:,} transitions in {result.seconds:.2f} s"
        f"{', verified' if result.verified else ''}",
        soft_wrap=True,
        highlight=False,
    )


def _phases_on(bar: BarUpdate) -> Callable[[str, float], None]:
    """Convert's progress (a phase and its fraction done) on a bar of total 2: read, write."""
    starts = {"read": 0.0, "write": 1.0, "verify": 1.0}

    def progress(phase: str, done: float) -> None:
        bar(starts[phase] + done, phase)

    return progress


def _to_stdout(
    src: Path, to: str | None, compression: str, layout: str, verify: bool, num_envs: int | None
) -> None:
    """``convert SRC -``: stream the dataset to stdout, refusing what cannot go there."""
    import sys

    from expcli.conversion import convert_to_stream
    from expcli.errors import ConfigError

    if to is None:
        raise ConfigError("writing to stdout (-): name the format with --to npz, pt or csv")
    for given, option in ((layout != "expcli", "--layout"), (verify, "--verify")):
        if given:
            raise ConfigError(f"writing to stdout (-): {option} needs a file to write")
    if compression != "none":
        raise ConfigError("writing to stdout (-): --compression is for HDF5 files")
    if to != "csv" and sys.stdout.isatty():
        raise ConfigError(
            f"refusing to write binary {to} to a terminal; redirect stdout or name a file"
        )
    convert_to_stream(src, sys.stdout.buffer, to=to, num_envs=num_envs)


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.1f} kB"
