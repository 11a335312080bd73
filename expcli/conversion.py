"""load, save and convert: datasets between files, formats and layouts.

Every write lands atomically (``formats.checked_write``): the data goes to a temporary file
beside the target, is optionally read back and checked, and only then renamed into place,
so a failed or interrupted conversion leaves no output (or, with ``overwrite``, the old
file intact).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

import numpy as np

from expcli.errors import ConfigError
from expcli.formats import open_lazy, read_dataset, source_format
from expcli.formats.authorship import Authorship
from expcli.formats.checked_write import check_target, checksums, write_checked
from expcli.formats.column_roles import ColumnRoles, DoneMeans, column_roles
from expcli.formats.dataset import Dataset
from expcli.formats.dataset_card import checked_license
from expcli.formats.layouts import LAYOUTS, Layout
from expcli.formats.layouts.lerobot.settings import LeRobotSettings
from expcli.formats.lazy import LazyRows
from expcli.formats.parquet_sources import source_size
from expcli.formats.registry import frames_form, images_form, output_format
from expcli.formats.rows import WritePlan
from expcli.formats.table import format_named, stream_formats, suffix_help
from expcli.spec import COMPRESSIONS, FramesForm, ImagesForm

__all__ = [
    "COMPRESSIONS",
    "LAYOUTS",
    "STREAM_FORMATS",
    "ConvertResult",
    "Progress",
    "convert",
    "convert_planned",
    "convert_to_stream",
    "load",
    "reporting_reads",
    "save",
]

STREAM_FORMATS: tuple[str, ...] = stream_formats(installed=False)
"""expcli's formats that ``convert_to_stream`` writes: those written front to back, never
seeking (the table's rows with ``streaming``; ``table.stream_formats()`` adds registered ones)."""

Progress = Callable[[str, float], None]
"""Called with a phase ("read", "write", "verify") and the fraction done (0 to 1)."""


@dataclass(frozen=True)
class ConvertResult:
    """What a conversion did, for the one-line summary."""

    src: Path
    dst: Path
    src_format: str
    dst_format: str
    layout: Layout
    tensors: int
    transitions: int
    bytes_read: int
    bytes_written: int
    seconds: float
    verified: bool


def load(
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    num_envs: int | None = None,
    columns: ColumnRoles | Mapping[str, str] | str | None = None,
    done_means: DoneMeans | str | None = None,
) -> Dataset:
    """Read any dataset file expcli knows (foreign layouts included) as a ``Dataset``.

    ``num_envs``: env columns of a file that does not record them: a CSV without sidecar
    (skrl's export; rows ``t * num_envs + env``) or a D4RL file (equal blocks of rows, env by
    env). Default 1. Files that record it ignore it.

    ``columns``: for a table (Parquet, Arrow IPC), role -> the column that plays it
    (``{"observations": "obs_vec", "observations/image": "cam"}``, or the text of
    ``--columns``: ``"observations=obs_vec,rewards=r"``), where its names are no library's
    expcli recognises; the roles not named are still recognised by name. ``done_means``:
    ``"terminated"`` (the default) or ``"truncated"``, what a ``done`` column without the
    split stands for.

    A folder is read as a Minari dataset (``formats.read_dataset`` decides, for every
    caller).

    The tensors are held in memory, except those mapped from the file (a ``.pt`` file,
    stored ``.npz`` members). For data larger than memory, ``expcli.formats.open_lazy``
    reads by slices of rows and ``ReplayBuffer(path)`` draws batches.

    Raises:
        FormatError: No such file or folder; an unknown, corrupt, truncated or unsafe file.
        SchemaError: Tensors that disagree with each other or with the metadata.
        ConfigError: What would be held exceeds the memory available; said before any of
            it is read. Or ``columns`` names an unknown role, a role twice or a column the
            table lacks or that cannot be a tensor, or is given for a file that is no table.
    """
    mapping = column_roles(columns, done_means)
    return read_dataset(path, format, num_envs=num_envs, mapping=mapping)


def save(
    data: Any,
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    overwrite: bool = True,
    compression: str | None = None,
    layout: str | Layout = Layout.EXPCLI,
    verify: bool = False,
    frames: FramesForm | str = FramesForm.ONCE,
    authorship: Authorship | None = None,
    license: str | None = None,
    images: ImagesForm | str = ImagesForm.PNG,
) -> Path:
    """Write a ``Dataset`` or a ``Memory`` (anything with ``to_dataset()``) atomically.

    Args:
        data: What to write.
        path: Target file; its suffix names the format unless ``format`` does.
        format: A format of the table (``formats.table``): pt, npz, csv, hdf5, ...
        overwrite: Replace an existing file.
        compression: none, gzip or lzf (for a format that compresses: HDF5).
        layout: expcli's own schema, or a foreign layout for other libraries to read.
        verify: Read the written file back and compare every tensor before renaming it
            into place.
        frames: ``once`` stores each next observation equal to the next row's observation
            once (pt, npz, HDF5, Parquet and folders: ``formats.frames``); ``full`` stores
            every one.
        authorship: Author, author email, algorithm name and code permalink, for a layout
            that keeps them (``minari``).
        license: The license a folder's dataset card states (``formats.dataset_card``:
            Parquet shards, LeRobot and Minari folders); None: the one a collect run
            recorded, else ``other``.
        images: How Parquet stores image-like uint8 frames: ``png`` (HF ``Image`` cells,
            which HF ``datasets`` reads as images and arrays) or ``raw`` (their bytes,
            faster to write, and to sample from a file the block cache holds).

    Raises:
        ConfigError: An unknown layout or compression, or one the format cannot take; an
            ``authorship`` the layout does not keep; a Minari folder not named as its id; a
            ``license`` that is no license identifier.
        OutputExistsError: The target exists and ``overwrite`` is false.
        FormatError, SchemaError: The data cannot be written in that format.
    """
    dataset = data.to_dataset() if hasattr(data, "to_dataset") else data
    if not isinstance(dataset, Dataset):
        raise ConfigError(f"expected a Dataset or a Memory, got {type(data).__name__}")
    target = Path(path)
    layout = _check_options(layout, compression)
    form = frames_form(frames)
    fmt = _target_format(target, format, layout, None)
    plan = WritePlan(
        target,
        fmt,
        layout=layout,
        compression=compression,
        frames=form,
        overwrite=overwrite,
        authorship=authorship,
        license=_license(license),
        images=images_form(images),
    )
    check_target(plan)
    write_checked(dataset, plan, checksums(dataset) if verify else None)
    return target


def convert(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    to: str | None = None,
    storage: str | None = None,
    compression: str | None = None,
    layout: str | Layout = Layout.EXPCLI,
    overwrite: bool = True,
    verify: bool = False,
    progress: Progress | None = None,
    num_envs: int | None = None,
    shard_format: str | None = None,
    frames: FramesForm | str = FramesForm.ONCE,
    columns: ColumnRoles | Mapping[str, str] | str | None = None,
    done_means: DoneMeans | str | None = None,
    authorship: Authorship | None = None,
    license: str | None = None,
    lerobot: LeRobotSettings | None = None,
    images: ImagesForm | str = ImagesForm.PNG,
) -> ConvertResult:
    """Convert a dataset file to another format or layout, losslessly.

    ``to``: the output format where ``dst``'s suffix does not say it (or a layout's file
    format: skrl's pt, npz or csv). ``storage``: the storage of a layout kept in a folder
    (minari: hdf5, parquet, arrow; lerobot: parquet, video); ``to`` is still taken for it.
    ``num_envs``: env columns of a source that does not record them (a CSV without
    sidecar, a D4RL file), as ``load`` takes it. ``shard_format``: a sharded folder
    target's shards (``npz``, the default, or ``parquet``). ``frames``: as ``save`` takes it.
    ``columns``, ``done_means``: how a table source is read, as ``load`` takes them.
    ``authorship``, ``license``: as ``save`` takes them (a Minari target's author,
    algorithm, ...; the license of a folder's dataset card).
    ``lerobot``: the fps, task, robot type and next observations of a ``lerobot`` layout
    (``with_lerobot_settings``); given for another layout, refused.
    ``images``: as ``save`` takes it (a Parquet target's image-like frames).

    ``overwrite`` defaults to True, as for ``save`` (and ``np.save``, ``torch.save``): the
    Python API replaces an existing target, atomically, unless told ``overwrite=False``.
    The command line refuses unless given ``--overwrite``.

    Raises:
        ConfigError: An unknown format, layout or compression.
        OutputExistsError: ``dst`` exists and ``overwrite`` is false.
        FormatError, SchemaError: The source cannot be read or the target not written.
    """
    target = Path(dst)
    layout = _check_options(layout, compression)
    form = frames_form(frames)
    fmt = _target_format(target, to, layout, storage)
    plan = WritePlan(
        target,
        fmt,
        layout=layout,
        compression=compression,
        shard_format=shard_format,
        frames=form,
        overwrite=overwrite,
        authorship=authorship,
        license=_license(license),
        images=images_form(images),
    )
    mapping = column_roles(columns, done_means)
    if lerobot is not None and layout is not Layout.LEROBOT:
        raise ConfigError(
            "--fps, --task, --robot-type and --next-observations are for --layout lerobot"
        )
    return convert_planned(
        src,
        plan,
        verify=verify,
        progress=progress,
        num_envs=num_envs,
        mapping=mapping,
        lerobot=lerobot,
    )


def convert_planned(
    src: str | os.PathLike[str],
    plan: WritePlan,
    *,
    verify: bool = False,
    progress: Progress | None = None,
    num_envs: int | None = None,
    mapping: ColumnRoles | None = None,
    lerobot: LeRobotSettings | None = None,
) -> ConvertResult:
    """Convert a dataset file as ``plan`` says (``convert``, its options made one plan).

    ``mapping``: how a table source is read (``column_roles`` of ``convert``'s options).
    ``lerobot``: as ``convert`` takes it (a ``lerobot`` layout's settings).

    Raises:
        As ``convert``.
    """
    started = time.perf_counter()
    source, target, layout = Path(src), plan.target, plan.layout
    check_target(plan)
    if source.resolve() == target.resolve():
        raise ConfigError(f"source and destination are the same file: {source}")
    report = progress or (lambda phase, done: None)
    report("read", 0.0)
    dataset, src_format, close = _open_source(source, num_envs, mapping)
    try:
        report("read", 1.0)
        sums = checksums(dataset) if verify else None
        if layout is Layout.LEROBOT:
            dataset = with_lerobot_settings(dataset, lerobot or LeRobotSettings())
        report("write", 0.0)
        if progress is not None and layout is Layout.EXPCLI:
            dataset = reporting_reads(dataset, lambda done: report("write", done))
        write_checked(dataset, plan, sums)
        report("write", 1.0)
    finally:
        close()
    return ConvertResult(
        source,
        target,
        src_format,
        plan.format,
        layout,
        len(dataset.tensors),
        len(dataset),
        _size(source),
        _size(target),
        time.perf_counter() - started,
        verify and layout is Layout.EXPCLI,
    )


def with_lerobot_settings(dataset: Dataset, settings: LeRobotSettings) -> Dataset:
    """``dataset`` with what a LeRobot folder of it needs in its metadata.

    The settings given go in its ``lerobot`` section; without an fps there (given, or a
    LeRobot source's) nor a recorded ``render_fps``, the env's declared rate is looked up
    from its id (``declared_fps``) and recorded.
    """
    import dataclasses

    from expcli.formats.layouts.lerobot.settings import fps_of

    metadata = settings.applied(dataset.metadata)
    env_id = metadata.get("env_id")
    if fps_of(metadata) is None and isinstance(env_id, str) and env_id:
        from expcli.envs.render_rate import declared_fps

        fps = declared_fps(env_id)
        if fps is not None:
            metadata["render_fps"] = fps
    return dataclasses.replace(dataset, metadata=metadata)


def convert_to_stream(
    src: str | os.PathLike[str],
    out: IO[bytes],
    *,
    to: str,
    num_envs: int | None = None,
    mapping: ColumnRoles | None = None,
) -> int:
    """Convert a dataset file and write it to an open binary stream.

    ``expcli convert SRC -`` writes to stdout; returning the bytes written.

    Only formats written front to back go to a stream (the table's rows with
    ``streaming``): ``npz`` and ``pt`` (complete), and ``csv`` (its rows only: without the
    sidecar a CSV keeps neither exact dtypes nor the metadata, and reads back as a CSV
    without sidecar does).

    Raises:
        ConfigError: ``to`` is not one of ``table.stream_formats()``.
        FormatError, SchemaError: The source cannot be read.
    """
    row = format_named(to)
    if row is None or row.name != to or not row.streams:
        raise ConfigError(
            f"{to} cannot be written to a stream (it is written out of order); "
            f"name a file, or stream one of {', '.join(stream_formats())}"
        )
    counter = _CountingWriter(out)
    counted = cast(IO[bytes], counter)  # all the writers call is write()
    dataset, _, close = _open_source(Path(src), num_envs, mapping)
    try:
        dataset.validate(src)
        row.write_stream(dataset, counted, src)
        out.flush()
    finally:
        close()
    return counter.written


# ----------------------------------------------------------------- internals


class _CountingWriter:
    """A write-only stream that counts what passes (the writers never seek or tell)."""

    def __init__(self, out: IO[bytes]) -> None:
        self.written = 0
        self._out = out

    def write(self, data: Any) -> int:
        count = self._out.write(data)
        self.written += memoryview(data).nbytes
        return count if count is not None else memoryview(data).nbytes

    def flush(self) -> None:
        self._out.flush()


def _open_source(
    source: Path, num_envs: int | None = None, mapping: ColumnRoles | None = None
) -> tuple[Dataset, str, Callable[[], None]]:
    """The dataset of a file or a Minari folder, its format, and what to call when done.

    The file is read lazily where its format allows.
    """
    src_format = source_format(source)
    dataset, close = open_lazy(source, src_format, num_envs=num_envs, mapping=mapping)
    return dataset, src_format, close


def _check_options(layout: str | Layout, compression: str | None) -> Layout:
    """The layout named, once both options are known to be ones there are."""
    chosen = Layout.parse(layout)
    if compression is not None and compression not in COMPRESSIONS:
        raise ConfigError(
            f"unknown compression {compression!r}; expected one of {', '.join(COMPRESSIONS)}"
        )
    return chosen


def _target_format(target: Path, to: str | None, layout: Layout, storage: str | None) -> str:
    from expcli.formats.layouts import layout_format, storage_or_format

    named, _ = storage_or_format(layout, to, storage)
    if layout is not Layout.EXPCLI:
        return layout_format(layout, target, named)
    fmt = output_format(target, to)
    if fmt is None:
        raise ConfigError(
            f"cannot tell the output format from {target.name!r}; name a suffix "
            f"({suffix_help()}) or pass a format"
        )
    return fmt


def reporting_reads(dataset: Dataset, report: Callable[[float], None]) -> Dataset:
    """``dataset`` whose tensors call ``report`` with the fraction of all bytes read so far.

    The writers read each tensor once, a slice of rows at a time.
    """
    total = max(1, sum(int(np.prod(a.shape)) * a.dtype.itemsize for a in dataset.tensors.values()))
    done = [0]

    def counted(array: Any) -> Any:
        if getattr(array, "ndim", 0) == 0 or len(array) == 0:
            return array

        def read(start: int, stop: int) -> np.ndarray:
            rows = np.asarray(array[start:stop])
            done[0] += rows.nbytes
            report(min(1.0, done[0] / total))
            return rows

        return LazyRows(array.shape, array.dtype, read)

    tensors = {name: counted(array) for name, array in dataset.tensors.items()}
    return Dataset(tensors, dataset.state, dataset.metadata)


def _size(path: Path) -> int:
    found = source_size(path)  # a glob's files
    if found is not None:
        return found
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size if path.exists() else 0


def _license(given: str | None) -> str | None:
    """``license`` checked (``dataset_card.checked_license``); None stays None.

    Raises:
        ConfigError: Not a license identifier.
    """
    return None if given is None else checked_license(given)
