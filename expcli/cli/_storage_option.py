"""``--storage``: the storage of a layout kept in a folder; ``--to`` names formats only.

``--to`` once named that storage too (``--layout minari --to parquet``); it is still taken
there, with a one-line note naming the new spelling (``formats.registry.storage_or_format``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from expcli.cli._console import err_console
from expcli.cli._help import file_and_folder_formats, storage_choices
from expcli.cli._read_options import completing
from expcli.formats.rows import Layout

__all__ = ["ConvertToOption", "StorageOption", "storage_spelled"]

ConvertToOption = Annotated[
    str | None,
    typer.Option(
        "--to",
        metavar="{format_choices}",
        autocompletion=completing(file_and_folder_formats),
        help="Output format, for `-` or a DST without a suffix (or the file a --layout "
        "writes); a suffix that names another format is refused (exit 2).",
    ),
]

StorageOption = Annotated[
    str | None,
    typer.Option(
        "--storage",
        metavar="{storage_choices}",
        autocompletion=completing(storage_choices),
        help="With --layout: the storage of a layout kept in a folder (minari: hdf5, parquet "
        "or arrow; lerobot: parquet, or video for its images).",
        show_default=False,
    ),
]


def storage_spelled(layout: Layout, to: str | None, storage: str | None) -> str | None:
    """What names ``layout``'s output (its storage or file format), noting an old ``--to``.

    Raises:
        ConfigError: As ``storage_or_format``.
    """
    from rich.markup import escape

    from expcli.errors import printable
    from expcli.formats.layouts import storage_or_format

    named, old = storage_or_format(layout, to, storage)
    if old:
        given = escape(printable(str(to)))
        err_console().print(
            f"[yellow]note:[/yellow] --to {given} picks the {layout} layout's storage as "
            f"--storage {given} now does (--to still works there)",
            soft_wrap=True,
            highlight=False,
        )
    return named
