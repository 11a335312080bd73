"""Foreign layouts: other libraries' experience files, recognised by their structure.

* ``skrl``: skrl's memory exports (pt, npz, csv). Read by the pt, npz and csv readers
  (a file without expcli's metadata is a full skrl memory); written by ``skrl_layout``.
* ``tianshou``: ``ReplayBuffer.save_hdf5`` of a ReplayBuffer or a VectorReplayBuffer.
* ``minari``: a Minari dataset folder (``data/main_data.hdf5`` with ``episode_*`` groups
  and ``data/metadata.json``), or its ``main_data.hdf5`` alone.
* ``d4rl``: D4RL HDF5 files (``observations``, ``actions``, ``rewards``, ``terminals``,
  ``timeouts`` at the root).

Every layout is read into expcli's schema: ``(T, N, *feature)`` tensors named
``observations``, ``next_observations``, ``actions``, ``rewards``, ``terminated``,
``truncated`` (plus ``infos/...`` and other extras), a circular state and metadata
``{"layout": NAME, NAME: {...}, ...}``. Episode-wise layouts (Minari, D4RL) are one env
column, ``N = 1``. Each module's docstring says how its layout maps, in particular where
``next_observations`` comes from when the layout keeps it implicitly.

Importing this package loads numpy only; h5py and torch are imported when used.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from expcli.errors import ConfigError
from expcli.formats.layouts._episodes import SEAMS_KEY

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset

__all__ = [
    "LAYOUTS",
    "SEAMS_KEY",
    "is_minari_folder",
    "minari_episode_mismatches",
    "layout_format",
    "open_minari_folder",
    "read_foreign_hdf5",
    "read_minari_folder",
    "write_layout",
]

LAYOUTS: tuple[str, ...] = ("expcli", "skrl", "tianshou", "minari", "d4rl")
"""Names accepted by ``write_layout`` (``expcli`` is expcli's own format)."""


_WRITES = {  # the formats each foreign layout writes, its default first
    "skrl": ("pt", "npz", "csv"),
    "tianshou": ("hdf5",),
    "d4rl": ("hdf5",),
}


def layout_format(layout: str, path: str | os.PathLike[str], format: str | None = None) -> str:
    """The format a foreign layout writes to ``path`` (``minari``: a dataset folder).

    It is told by ``format``, else by the suffix of ``path``, else it is the layout's own
    (skrl: pt; tianshou and d4rl: hdf5). Checked before anything is read or written.

    Raises:
        ConfigError: An unknown layout, or a format or suffix the layout cannot write (skrl
            writes pt, npz or csv; tianshou and d4rl an HDF5 file; minari a folder), or a
            format that the suffix contradicts.
    """
    from expcli.formats.registry import format_from_suffix

    name, target = layout.lower(), Path(path)
    if name not in LAYOUTS or name == "expcli":
        raise ConfigError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS[1:])}")
    named = format_from_suffix(target)
    chosen = format.lower().lstrip(".") if format is not None else named
    if name == "minari":
        if chosen is not None:
            raise ConfigError(
                f"{target}: the minari layout writes a dataset folder (DIR/data/...), not a "
                f"{chosen} file; name a folder without a file suffix"
            )
        return "minari"
    allowed = _WRITES[name]
    suffixes = " or ".join(f".{f}" if f != "hdf5" else ".h5 or .hdf5" for f in allowed)
    if chosen is not None and chosen not in allowed:
        raise ConfigError(
            f"{target}: the {name} layout writes {', '.join(allowed)} files, not {chosen}; "
            f"name the file {suffixes}"
        )
    if format is not None and named is not None and named != chosen:
        raise ConfigError(
            f"{target}: the suffix names a {named} file but the format asked for is {chosen}"
        )
    return chosen or allowed[0]


def read_foreign_hdf5(
    h5: Any, path: Path, num_envs: int | None = None, *, lazy: bool = False
) -> Dataset | None:
    """Read an open HDF5 file of a foreign layout, or return None when none matches.

    Tried in order: tianshou (a ``_meta`` group and a ``maxsize`` attribute), Minari
    (only ``episode_<id>`` groups at the root), D4RL (``observations``, ``actions`` and
    ``rewards`` datasets at the root).

    Args:
        h5: An ``h5py.File`` open for reading, without expcli's root attribute.
        path: The file's path, for messages (and a Minari ``metadata.json`` beside it).
        num_envs: For D4RL files only: split the rows into this many equal env columns,
            env by env (as ``write_layout`` lays them out); default one column.
        lazy: Leave the rows of D4RL, tianshou and Minari files in the file as ``LazyRows``,
            read a slice at a time; ``h5`` must then stay open while they are read.

    Raises:
        FormatError: The file is of a recognised layout but malformed, or holds data that
            would have to be unpickled or decoded.
        SchemaError: Its arrays disagree in length or shape.
        ConfigError: ``num_envs`` does not divide a D4RL file's rows.
    """
    from expcli.formats.layouts import d4rl_layout, minari_layout, tianshou_layout

    if tianshou_layout.is_tianshou(h5):
        return tianshou_layout.read(h5, path, lazy=lazy)
    if minari_layout.is_minari_file(h5, path):
        return minari_layout.read(h5, path, lazy=lazy)
    if d4rl_layout.is_d4rl(h5):
        return d4rl_layout.read(h5, path, num_envs, lazy=lazy)
    return None


def is_minari_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a Minari dataset folder, or the ``data`` folder inside one."""
    from expcli.formats.layouts import minari_layout

    return minari_layout.is_minari_folder(path)


def minari_episode_mismatches(path: str | os.PathLike[str]) -> list[int] | None:
    """Ids of the Minari episodes whose observations are not one row longer than their actions.

    None when ``path`` is no Minari folder or file (see ``minari_layout``).

    Raises:
        FormatError: The episodes cannot be read: the file is damaged.
    """
    from expcli.formats.layouts import minari_layout

    return minari_layout.mismatched_episodes(Path(path))


def read_minari_folder(path: str | os.PathLike[str]) -> Dataset:
    """Read a Minari dataset folder (hdf5 storage) into one env column.

    Raises:
        FormatError: Not a Minari folder, another storage than hdf5, or a corrupt file.
        SchemaError: An episode's arrays disagree in length (observations must have one
            row more than actions) or episodes disagree in feature shapes.
    """
    from expcli.formats.layouts import minari_layout

    return minari_layout.read_folder(Path(path))


def open_minari_folder(path: str | os.PathLike[str]) -> tuple[Dataset, Callable[[], None]]:
    """Open a Minari dataset folder (hdf5 storage) as one env column left in the file.

    Rows are read a slice at a time; call the closer once done with them.

    Raises:
        FormatError, SchemaError: As ``read_minari_folder``.
    """
    from expcli.formats.layouts import minari_layout

    return minari_layout.open_folder(Path(path))


def write_layout(
    dataset: Dataset, path: str | os.PathLike[str], layout: str, *, overwrite: bool
) -> Path:
    """Write a dataset in a layout of ``LAYOUTS``, atomically.

    ``d4rl`` and ``tianshou`` write one HDF5 file, ``minari`` a dataset folder
    (``path/data/...``), ``skrl`` a ``.pt`` file (``.npz`` or ``.csv`` by suffix) and
    ``expcli`` expcli's own format by suffix; another suffix is refused. Layouts with one
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
    target = Path(path)
    name = layout.lower()
    if name not in LAYOUTS:
        raise ConfigError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    if name == "expcli":
        from expcli.formats.registry import write_dataset

        return write_dataset(dataset, target, overwrite=overwrite)
    layout_format(name, target)
    dataset.validate(target)
    if name == "skrl":
        from expcli.formats.layouts import skrl_layout

        skrl_layout.write(dataset, target, overwrite=overwrite)
    elif name == "tianshou":
        from expcli.formats.layouts import tianshou_layout

        tianshou_layout.write(dataset, target, overwrite=overwrite)
    elif name == "minari":
        from expcli.formats.layouts import minari_layout

        minari_layout.write(dataset, target, overwrite=overwrite)
    else:
        from expcli.formats.layouts import d4rl_layout

        d4rl_layout.write(dataset, target, overwrite=overwrite)
    return target
