"""The write plan of a collect run's output, made once from its settings.

The output's format (a sharded folder for a path without suffix), the compression as
the format object takes it (a folder's: its shards' format, ``Format.checked_compression``),
the shard format, frames and overwrite: one ``WritePlan`` that the job hands whole to the
output kind that writes it. Refusals name the option, the output and what it takes.
"""

from __future__ import annotations

from pathlib import Path

from expcli.collect.settings import CollectSettings
from expcli.errors import ConfigError
from expcli.formats.rows import Format, WritePlan
from expcli.formats.sharded import find_shard_format
from expcli.formats.table import (
    SHARDED_FOLDER,
    format_from_suffix,
    format_named,
    formats_in_order,
    suffix_help,
)
from expcli.spec import Compression

__all__ = ["output_plan"]


def output_plan(settings: CollectSettings, output: Path, *, to_folder: bool) -> WritePlan:
    """The write of a run's output: its format, and the compression and shard format checked.

    The format object judges the compression (a folder's: its shards' format,
    ``Format.checked_compression``); the messages name the option, the output and what it
    takes.

    Raises:
        ConfigError: ``--shard-format`` for a file, ``--compression`` that the output's format
            does not take, an output whose suffix names no format or one expcli only reads.
    """
    if settings.shard_format is not None and not to_folder:
        raise ConfigError(f"--shard-format applies to a folder output (no suffix), not {output}")
    fmt = SHARDED_FOLDER if to_folder else format_from_suffix(output)
    if to_folder:
        written: Format | None = find_shard_format(settings.shard_format)
    else:
        written = None if fmt is None else format_named(fmt)
        if written is not None:
            written.refuse_write(output)  # a format expcli only reads (Arrow IPC)
    compression = _compression(written, output, settings.compression)
    if fmt is None:
        raise ConfigError(
            f"cannot tell the output format from {output.name!r}; name a suffix "
            f"({suffix_help()}) or pass a format"
        )
    return WritePlan(
        output,
        fmt,
        compression=compression,
        shard_format=settings.shard_format,
        frames=settings.frames,
        overwrite=settings.overwrite,
        license=settings.license,
        images=settings.images,
    )


def _compression(
    written: Format | None, output: Path, compression: Compression | None
) -> str | None:
    """``--compression`` as ``written`` (the format the output's files are in) takes it.

    Raises:
        ConfigError: The format does not compress, or not so.
    """
    if written is None:  # a suffix of no format: said by the caller
        if compression not in (None, Compression.NONE):
            raise _compresses_not(output)
        return None
    try:
        return written.checked_compression(compression)
    except ConfigError:
        if not written.compresses:
            raise _compresses_not(output) from None
        raise ConfigError(
            f"--compression {compression} does not apply to {written.shown} output ({output}); "
            f"it takes {', '.join(written.compressions)}"
        ) from None


def _compresses_not(output: Path) -> ConfigError:
    """``--compression`` given for an output whose format does not compress."""
    suffixes = "/".join(s for r in formats_in_order() if r.compresses for s in r.suffixes)
    return ConfigError(f"--compression applies to {suffixes} output, not {output}")
