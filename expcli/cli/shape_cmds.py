"""``expcli merge``, ``split`` and ``filter``: thin layers over ``expcli.shaping.verbs``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from expcli.cli._console import BarUpdate, err_console, file_progress, out_console, phases_on
from expcli.cli._errors import reports_errors
from expcli.cli._help import file_and_folder_formats, shard_choices
from expcli.cli._read_options import (
    ColumnsOption,
    DoneMeansOption,
    completing,
    parse_compression,
    typed_choice,
)
from expcli.errors import ConfigError, printable
from expcli.spec import Compression

if TYPE_CHECKING:
    from expcli.shaping.verbs import ShapeResult

PROGRESS_MIN_BYTES = 8 * 1024 * 1024

_OUTPUT_HELP = "Dataset to write; missing folders on its path are made."
_Overwrite = Annotated[bool, typer.Option("--overwrite", help="Replace an existing output.")]
_To = Annotated[
    str | None,
    typer.Option(
        "--to",
        metavar="{format_choices}",
        autocompletion=completing(file_and_folder_formats),
        help="Output format, for a name without a suffix; a suffix that names another "
        "format is refused (exit 2).",
    ),
]
_Compression = Annotated[
    Compression | None,
    typed_choice(
        "--compression",
        "The output's compression ({by_format}); default: none, Parquet's zstd.",
        parse_compression,
        Compression,
    ),
]
_LineagePaths = Annotated[
    str,
    typer.Option(
        "--lineage-paths",
        metavar="[relative|absolute]",
        autocompletion=completing(["relative", "absolute"]),
        help="How the output's lineage records its sources' paths: relative to the output's "
        "folder, or absolute (which shows your folders to whoever gets the dataset).",
    ),
]
_ShardFormat = Annotated[
    str | None,
    typer.Option(
        "--shard-format",
        metavar="{shard_choices}",
        autocompletion=completing(shard_choices),
        help="A folder output's shards.",
        show_default="npz",
    ),
]


@reports_errors
def merge_cmd(
    sources: Annotated[list[Path], typer.Argument(help="Datasets to merge, in this order.")],
    output: Annotated[Path, typer.Option("--output", "-o", help=_OUTPUT_HELP)],
    allow: Annotated[
        list[str] | None,
        typer.Option("--allow", help="A safe difference to merge anyway: env-id, env-spec."),
    ] = None,
    incomplete: Annotated[
        str,
        typer.Option(
            "--incomplete",
            metavar="[keep|drop]",
            autocompletion=completing(["keep", "drop"]),
            help="Episodes cut short: keep (marked as cut) or drop.",
        ),
    ] = "keep",
    to: _To = None,
    compression: _Compression = None,
    shard_format: _ShardFormat = None,
    overwrite: _Overwrite = False,
    lineage_paths: _LineagePaths = "relative",
    columns: ColumnsOption = None,
    done_means: DoneMeansOption = None,
) -> None:
    """Merge datasets with the same tensors and spaces into one, episode by episode."""
    from expcli.shaping.verbs import merge

    with file_progress(sources[0], "merging", min_bytes=PROGRESS_MIN_BYTES, total=2.0) as bar:
        result = merge(
            sources,
            output,
            allow=allow or (),
            incomplete=incomplete,
            to=to,
            compression=compression,
            shard_format=shard_format,
            overwrite=overwrite,
            progress=None if bar is None else phases_on(bar),
            lineage_paths=lineage_paths,
            columns=columns,
            done_means=done_means,
        )
    _report("merged", [result])


@reports_errors
def split_cmd(
    source: Annotated[Path, typer.Argument(help="Dataset to split.")],
    outputs: Annotated[
        list[Path],
        typer.Option(
            "--output",
            "-o",
            help="An output; give one per part. Missing folders on its path are made.",
        ),
    ],
    fractions: Annotated[
        str | None,
        typer.Option("--fractions", help="Shares of the episodes, one per output: 0.9,0.1."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random assignment.")] = 0,
    incomplete: Annotated[
        str,
        typer.Option(
            "--incomplete",
            metavar="[drop|OUTPUT]",
            autocompletion=completing(["drop"]),
            help="Episodes cut short: drop, or the output (name or 0, 1, ...) that gets them.",
        ),
    ] = "drop",
    to: _To = None,
    compression: _Compression = None,
    shard_format: _ShardFormat = None,
    overwrite: _Overwrite = False,
    lineage_paths: _LineagePaths = "relative",
    columns: ColumnsOption = None,
    done_means: DoneMeansOption = None,
) -> None:
    """Split a dataset into parts by whole episodes, at random (seeded): no episode in two."""
    from expcli.shaping.selectors import parse_fractions
    from expcli.shaping.verbs import split

    shares = parse_fractions(fractions) if fractions is not None else None
    with file_progress(source, "splitting", min_bytes=PROGRESS_MIN_BYTES, total=2.0) as bar:
        results = split(
            source,
            outputs,
            fractions=shares,
            seed=seed,
            incomplete=incomplete,
            to=to,
            compression=compression,
            shard_format=shard_format,
            overwrite=overwrite,
            progress=None if bar is None else _split_phases_on(bar, len(outputs)),
            lineage_paths=lineage_paths,
            columns=columns,
            done_means=done_means,
        )
    _report("split", results)


_Where = Annotated[
    str | None,
    typer.Option(
        "--where",
        help="Episodes for which this holds: fields return, length, terminated, truncated, "
        "env, index, complete, infos/NAME (means); and, or, not, < <= > >= == !=, + - * /. "
        'E.g. "return >= 200 and length < 400".',
    ),
]
_Top = Annotated[
    str | None,
    typer.Option("--top", help="The best episodes by --by: 10% or a count, highest first."),
]
_By = Annotated[str, typer.Option("--by", help="The field --top ranks by.")]
_Episodes = Annotated[
    str | None, typer.Option("--episodes", help="Episode indexes: 0:100, -10:, 3,7,9.")
]
_Envs = Annotated[
    str | None,
    typer.Option(
        "--envs",
        help="Env columns: 0,3 or 0:4 (0 to 3) or 4: ; ranges stop before their end, "
        "as --episodes' do.",
    ),
]
_Keep = Annotated[
    list[str] | None,
    typer.Option("--keep", help="Keep only these tensors (repeat; the done flags stay)."),
]
_Drop = Annotated[
    list[str] | None, typer.Option("--drop", help="Leave these tensors out (repeat).")
]
_FilterIncomplete = Annotated[
    str,
    typer.Option(
        "--incomplete",
        metavar="[drop|keep]",
        autocompletion=completing(["drop", "keep"]),
        help="Episodes cut short: drop, or keep (marked as cut).",
    ),
]


@reports_errors
def filter_cmd(
    source: Annotated[Path, typer.Argument(help="Dataset to read.")],
    output: Annotated[Path, typer.Option("--output", "-o", help=_OUTPUT_HELP)],
    where: _Where = None,
    top: _Top = None,
    by: _By = "return",
    episodes: _Episodes = None,
    envs: _Envs = None,
    keep: _Keep = None,
    drop: _Drop = None,
    incomplete: _FilterIncomplete = "drop",
    to: _To = None,
    compression: _Compression = None,
    shard_format: _ShardFormat = None,
    overwrite: _Overwrite = False,
    lineage_paths: _LineagePaths = "relative",
    columns: ColumnsOption = None,
    done_means: DoneMeansOption = None,
) -> None:
    """Keep the episodes (and tensors) you select; selectors combine with and."""
    from expcli.shaping.verbs import filter_episodes

    if not any((where, top, episodes, envs, keep, drop)):
        raise ConfigError(
            "filter: give a selector (--where, --top, --episodes, --envs, --keep or --drop)"
        )
    if envs is not None:
        _note_old_env_ranges(envs)
    with file_progress(source, "filtering", min_bytes=PROGRESS_MIN_BYTES, total=2.0) as bar:
        result = filter_episodes(
            source,
            output,
            where=where,
            top=top,
            by=by,
            episodes=episodes,
            envs=envs,
            keep=_listed(keep),
            drop=_listed(drop),
            incomplete=incomplete,
            to=to,
            compression=compression,
            shard_format=shard_format,
            overwrite=overwrite,
            progress=None if bar is None else phases_on(bar),
            lineage_paths=lineage_paths,
            columns=columns,
            done_means=done_means,
        )
    _report("filtered", [result])


def _note_old_env_ranges(envs: str) -> None:
    """Say, on stderr, how ``--envs`` reads a range written the old way (``0-3``)."""
    from rich.markup import escape

    from expcli.shaping.selectors import old_env_ranges

    today = old_env_ranges(envs)
    if today is not None:
        err_console().print(
            f"note: --envs {escape(envs)} is read as --envs {today} (ranges are written "
            "start:stop, as for --episodes)",
            soft_wrap=True,
            highlight=False,
        )


def _listed(given: list[str] | None) -> list[str] | None:
    """Names given repeated or comma-separated (``--keep observations,actions``)."""
    if not given:
        return None
    return [name.strip() for item in given for name in item.split(",") if name.strip()]


def _split_phases_on(bar: BarUpdate, parts: int) -> Callable[[str, float], None]:
    def progress(phase: str, done: float) -> None:
        if phase == "read":
            bar(done, phase)
            return
        number = int(phase.split()[1].split("/")[0]) - 1 if phase.startswith("write ") else 0
        bar(1.0 + (number + done) / parts, phase)

    return progress


def _report(verb: str, results: list[ShapeResult]) -> None:
    """One line per output (a split's parts share the episodes: its drops are counted once)."""
    from rich.markup import escape

    out = out_console()
    for result in results:
        shown = escape(printable(str(result.path)))
        line = (
            f"{verb} -> {shown} ({result.format}): {result.episodes:,} episodes, "
            f"{result.transitions:,} transitions"
        )
        if verb != "split":
            line += f"; dropped {result.dropped_episodes:,} episodes"
            if result.dropped_incomplete:
                line += f" ({result.dropped_incomplete:,} of them incomplete)"
        out.print(f"{line} in {result.seconds:.2f} s", soft_wrap=True, highlight=False)
    if verb == "split" and results and results[0].dropped_incomplete:
        out.print(
            f"dropped {results[0].dropped_incomplete:,} incomplete episodes "
            "(--incomplete OUTPUT keeps them there)",
            highlight=False,
        )
