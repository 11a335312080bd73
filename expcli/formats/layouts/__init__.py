"""Foreign layouts: other libraries' experience files, recognised by their structure.

* ``skrl``: skrl's memory exports (pt, npz, csv). Read by the pt, npz and csv readers
  (a file without expcli's metadata is a full skrl memory); written by ``skrl_layout``.
* ``tianshou``: ``ReplayBuffer.save_hdf5`` of a ReplayBuffer or a VectorReplayBuffer.
* ``minari``: a Minari dataset folder (``data/main_data.hdf5`` with ``episode_*`` groups
  and ``data/metadata.json``), or its ``main_data.hdf5`` alone; or in parquet or arrow
  storage (``data/<id>/part-0.parquet`` per episode: ``minari_arrow``).
* ``d4rl``: D4RL HDF5 files (``observations``, ``actions``, ``rewards``, ``terminals``,
  ``timeouts`` at the root).
* ``lerobot``: a LeRobot v3.0 dataset folder (``meta/info.json``, ``data/chunk-*/*.parquet``),
  which ``LeRobotDataset(repo_id, root=DIR)`` loads (``lerobot_layout``).

Every layout is read into expcli's schema: ``(T, N, *feature)`` tensors named
``observations``, ``next_observations``, ``actions``, ``rewards``, ``terminated``,
``truncated`` (plus ``infos/...`` and other extras), a circular state and metadata
``{"layout": NAME, NAME: {...}, ...}``. Episode-wise layouts (Minari, D4RL) are one env
column, ``N = 1``. Each module's docstring says how its layout maps, in particular where
``next_observations`` comes from when the layout keeps it implicitly.

Importing this package loads numpy only; h5py and torch are imported when used.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from expcli.errors import ConfigError
from expcli.formats.layouts.kinds import LOSSES_KEY, SEAMS_KEY, Layout, warn_losses

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset
    from expcli.formats.rows import Format
    from expcli.formats.table import read_foreign_hdf5

__all__ = [
    "LAYOUTS",
    "LOSSES_KEY",
    "SEAMS_KEY",
    "Layout",
    "layout_format",
    "minari_episode_mismatches",
    "minari_storage",
    "open_minari_folder",
    "read_foreign_hdf5",
    "read_minari_folder",
    "write_layout",
]

LAYOUTS: tuple[str, ...] = tuple(Layout)
"""Names accepted by ``write_layout`` (``expcli`` is expcli's own format)."""


def layout_format(
    layout: str | Layout, path: str | os.PathLike[str], format: str | None = None
) -> str:
    """The format a foreign layout writes to ``path`` (``minari``: a dataset folder).

    It is told by ``format``, else by the suffix of ``path``, else it is the layout's own
    (the first of its row's formats: skrl pt, tianshou and d4rl hdf5). A folder layout
    gives its name, or the storage ``format`` names (``minari``: hdf5, parquet, arrow).
    Checked before anything is read or written.

    Raises:
        ConfigError: An unknown layout, or a format or suffix the layout cannot write (skrl
            writes pt, npz or csv; tianshou and d4rl an HDF5 file; minari a folder), or a
            format that the suffix contradicts.
    """
    from expcli.formats.table import format_from_suffix, format_named, layout_named

    name, target = Layout.parse(layout, foreign=True, any_case=True), Path(path)
    named = format_from_suffix(target)
    chosen = format.lower().lstrip(".") if format is not None else named
    allowed = layout_named(name).formats
    if not allowed:  # a layout kept in a folder, in one of its storages
        storages = layout_named(name).storages
        if named is None and chosen in (None, name.value):
            return name.value
        if named is None and chosen in storages:
            return str(chosen)
        picks = f" (--to picks its storage: {', '.join(storages)})" if storages else ""
        raise ConfigError(
            f"{target}: the {name} layout writes a dataset folder (DIR/data/...), not a "
            f"{chosen} file; name a folder without a file suffix{picks}"
        )
    suffixes = " or ".join(_named_suffixes(format_named(f)) for f in allowed)
    if chosen is not None and chosen not in allowed:
        raise ConfigError(
            f"{target}: the {name} layout writes {', '.join(allowed)} files, not {chosen}; "
            f"name the file {suffixes}"
        )
    if format is not None and named is not None and named != chosen:
        raise ConfigError(
            f"{target.name} names {named} but --to says {chosen}; drop --to or name the "
            f"file {target.stem}{_named_suffixes(format_named(format)).split(' or ')[0]}"
        )
    return chosen or allowed[0]


def _named_suffixes(row: Format | None) -> str:
    """``.h5 or .hdf5``: a format's suffixes, less aliases that extend another (``.pth``)."""
    if row is None:
        return ""
    named = [s for s in row.suffixes if not any(s != o and s.startswith(o) for o in row.suffixes)]
    return " or ".join(named)


def minari_episode_mismatches(path: str | os.PathLike[str]) -> list[int] | None:
    """Ids of the Minari episodes whose observations are not one row longer than their actions.

    None when ``path`` is no Minari folder or file (see ``minari_layout``).

    Raises:
        FormatError: The episodes cannot be read: the file is damaged.
    """
    from expcli.formats.layouts import minari_layout

    return minari_layout.mismatched_episodes(Path(path))


def minari_storage(path: str | os.PathLike[str]) -> str | None:
    """The storage of a Minari dataset folder (``hdf5``, ``parquet``, ``arrow``), or None."""
    from expcli.formats.layouts import minari_layout

    return minari_layout.folder_storage(Path(path))


def read_minari_folder(path: str | os.PathLike[str]) -> Dataset:
    """Read a Minari dataset folder (hdf5, parquet or arrow storage) into one env column.

    Raises:
        FormatError: Not a Minari folder, another storage than hdf5, or a corrupt file.
        SchemaError: An episode's arrays disagree in length (observations must have one
            row more than actions) or episodes disagree in feature shapes.
    """
    from expcli.formats.layouts import minari_layout

    return minari_layout.read_folder(Path(path))


def open_minari_folder(path: str | os.PathLike[str]) -> tuple[Dataset, Callable[[], None]]:
    """Open a Minari dataset folder (any storage) as one env column left in its files.

    Rows are read a slice at a time; call the closer once done with them.

    Raises:
        FormatError, SchemaError: As ``read_minari_folder``.
    """
    from expcli.formats.layouts import minari_layout

    return minari_layout.open_folder(Path(path))


def write_layout(
    dataset: Dataset,
    path: str | os.PathLike[str],
    layout: str | Layout,
    *,
    overwrite: bool,
    format: str | None = None,
) -> Path:
    """Write a dataset in a layout of ``LAYOUTS``, atomically.

    ``d4rl`` and ``tianshou`` write one HDF5 file, ``minari`` a dataset folder
    (``path/data/...``), ``lerobot`` a LeRobot v3.0 folder (``path/meta``, ``path/data``),
    ``skrl`` a ``.pt`` file (``.npz`` or ``.csv`` by suffix) and
    ``expcli`` expcli's own format by suffix; another suffix is refused. What the layout
    cannot keep of the dataset (env columns, circular state, names, dtypes, metadata) is said
    in one ``UserWarning`` and listed in the written metadata (``LOSSES_KEY``) where the
    layout keeps metadata. ``format`` picks a
    folder layout's storage (``minari``: ``hdf5``, the default, ``parquet`` or ``arrow``;
    see ``minari_arrow``) or a file layout's format. Layouts with one
    row per transition (d4rl, tianshou with several env columns) lay the valid rows out env
    column by env column, oldest first.

    Returns:
        The path written.

    Raises:
        ConfigError: Unknown layout, a suffix the layout cannot write (see
            ``layout_format``), or a ``minari`` target that is a file or another folder.
        SchemaError: The dataset is inconsistent or lacks a tensor the layout needs.
        OutputExistsError: ``path`` exists and ``overwrite`` is false.
    """
    from expcli.formats.table import layout_named

    target = Path(path)
    name = Layout.parse(layout, any_case=True)
    row = layout_named(name)
    if not row.writes:  # expcli's own: the format's writer
        from expcli.formats.registry import write_dataset

        return write_dataset(dataset, target, overwrite=overwrite)
    chosen = layout_format(name, target, format)
    dataset.validate(target)
    losses = row.losses(dataset, chosen)
    if losses and row.keeps_metadata:
        dataset = dataclasses.replace(dataset, metadata={**dataset.metadata, LOSSES_KEY: losses})
    row.write(dataset, target, overwrite, chosen)
    warn_losses(target, name, losses, recorded=row.keeps_metadata)
    return target


def __getattr__(name: str) -> object:
    """``read_foreign_hdf5``: the table's, imported on first use (the table imports this package).

    It reads an open HDF5 file of a foreign layout, or returns None when none matches; the
    layouts of the table are tried in order.
    """
    if name == "read_foreign_hdf5":
        from expcli.formats.table import read_foreign_hdf5

        return read_foreign_hdf5
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
