"""The row types of the format table: what a format or a layout is, and what it does.

A format is one ``FormatRow``: its name, suffixes, how its bytes are told, its reader,
lazy opener and writer, whether it compresses, streams and how much room it needs, and
the layouts it carries. A layout is one ``LayoutRow``. ``formats.table`` holds the rows
and every dispatcher reads them; a format defined outside expcli becomes one with
``table.register_format``. This module is a leaf: it imports no format module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from os import PathLike
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from expcli.formats.layouts.kinds import Layout

if TYPE_CHECKING:
    from expcli.formats.block_cache import BlockCache
    from expcli.formats.dataset import Dataset
    from expcli.spec import FramesForm

__all__ = [
    "CachingOpener",
    "Closer",
    "FormatRow",
    "FramesWriter",
    "LayoutRow",
    "LazyOpener",
    "Reader",
    "SpaceEstimate",
    "Streaming",
    "Writer",
]

Closer = Callable[[], None]
"""Called once done with a lazily opened dataset."""


class Reader(Protocol):
    """Reads a whole dataset; ``num_envs`` for files that do not record it."""

    def __call__(self, path: Path, *, num_envs: int | None = None) -> Dataset:
        """Read the dataset at ``path``."""
        ...


class LazyOpener(Protocol):
    """Opens a dataset whose rows stay on disk, with the function that closes it."""

    def __call__(self, path: Path, *, num_envs: int | None = None) -> tuple[Dataset, Closer]:
        """Open the dataset at ``path``; call the closer once done."""
        ...


class CachingOpener(Protocol):
    """A ``LazyOpener`` that keeps the blocks it decodes in ``cache`` (``FormatRow.caches``)."""

    def __call__(
        self, path: Path, *, num_envs: int | None = None, cache: BlockCache | None = None
    ) -> tuple[Dataset, Closer]:
        """Open the dataset at ``path``; call the closer once done."""
        ...


class Writer(Protocol):
    """Writes a dataset atomically; ``compression`` only reaches a row that compresses."""

    def __call__(
        self, dataset: Dataset, path: Path, *, overwrite: bool, compression: str | None
    ) -> None:
        """Write ``dataset`` to ``path``."""
        ...


class FramesWriter(Protocol):
    """A ``Writer`` that also takes ``frames``: how next observations are stored."""

    def __call__(
        self,
        dataset: Dataset,
        path: Path,
        *,
        overwrite: bool,
        compression: str | None,
        frames: FramesForm,
    ) -> None:
        """Write ``dataset`` to ``path``."""
        ...


class StreamWriter(Protocol):
    """Writes a dataset front to back to an open binary stream (``source`` for messages)."""

    def __call__(self, dataset: Dataset, out: IO[bytes], source: str | PathLike[str]) -> None:
        """Write ``dataset`` to ``out``."""
        ...


Sniffer = Callable[[Path, bytes], bool]
"""Whether a file (its path and first ``SNIFF_BYTES`` bytes) is of the format."""

ForeignHdf5Reader = Callable[[Any, Path, "int | None", bool], "Dataset | None"]
"""Reads an open ``h5py.File`` of a foreign layout (num_envs, lazy), or None: not this layout."""


class SpaceEstimate(StrEnum):
    """How the free-space check estimates what a file of the format takes, at least."""

    BYTES = "bytes"
    """Every byte of every tensor is stored (uncompressed binary)."""
    TEXT = "text"
    """Each cell is text: at least its shortest spelling and a separator."""
    UNKNOWN = "unknown"
    """Cannot be told up front (always compressed): nothing is refused."""


@dataclass(frozen=True, slots=True)
class Streaming:
    """How a format is written to a stream (``expcli convert SRC -``).

    ``note`` says what a stream of it leaves out ("rows only"); ``text``: printable, so it
    may go to a terminal; ``rank`` orders the stream formats in help texts, lowest first.
    """

    write: StreamWriter
    note: str = ""
    text: bool = False
    rank: int = 0


@dataclass(frozen=True, slots=True)
class FormatRow:
    """A format: a file (named by its suffixes) or a folder (named by none).

    Attributes:
        name: What users type (``--to``) and results report.
        suffixes: File name suffixes, lower case with the dot, the usual one first; none
            for a folder.
        holds: What its files hold, for "expected a dataset: ..." messages.
        read: Reads a whole dataset.
        write: Writes a dataset atomically.
        open_lazy: Opens a dataset whose rows stay on disk; None: read whole.
        sniff: Tells the format from a file's first bytes; None: the suffix only.
        compresses: Whether its writer takes a compression other than none.
        compressions: The compressions it takes, its default first (when it compresses).
        space: How the free-space check estimates its size (compressed: unknown).
        streaming: How it is written to a stream; None: it cannot be (it seeks).
        layouts: The layouts its files carry, expcli's own first.
        title: How prose names it ("HDF5"); default its name.
        companions: The files beside the target that a write also makes (a sidecar).
        unrecorded_envs: What a file of it is when it does not record its number of env
            columns ("a CSV file without its sidecar"), or None when it does.
        shard: Whether a file of it can be a shard of a sharded folder
            (``--shard-format``).
        caches: Whether its lazy opener is a ``CachingOpener``: it keeps the blocks it
            decodes in a ``BlockCache`` given as ``cache`` (a compressed format sampled at
            random).
        frames: Whether its writer is a ``FramesWriter``: it can store next observations
            once (``formats.frames``).
    """

    name: str
    suffixes: tuple[str, ...]
    holds: str
    read: Reader
    write: Writer
    open_lazy: LazyOpener | None = None
    sniff: Sniffer | None = None
    compresses: bool = False
    compressions: tuple[str, ...] = ()
    space: SpaceEstimate = SpaceEstimate.BYTES
    streaming: Streaming | None = None
    layouts: tuple[Layout, ...] = (Layout.EXPCLI,)
    title: str = ""
    companions: Callable[[Path], tuple[Path, ...]] | None = None
    unrecorded_envs: Callable[[Path], str | None] | None = None
    shard: bool = False
    caches: bool = False
    frames: bool = False

    @property
    def folder(self) -> bool:
        """Whether it is a folder, named by no suffix."""
        return not self.suffixes

    @property
    def shown(self) -> str:
        """Its name in prose: ``title``, else ``name``."""
        return self.title or self.name


@dataclass(frozen=True, slots=True)
class LayoutRow:
    """A layout: the formats it is written in, and how it is read and written.

    Attributes:
        name: The layout.
        formats: The formats it writes, its default first; none for a folder layout.
        write: Writes it atomically; None for expcli's own (the format's writer).
        read_hdf5: Reads an open HDF5 file of the layout, or returns None when the file is
            not of it (tried in table order).
        read_folder: Reads a folder of the layout (one held in a folder).
        open_folder: Opens such a folder with its rows left on disk.
        title: How prose names it ("Minari").
        storage: The format a folder of the layout keeps its data in (Minari: hdf5).
        claims: Whether a folder is of the layout (checked before a folder is taken for the
            default folder layout, Minari).
        storages: The formats a folder layout may keep its data in, ``storage`` first
            (``--to`` picks one; Minari: hdf5, parquet, arrow).
        write_in: Writes a folder layout in one of ``storages``.
        losses: What writing a dataset in a storage of the layout does not keep, one phrase
            each (said in one warning and, where the layout keeps metadata, under
            ``LOSSES_KEY``); None: the writer says so itself (Minari, LeRobot) or nothing is
            lost.
        keeps_metadata: Whether the layout's files carry expcli's metadata (skrl's and
            tianshou's do not).
    """

    name: Layout
    formats: tuple[str, ...] = ()
    write: Callable[[Dataset, Path, bool], None] | None = None
    read_hdf5: ForeignHdf5Reader | None = None
    read_folder: Callable[[Path], Dataset] | None = None
    open_folder: Callable[[Path], tuple[Dataset, Closer]] | None = None
    title: str = ""
    storage: str | None = None
    claims: Callable[[Path], bool] | None = None
    storages: tuple[str, ...] = ()
    write_in: Callable[[Dataset, Path, bool, str], None] | None = None
    losses: Callable[[Dataset, str], list[str]] | None = None
    keeps_metadata: bool = True
