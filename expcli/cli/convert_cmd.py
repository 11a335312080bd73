"""``expcli convert``: a thin layer over ``expcli.conversion.convert``."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from expcli.cli._authorship_options import (
    AlgorithmNameOption,
    AuthorEmailOption,
    AuthorOption,
    CodePermalinkOption,
    LicenseOption,
    authorship_of,
)
from expcli.cli._collect_options import ShardFormatOption
from expcli.cli._console import err_console, file_progress, out_console, phases_on
from expcli.cli._errors import reports_errors
from expcli.cli._lerobot_options import (
    FpsOption,
    NextObservationsOption,
    RobotTypeOption,
    TaskOption,
    lerobot_settings_of,
)
from expcli.cli._read_options import (
    ColumnsOption,
    DoneMeansOption,
    FramesOption,
    ImagesOption,
    NumEnvs,
    parse_compression,
    typed_choice,
    warn_unrecorded_envs,
)
from expcli.cli._storage_option import ConvertToOption, StorageOption, storage_spelled
from expcli.errors import ConfigError, printable
from expcli.formats.rows import Layout
from expcli.spec import Compression, FramesForm, ImagesForm

if TYPE_CHECKING:
    from expcli.conversion import ConvertResult, Progress
    from expcli.formats.column_roles import ColumnRoles

PROGRESS_MIN_BYTES = 8 * 1024 * 1024


@reports_errors
def convert_cmd(
    src: Annotated[Path, typer.Argument(help="Dataset to read ({sources}).")],
    dst: Annotated[
        Path,
        typer.Argument(
            help="File to write; its suffix names the format (missing folders on its path "
            "are made). `-` writes {streams} to stdout; name the format with --to."
        ),
    ],
    to: ConvertToOption = None,
    storage: StorageOption = None,
    compression: Annotated[
        Compression | None,
        typed_choice(
            "--compression",
            "The output's compression ({by_format}); default: none, Parquet's zstd.",
            parse_compression,
            Compression,
        ),
    ] = None,
    layout: Annotated[
        Layout, typed_choice("--layout", "Write for another library.", Layout.parse, Layout)
    ] = Layout.EXPCLI,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace DST if it exists.")
    ] = False,
    verify: Annotated[
        bool, typer.Option("--verify", help="Read the output back and compare every tensor first.")
    ] = False,
    num_envs: NumEnvs = None,
    shard_format: ShardFormatOption = None,
    frames: FramesOption = FramesForm.ONCE,
    images: ImagesOption = ImagesForm.PNG,
    columns: ColumnsOption = None,
    done_means: DoneMeansOption = None,
    author: AuthorOption = None,
    author_email: AuthorEmailOption = None,
    algorithm_name: AlgorithmNameOption = None,
    code_permalink: CodePermalinkOption = None,
    license: LicenseOption = None,
    fps: FpsOption = None,
    task: TaskOption = None,
    robot_type: RobotTypeOption = None,
    next_observations: NextObservationsOption = None,
) -> None:
    """Convert a dataset between {titles} (and foreign layouts), losslessly."""
    from expcli.formats.column_roles import column_roles

    warn_unrecorded_envs(src, num_envs)
    mapping = column_roles(columns, done_means)
    authorship = authorship_of(author, author_email, algorithm_name, code_permalink)
    to = storage_spelled(layout, to, storage)
    lerobot = lerobot_settings_of(fps, task, robot_type, next_observations)
    if str(dst) == "-":
        refused: dict[str, object] = {"--shard-format": shard_format, "--fps": lerobot}
        refused |= {"--author": authorship, "--license": license}
        _to_stdout(src, to, compression, layout, verify, num_envs, mapping, refused)
        return
    convert_and_report(
        src,
        dst,
        to=to,
        compression=compression,
        layout=layout,
        overwrite=overwrite,
        verify=verify,
        num_envs=num_envs,
        shard_format=shard_format,
        frames=frames,
        columns=mapping,
        authorship=authorship,
        license=license,
        lerobot=lerobot,
        images=images,
    )


def convert_and_report(src: Path, dst: Path, *, quiet: bool = False, **options: Any) -> None:
    """``expcli.convert`` with a progress bar on big sources, then its lines (``show_conversion``).

    ``options`` go to ``convert``.
    """
    from expcli.conversion import convert

    show_conversion(src, lambda progress: convert(src, dst, progress=progress, **options), quiet)


def show_conversion(
    src: Path, conversion: Callable[[Progress | None], ConvertResult], quiet: bool = False
) -> None:
    """Run ``conversion`` (given its progress callback) of ``src``, with a bar on big sources.

    A layout's losses are a yellow ``warning:`` line each on stderr; the conversion is one
    line on stdout (``quiet``: no bar, and the target's path alone).
    """
    from rich.markup import escape

    with (
        (
            nullcontext(None)
            if quiet
            else file_progress(src, "converting", min_bytes=PROGRESS_MIN_BYTES, total=2.0)
        ) as bar,
        warnings.catch_warnings(record=True) as losses,  # a layout's losses: one line each
    ):
        warnings.simplefilter("always", UserWarning)
        result = conversion(None if bar is None else phases_on(bar))
    for loss in losses:
        err_console().print(
            f"[yellow]warning:[/yellow] {escape(printable(str(loss.message)))}",
            soft_wrap=True,
            highlight=False,
        )
    read, written = (escape(printable(str(p))) for p in (result.src, result.dst))
    if quiet:
        out_console().print(written, soft_wrap=True, highlight=False)
        return
    out_console().print(
        f"converted {read} ({_mb(result.bytes_read)}, {result.src_format}) -> "
        f"{written} ({_mb(result.bytes_written)}, {result.dst_format}"
        f"{'' if result.layout is Layout.EXPCLI else f', {result.layout} layout'}): "
        f"{result.tensors} tensors, {result.transitions:,} transitions in {result.seconds:.2f} s"
        f"{', verified' if result.verified else ''}",
        soft_wrap=True,
        highlight=False,
    )


def _to_stdout(
    src: Path,
    to: str | None,
    compression: Compression | None,
    layout: Layout,
    verify: bool,
    num_envs: int | None,
    mapping: ColumnRoles | None,
    refused: Mapping[str, object],
) -> None:
    """``convert SRC -``: stream the dataset to stdout, refusing what cannot go there.

    ``refused``: options for a file or folder DST only, and each one's value (None: not given).
    """
    import sys

    from expcli.conversion import convert_to_stream
    from expcli.formats.table import compressing_formats, format_named, listed, stream_formats

    if refused["--shard-format"] is not None:
        raise ConfigError("writing to stdout (-): --shard-format is for a folder DST")
    if refused["--author"] is not None:
        raise ConfigError("writing to stdout (-): --author and its kin are for --layout minari")
    if refused["--license"] is not None:
        raise ConfigError("writing to stdout (-): --license is for a folder's dataset card")
    if refused["--fps"] is not None:
        raise ConfigError(
            "writing to stdout (-): --fps, --task, --robot-type and --next-observations "
            "are for --layout lerobot"
        )
    if to is None:
        names = listed(stream_formats())
        raise ConfigError(f"writing to stdout (-): name the format with --to {names}")
    for given, option in ((layout is not Layout.EXPCLI, "--layout"), (verify, "--verify")):
        if given:
            raise ConfigError(f"writing to stdout (-): {option} needs a file to write")
    if compression not in (None, Compression.NONE):
        rows = [row for name in compressing_formats() if (row := format_named(name)) is not None]
        shown = listed([row.shown for row in rows])
        raise ConfigError(f"writing to stdout (-): --compression is for {shown} files")
    row = format_named(to)
    text = row is not None and row.streams and row.stream_text
    if not text and sys.stdout.isatty():
        raise ConfigError(
            f"refusing to write binary {to} to a terminal; redirect stdout or name a file"
        )
    convert_to_stream(src, sys.stdout.buffer, to=to, num_envs=num_envs, mapping=mapping)


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.1f} kB"
