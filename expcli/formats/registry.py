"""The dispatch of reads and writes: each asks the format table (``formats.table``).

Format modules are imported only when a file of their format is read or written, so that
``import expcli.formats`` never loads torch. Adding a format is one module and one row of
the table. The metadata codec that every format module shares is ``header``; telling a
format from a file's bytes is ``_sniffing`` (its tests), in the table's order; a library
error's gist is ``_error_summary``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from expcli.errors import ConfigError, FormatError, SchemaError, SourceNotFoundError
from expcli.formats._guards import check_source
from expcli.formats._manifest import has_manifest, is_folder_target
from expcli.formats._sniffing import SNIFF_BYTES, looks_like_text
from expcli.formats.authorship import Authorship
from expcli.formats.builtin.parquet_file import PARQUET_FILE
from expcli.formats.builtin.sharded_folder import ShardedFolder
from expcli.formats.dataset import Dataset, read_whole
from expcli.formats.layout_keys import LOSSES_KEY, warn_losses
from expcli.formats.parquet_sources import holds_parquet, is_pattern, table_files
from expcli.formats.rows import EXPCLI_LAYOUT, FileLayout, Format, Layout, WritePlan
from expcli.formats.table import (
    MINARI_FOLDER,
    OWN_FILE_FORMATS,
    SHARDED_FOLDER,
    compressing_formats,
    compressing_shard_formats,
    file_formats,
    format_from_suffix,
    format_named,
    formats_in_order,
    layout_named,
    layouts_in_order,
    shard_formats,
    sniff_format,
)
from expcli.spec import METADATA_KEY, FramesForm, ImagesForm

if TYPE_CHECKING:
    from expcli.formats.block_cache import BlockCache
    from expcli.formats.column_roles import ColumnRoles

__all__ = [
    "FORMATS",
    "LAYOUTS",
    "MINARI_FOLDER",
    "SHARDED_FOLDER",
    "detect_format",
    "format_from_suffix",
    "frames_form",
    "images_form",
    "layout_format",
    "storage_or_format",
    "open_lazy",
    "output_files",
    "output_format",
    "read_dataset",
    "source_format",
    "target_format",
    "write_dataset",
    "write_layout",
    "write_planned",
]


FORMATS: tuple[str, ...] = OWN_FILE_FORMATS
"""Names of expcli's own file formats (``table.file_formats()`` adds registered ones)."""


def _expected() -> str:
    return ", ".join(file_formats())


def _described() -> str:
    return ", ".join(f"{r.name} ({r.holds})" for r in formats_in_order() if not r.folder)


def detect_format(path: str | os.PathLike[str]) -> str:
    """The format of a file, told by its bytes first and by its suffix when they do not tell.

    Zip archives holding a ``data.pkl`` are ``pt`` (as is torch's legacy pickle format),
    zip archives of ``.npy`` members are ``npz``, the HDF5 signature is ``hdf5``, and
    printable text whose first line is a header of ``NAME.INDEX`` columns is ``csv``.

    Raises:
        FormatError: The file is empty, not a regular file (a named pipe, a device), or
            neither its bytes nor its suffix name a format.
        OSError: The file cannot be opened.
    """
    check_source(path)
    if os.path.isdir(path):
        return source_format(path)  # the one place that tells folders apart
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
    if not head:
        raise FormatError(f"file is empty; expected a dataset ({_expected()})", path=path)
    found = sniff_format(Path(path), head) or format_from_suffix(path)
    if found is None:
        what = (
            "text that is not a CSV dataset (its first line is not a header of NAME.INDEX columns)"
            if looks_like_text(head)
            else "unrecognised content"
        )
        raise FormatError(f"{what}; expected a dataset: {_described()}", path=path)
    return found


def source_format(path: str | os.PathLike[str], format: str | None = None) -> str:
    """The format of a dataset to read.

    ``SHARDED_FOLDER`` for a sharded dataset folder (one holding a ``manifest.json``, which
    reading it then checks), the layout of another folder (``lerobot`` when it claims it,
    else ``MINARI_FOLDER``), ``parquet`` for a folder that no layout marks and that holds
    Parquet files, or for a glob (``parquet_sources``), else ``format`` (checked)
    or what ``detect_format`` tells.
    "File or folder?" is decided here only.

    Raises:
        SourceNotFoundError: No such file or folder.
        FormatError: Not a regular file or folder, an unknown ``format``, or a file whose
            format cannot be told.
        ConfigError: A glob that matches no Parquet file.
        OSError: The file cannot be opened.
    """
    check_source(path)
    if is_pattern(path):
        table_files(path)  # says when it matches no Parquet file
        return PARQUET_FILE.name
    if not os.path.exists(path):
        raise SourceNotFoundError(path)
    if os.path.isdir(path):
        if has_manifest(path):
            return SHARDED_FOLDER
        if _parquet_folder(Path(path)):
            return PARQUET_FILE.name
        return _folder_layout(Path(path)).name
    return _normalise(format, path) if format is not None else detect_format(path)


def _parquet_folder(path: Path) -> bool:
    """Whether a folder is read as the Parquet files it holds: the last resort.

    Not when a layout claims it or bears its mark (LeRobot's ``meta/info.json``, Minari's
    ``metadata.json``, sound or not): that layout reads it, or says what is wrong.
    """
    if any(layout.marks(path) for layout in layouts_in_order()):
        return False
    return holds_parquet(path)


def read_dataset(
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    num_envs: int | None = None,
    mapping: ColumnRoles | None = None,
) -> Dataset:
    """Read a dataset file of any supported format.

    Args:
        path: File to read, or a Minari dataset folder.
        format: A format of the table; by default the file's bytes tell, then its suffix.
            Ignored for a folder.
        num_envs: Number of env columns of a file that does not record it (a CSV without
            sidecar, such as skrl's export; default 1). Files that record it ignore it.
        mapping: The roles given columns of a table (Parquet, Arrow IPC) and what its lone
            ``done`` means (``--columns``, ``--done-means``); other formats refuse one.

    Raises:
        SourceNotFoundError: No such file or folder (a ``FormatError`` and a
            ``FileNotFoundError``).
        FormatError: Unknown format, or an empty, corrupt, truncated or unsafe file, or a
            folder that is not a Minari dataset.
        SchemaError: The tensors disagree with each other or with the metadata.
        ConfigError: ``num_envs`` is less than 1, the tensors to hold (those not mapped
            from the file) exceed the memory available: each format's reader says so
            before reading them (``_guards.check_read_whole``), or ``mapping`` is given for
            a file that is no table or names a column it lacks.
        OSError: The file cannot be opened.
    """
    if num_envs is not None and num_envs < 1:
        raise ConfigError(f"num_envs must be at least 1, got {num_envs}")
    fmt = source_format(path, format)
    if mapping:
        dataset = read_whole(_mapped_row(fmt, path).open_mapped(Path(path), mapping), path)
    elif _is_folder_layout(fmt):
        dataset = _folder_layout(Path(path)).read_folder(Path(path))  # or says why it is none
    else:
        dataset = _row(fmt).read(Path(path), num_envs=num_envs)
    dataset.validate(path)
    return dataset


def write_dataset(
    dataset: Dataset,
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    overwrite: bool = True,
    compression: str | None = None,
    shard_format: str | None = None,
    frames: FramesForm | str = FramesForm.ONCE,
) -> Path:
    """Write a dataset atomically: the target is either the complete new file or untouched.

    Args:
        dataset: What to write; validated first.
        path: Target file (a CSV also gets a ``PATH.meta.json`` sidecar).
        format: A format of the table; by default the suffix of ``path`` tells.
        overwrite: Whether an existing file may be replaced.
        compression: ``"gzip"`` or ``"lzf"`` for a format that compresses (HDF5); None or
            ``"none"`` (the default) for no compression, the only choice for the others.
            A sharded folder of Parquet shards takes Parquet's.
        shard_format: A sharded folder's shards: a format of the table that can be a shard
            (``npz``, the default, or ``parquet``).
        frames: ``once`` (the default) stores each next-observation cell that equals the
            next row's observation only there (``formats.frames``), in a format that can
            (pt, npz, HDF5, Parquet, folders; CSV stores every cell); ``full`` stores every
            cell.

    Returns:
        The path written.

    Raises:
        FormatError: The format is unknown or cannot be told from the suffix.
        SchemaError: The dataset is inconsistent, uses a reserved name or its metadata is
            not JSON-serialisable.
        OutputExistsError: The file exists and ``overwrite`` is false.
        ConfigError: An unknown compression, or one the format cannot take, or an unknown
            ``frames``.
        OSError: The folder does not exist or cannot be written.
    """
    form = frames_form(frames)
    target = Path(path)
    if format is not None:
        fmt = _normalise(format, path)
        output_format(target, fmt)  # a suffix that names another format: refused
    else:
        found = target_format(target)
        if found is None:
            raise FormatError(
                f"cannot tell the format from the suffix {target.suffix!r}; "
                f"pass a format, one of {_expected()}",
                path=path,
            )
        fmt = found
    plan = WritePlan(
        target,
        fmt,
        compression=compression,
        shard_format=shard_format,
        frames=form,
        overwrite=overwrite,
    )
    return write_planned(dataset, plan)


def write_planned(dataset: Dataset, plan: WritePlan) -> Path:
    """Write a dataset as ``plan`` says, atomically, once the plan is checked.

    The one place a write's options are checked against its format: the compression it
    takes (a sharded folder: its shard format's), the shard format. A foreign layout is
    written by its layout object (``write_layout``), expcli's by the format's object.

    Returns:
        The path written.

    Raises:
        ConfigError: A compression the format cannot take, a shard format for a target that
            is no folder or a format that cannot be a shard.
        FormatError, SchemaError, OutputExistsError, OSError: As ``write_dataset``.
    """
    if plan.layout is not Layout.EXPCLI:
        return _write_in_layout(dataset, plan)
    EXPCLI_LAYOUT.refuse_target(plan)  # an authorship: kept by no expcli format
    row, plan = _checked(plan)
    dataset.validate(plan.target)
    if METADATA_KEY in dataset.tensors:
        raise SchemaError(
            "this name is reserved for the metadata", path=plan.target, key=METADATA_KEY
        )
    row.write(dataset, plan)
    return plan.target


def _checked(plan: WritePlan) -> tuple[Format, WritePlan]:
    """The format of ``plan`` and the plan as its writer takes it (no compression it lacks).

    Raises:
        ConfigError: A format expcli only reads, or the compression or the shard format
            does not fit (``write_planned``).
    """
    row, compression = _row(plan.format), plan.compression
    row.refuse_write(plan.target)
    if plan.shard_format is not None:
        compression = _check_shards(plan.target, row, plan.shard_format, compression)
    else:
        compression = row.checked_compression(compression, others=compressing_formats)
    return row, dataclasses.replace(plan, compression=compression)


def frames_form(frames: FramesForm | str) -> FramesForm:
    """``frames`` as a ``FramesForm``.

    Raises:
        ConfigError: It is none of them.
    """
    return _form(frames, FramesForm, "frames")


def images_form(images: ImagesForm | str) -> ImagesForm:
    """``images`` as an ``ImagesForm``.

    Raises:
        ConfigError: It is none of them.
    """
    return _form(images, ImagesForm, "images")


_Form = TypeVar("_Form", bound=StrEnum)


def _form(value: object, choices: type[_Form], what: str) -> _Form:
    """``value`` (any case) as a member of ``choices``.

    Raises:
        ConfigError: It is none of them, naming ``what`` and the spellings there are.
    """
    try:
        return choices(str(value).lower())
    except ValueError:
        raise ConfigError(
            f"unknown {what} {value!r}; expected one of {', '.join(f.value for f in choices)}"
        ) from None


def target_format(target: str | os.PathLike[str]) -> str | None:
    """The format an output ``target`` names: its suffix's, or a sharded folder; or None.

    A target without a suffix, or an existing sharded folder, is a sharded folder.
    """
    return format_from_suffix(target) or (SHARDED_FOLDER if is_folder_target(target) else None)


def output_format(target: str | os.PathLike[str], to: str | None) -> str | None:
    """The format to write ``target`` in: ``to`` where given, else what its name tells.

    A target whose suffix names a format never gets another one under that name: ``to``
    may only name a suffix-less target's format (a file or a folder), or agree with the
    suffix. None: nothing tells.

    Raises:
        ConfigError: The suffix names another format than ``to``.
    """
    if to is None:
        return target_format(target)
    row = format_named(to)
    named = format_from_suffix(target)
    if row is None or named is None or named == row.name:
        return to if row is None else row.name
    path = Path(target)
    rename = (
        f"name the file {path.stem}{row.suffixes[0]}"
        if row.suffixes
        else "name a folder without a suffix"
    )
    raise ConfigError(f"{path.name} names {named} but --to says {row.name}; drop --to or {rename}")


def output_files(target: str | os.PathLike[str], format: str) -> tuple[Path, ...]:
    """The files that writing ``format`` to ``target`` makes.

    The target, and a CSV's metadata sidecar (``PATH.meta.json``).
    """
    path = Path(target)
    row = format_named(format)
    return (path,) if row is None else (path, *row.companions(path))


def open_lazy(
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    num_envs: int | None = None,
    cache: BlockCache | None = None,
    mapping: ColumnRoles | None = None,
) -> tuple[Dataset, Callable[[], None]]:
    """Open a dataset whose tensors stay on disk where the format allows.

    npz members, HDF5 files, Minari folders, CSV rows: read by slices of rows; others are
    read whole.

    Args:
        path: File to read, or a Minari dataset folder.
        format: As ``read_dataset``.
        num_envs: As ``read_dataset``: for files that do not record it (CSV, D4RL).
        cache: Where compressed formats (HDF5, Parquet, folders of Parquet shards) keep
            the blocks they decode, for draws at random; the others do not take it.
        mapping: As ``read_dataset``.

    Returns:
        The dataset, and a function to call once done with it.

    Raises:
        FormatError, SchemaError, ConfigError: As ``read_dataset``.
    """
    if num_envs is not None and num_envs < 1:
        raise ConfigError(f"num_envs must be at least 1, got {num_envs}")
    fmt = source_format(path, format)
    if mapping:
        dataset, close = _mapped_row(fmt, path).open_mapped(Path(path), mapping, cache=cache)
    elif _is_folder_layout(fmt):
        dataset, close = _folder_layout(Path(path)).open_folder(Path(path))
    else:
        dataset, close = _row(fmt).open_lazy(Path(path), num_envs=num_envs, cache=cache)
    try:
        dataset.validate(path)
    except BaseException:
        close()
        raise
    return dataset, close


def _normalise(format: str, path: str | os.PathLike[str]) -> str:
    row = format_named(format)
    if row is None:
        raise FormatError(f"unknown format {format!r}; expected one of {_expected()}", path=path)
    return row.name


def _row(fmt: str) -> Format:
    row = format_named(fmt)
    if row is None:
        raise FormatError(f"unknown format {fmt!r}; expected one of {_expected()}")
    return row


def _mapped_row(fmt: str, path: str | os.PathLike[str]) -> Format:
    """The format of a table that a column mapping reads (Parquet, Arrow IPC).

    Raises:
        ConfigError: ``fmt`` names no format of tables (a folder, npz, ...), naming those
            that are.
    """
    row = None if _is_folder_layout(fmt) else format_named(fmt)
    if row is None or not row.reads_tables:
        tables = ", ".join(r.title or r.name for r in formats_in_order() if r.reads_tables)
        what = "a folder" if row is None else row.holds
        raise ConfigError(
            f"--columns and --done-means read tables ({tables}) by their columns; this is {what}",
            path=path,
        )
    return row


def _folder_layout(path: Path) -> FileLayout:
    """How a folder (``MINARI_FOLDER``) is read: the first layout claiming it, else Minari's."""
    claimed = [layout for layout in layouts_in_order() if layout.claims(path)]
    layout = claimed[0] if claimed else layout_named(Layout(MINARI_FOLDER))
    if not layout.reads_folders:
        raise FormatError(f"the {layout.name} layout reads no folders")
    return layout


def _is_folder_layout(fmt: str) -> bool:
    """Whether ``source_format`` named a layout kept in folders (Minari, LeRobot)."""
    return any(layout.reads_folders and layout.name.value == fmt for layout in layouts_in_order())


def _check_shards(
    target: Path, row: Format, shard_format: str, compression: str | None
) -> str | None:
    """The compression of a sharded folder's shards, as they take it.

    Raises:
        ConfigError: The target is not a folder, or ``shard_format`` cannot be a shard, or
            does not take ``compression``.
    """
    shard = format_named(shard_format)
    if not isinstance(row, ShardedFolder):
        raise ConfigError(
            f"--shard-format applies to a sharded folder (a target without suffix), not {target}"
        )
    if shard is None or not shard.shards:
        kinds = ", ".join(shard_formats())
        raise ConfigError(f"--shard-format takes {kinds}; got {shard_format!r}")
    return shard.checked_compression(compression, what="shards", others=compressing_shard_formats)


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
        picks = f" (--storage picks its storage: {', '.join(storages)})" if storages else ""
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


def storage_or_format(
    layout: str | Layout, to: str | None, storage: str | None
) -> tuple[str | None, bool]:
    """What names the output of ``layout``: ``layout_format``'s ``format``, from two options.

    ``to`` names an output format (expcli's, or the file a layout such as skrl writes);
    ``storage`` the storage of a layout kept in a folder (minari: hdf5, parquet, arrow;
    lerobot: parquet, video). ``to`` naming a folder layout's storage is its old spelling,
    still taken: the second value says so, for the command line's note.

    Raises:
        ConfigError: ``storage`` for expcli's own layout or a layout that writes a file, or
            both options for one folder layout.
    """
    name = Layout.parse(layout, any_case=True) if isinstance(layout, str) else layout
    in_folder = name is not Layout.EXPCLI and not layout_named(name).formats
    if not in_folder:
        if storage is not None:
            writes = "expcli writes" if name is Layout.EXPCLI else f"the {name} layout writes"
            raise ConfigError(
                f"--storage picks the storage of a layout kept in a folder (minari, lerobot); "
                f"{writes} a file: name its format with --to"
            )
        return to, False
    if to is not None and storage is not None:
        raise ConfigError(
            f"--to and --storage both given for the {name} layout; give its storage once, "
            "with --storage"
        )
    return (storage, False) if storage is not None else (to, to is not None)


def _named_suffixes(row: Format | None) -> str:
    """``.h5 or .hdf5``: a format's suffixes, less aliases that extend another (``.pth``)."""
    if row is None:
        return ""
    named = [s for s in row.suffixes if not any(s != o and s.startswith(o) for o in row.suffixes)]
    return " or ".join(named)


def write_layout(
    dataset: Dataset,
    path: str | os.PathLike[str],
    layout: str | Layout,
    *,
    overwrite: bool,
    format: str | None = None,
    authorship: Authorship | None = None,
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
    see ``minari.arrow``) or a file layout's format. Layouts with one
    row per transition (d4rl, tianshou with several env columns) lay the valid rows out env
    column by env column, oldest first. ``authorship``: who made the data and with what,
    for a layout that keeps it (``minari``).

    Returns:
        The path written.

    Raises:
        ConfigError: Unknown layout, a suffix the layout cannot write (see
            ``layout_format``), a ``minari`` target that is a file or another folder or
            whose name is no dataset id (``NAME-vN``), or an ``authorship`` the layout
            does not keep.
        SchemaError: The dataset is inconsistent or lacks a tensor the layout needs.
        OutputExistsError: ``path`` exists and ``overwrite`` is false.
    """
    target = Path(path)
    name = Layout.parse(layout, any_case=True)
    row = layout_named(name)
    if not row.writes:  # expcli's own: the format's writer
        row.refuse_target(WritePlan(target, "", authorship=authorship))
        return write_dataset(dataset, target, overwrite=overwrite)
    chosen = layout_format(name, target, format)
    plan = WritePlan(target, chosen, name, overwrite=overwrite, authorship=authorship)
    return _write_in_layout(dataset, plan)


def _write_in_layout(dataset: Dataset, plan: WritePlan) -> Path:
    """Write a dataset in the foreign layout ``plan`` names, its storage ``plan.format``."""
    target, row = plan.target, layout_named(plan.layout)
    row.refuse_target(plan)
    dataset.validate(target)
    losses = row.losses(dataset, plan.format)
    if losses and row.keeps_metadata:
        dataset = dataclasses.replace(dataset, metadata={**dataset.metadata, LOSSES_KEY: losses})
    row.write(dataset, plan)
    warn_losses(target, plan.layout, losses, recorded=row.keeps_metadata)
    return target
