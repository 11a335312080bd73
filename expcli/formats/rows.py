"""The base types of the format table: what a format or a layout is, and what it does.

A layout's name is a ``Layout``. A format is one ``Format`` object: its name, suffixes,
what it holds and the compressions it takes, and its methods: how its bytes are told,
read, opened lazily and written, and where it can, streamed and sharded; expcli's own are
``ModuleFormat`` objects, whose working module (imported on first use) reads and writes.
A layout is one ``FileLayout`` object. ``formats.table`` keeps them by name
(``"module:attr"``, imported when first asked for) and every dispatcher asks it; a format
defined outside expcli becomes one with ``table.register_format``. This module is a leaf:
it imports no format module.
"""

from __future__ import annotations

import importlib
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from os import PathLike
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, ClassVar

from expcli.errors import ConfigError
from expcli.formats.authorship import Authorship
from expcli.spec import FramesForm, ImagesForm

if TYPE_CHECKING:
    from expcli.formats.block_cache import BlockCache
    from expcli.formats.column_roles import ColumnRoles
    from expcli.formats.dataset import Dataset

__all__ = [
    "EXPCLI_LAYOUT",
    "Closer",
    "ExpcliLayout",
    "FileLayout",
    "Format",
    "Layout",
    "ModuleFormat",
    "SpaceEstimate",
    "TableFormat",
    "WritePlan",
    "WrittenShard",
]

_TEXT_CELL_BYTES = {"f": 4, "c": 4, "b": 5}  # shortest cell and comma: "0.0,", "True,"; else "0,"

Closer = Callable[[], None]
"""Called once done with a lazily opened dataset."""


class Layout(StrEnum):
    """A layout a dataset is written in: ``EXPCLI`` is expcli's own schema."""

    EXPCLI = "expcli"
    SKRL = "skrl"
    TIANSHOU = "tianshou"
    MINARI = "minari"
    D4RL = "d4rl"
    LEROBOT = "lerobot"

    @classmethod
    def parse(cls, name: str, *, foreign: bool = False, any_case: bool = False) -> Layout:
        """The layout spelled ``name`` (``any_case``: in any case).

        ``foreign``: one other than ``EXPCLI``.

        Raises:
            ConfigError: No such layout, naming the ones there are.
        """
        choices = [layout for layout in cls if not foreign or layout is not cls.EXPCLI]
        wanted = name.lower() if any_case else name
        for layout in choices:
            if wanted == layout.value:
                return layout
        raise ConfigError(f"unknown layout {name!r}; expected one of {', '.join(choices)}")


class SpaceEstimate(StrEnum):
    """How the free-space check estimates what a file of the format takes, at least."""

    BYTES = "bytes"
    """Every byte of every tensor is stored (uncompressed binary)."""
    TEXT = "text"
    """Each cell is text: at least its shortest spelling and a separator."""
    UNKNOWN = "unknown"
    """Cannot be told up front (always compressed): nothing is refused."""


class Format(ABC):
    """A format: a file (named by its suffixes) or a folder (named by none).

    One object per format, each in its own module; ``formats.table`` keeps them by name.
    What a format can do beyond reading and writing is what its methods do: a stream
    writer (``write_stream``), shards (``write_shard``, ``open_shard``); the base's
    versions of those say it cannot, and ``streams`` and ``shards`` tell from them.

    Attributes:
        name: What users type (``--to``) and results report.
        suffixes: File name suffixes, lower case with the dot, the usual one first; none
            for a folder.
        holds: What its files hold, for "expected a dataset: ..." messages.
        compressions: The compressions its writer takes, its default first; none: it does
            not compress.
        space: How the free-space check estimates its size (compressed: unknown).
        layouts: The layouts its files carry, expcli's own first.
        title: How prose names it ("HDF5"); default its name.
        stream_note: What a stream of it leaves out ("rows only").
        stream_text: Whether a stream of it is printable, so it may go to a terminal.
        stream_rank: Orders the stream formats in help texts, lowest first.
        shard_card: A folder of its shards gets this dataset card (``README.md``), and loses
            the shard files its manifest does not list, since outside readers glob them.
        shards_mapped: Its shards' members are read over a memory mapping (else each shard
            stays open while its rows are read).
    """

    name: ClassVar[str]
    suffixes: ClassVar[tuple[str, ...]]
    holds: ClassVar[str]
    compressions: ClassVar[tuple[str, ...]] = ()
    space: ClassVar[SpaceEstimate] = SpaceEstimate.BYTES
    layouts: ClassVar[tuple[Layout, ...]] = (Layout.EXPCLI,)
    title: ClassVar[str] = ""
    stream_note: ClassVar[str] = ""
    stream_text: ClassVar[bool] = False
    stream_rank: ClassVar[int] = 0
    shard_card: ClassVar[str | None] = None
    shards_mapped: ClassVar[bool] = False

    @abstractmethod
    def read(self, path: Path, *, num_envs: int | None = None) -> Dataset:
        """Read the whole dataset at ``path``; ``num_envs`` for files that do not record it."""

    @abstractmethod
    def write(self, dataset: Dataset, plan: WritePlan) -> None:
        """Write ``dataset`` to ``plan.target`` atomically, as the registry checked ``plan``.

        ``plan.compression`` is one of ``compressions`` (None: the default); ``plan.frames``:
        how next observations are stored, where the format can store them once
        (``formats.frames``); ``plan.overwrite``: whether an existing target is replaced.
        """

    def open_lazy(
        self, path: Path, *, num_envs: int | None = None, cache: BlockCache | None = None
    ) -> tuple[Dataset, Closer]:
        """Open the dataset at ``path`` with its rows left on disk; call the closer once done.

        ``cache``: where a compressed format keeps the blocks it decodes (draws at random).
        The base reads it whole.
        """
        return self.read(path, num_envs=num_envs), _nothing

    @property
    def reads_tables(self) -> bool:
        """Whether its files are tables read by their columns (``open_mapped`` takes a mapping)."""
        return type(self).open_mapped is not Format.open_mapped

    def open_mapped(
        self, path: Path, mapping: ColumnRoles, *, cache: BlockCache | None = None
    ) -> tuple[Dataset, Closer]:
        """Open a table lazily, its columns in the roles ``mapping`` gives (``--columns``).

        Raises:
            ConfigError: The format's files are not tables (the base).
        """
        raise ConfigError(
            f"--columns and --done-means read tables; this is {self.holds}", path=path
        )

    def sniff(self, path: Path, head: bytes) -> bool:
        """Whether a file (its path and first ``SNIFF_BYTES`` bytes) is of the format.

        The base cannot tell: the suffix only.
        """
        return False

    def refuse_write(self, target: Path) -> None:
        """Refuse, in one line, a write to ``target`` of a format expcli only reads.

        Asked before anything is read (``checked_write.check_target``) and before a write
        (``registry.write_planned``). The base refuses none.

        Raises:
            ConfigError: The format is read only (never, the base).
        """
        del target

    def write_stream(self, dataset: Dataset, out: IO[bytes], source: str | PathLike[str]) -> None:
        """Write ``dataset`` front to back to the binary stream ``out`` (``source``: messages).

        Raises:
            NotImplementedError: The format seeks: it cannot be streamed (the base).
        """
        raise NotImplementedError(f"{self.name} files cannot be written to a stream")

    def write_shard(
        self, shard: Dataset, path: Path, plan: WritePlan, after: object | None
    ) -> WrittenShard:
        """Write one shard of a sharded folder whole, then rename it into place.

        ``plan``: the folder's, for its shards' compression (None: the default) and
        ``frames``; ``after``: what the previous shard's ``WrittenShard.carry`` (or
        ``shard_carry``) gave, None for the first.

        Raises:
            NotImplementedError: The format cannot be a shard (the base).
        """
        raise NotImplementedError(f"{self.name} files cannot be shards")

    def open_shard(self, path: Path, *, cache: BlockCache | None) -> tuple[Dataset, Closer]:
        """Open a shard with its rows left on disk (``open_lazy``, for a format that shards)."""
        return self.open_lazy(path, cache=cache)

    def shard_carry(self, path: Path) -> object | None:
        """What the shard at ``path`` hands the next one (``write_shard``'s ``after``)."""
        return None

    def companions(self, path: Path) -> tuple[Path, ...]:
        """The files beside the target that a write also makes (a sidecar)."""
        return ()

    def unrecorded_envs(self, path: Path) -> str | None:
        """What a file of it is when it does not record its number of env columns, or None.

        ("a CSV file without its sidecar"); None: it records it.
        """
        return None

    def checked_compression(
        self,
        compression: str | None,
        *,
        what: str = "files",
        others: Callable[[], tuple[str, ...]] | None = None,
    ) -> str | None:
        """``compression`` as this format's writer takes it, lower case: the one check of it.

        None stays None (the writer's default); a format that does not compress takes none
        but ``"none"``, and gets None. ``what``: "files" or "shards", for the message;
        ``others``: what gives the formats that do compress, named where this one does not.

        Raises:
            ConfigError: The format does not compress, or not so.
        """
        if compression is None:
            return None
        name = str(compression).lower()
        if not self.compresses:
            if name == "none":
                return None
            hint = f"; compression is for {', '.join(others())}" if others else ""
            raise ConfigError(
                f"{self.name} {what} cannot be compressed (got compression {compression!r}){hint}"
            )
        if name not in self.compressions:
            raise ConfigError(
                f"{self.shown} {what} take compression {', '.join(self.compressions)}; "
                f"got {compression!r}"
            )
        return name

    def estimated_size(
        self, tensors: Mapping[str, Any], compression: str | None = None
    ) -> int | None:
        """A lower bound of the bytes an expcli file of the format takes for ``tensors``.

        Arrays or anything with ``dtype`` and ``shape``; or None when it cannot be told: a
        format whose ``space`` says so (``SpaceEstimate.UNKNOWN``), or one that compresses,
        asked to. A lower bound, so that a check against it never refuses a write that would
        fit: the binary formats store every byte of every tensor (``BYTES``); a text cell is
        at least its shortest text and a comma (``TEXT``).
        """
        compressed = self.compresses and compression is not None and compression.lower() != "none"
        if compressed or self.space is SpaceEstimate.UNKNOWN:
            return None
        total = 0
        for array in tensors.values():
            dtype = getattr(array, "dtype", None)
            shape = getattr(array, "shape", None)
            if dtype is None or shape is None:
                return None
            cells = math.prod(shape)
            if self.space is SpaceEstimate.TEXT:
                total += cells * _TEXT_CELL_BYTES.get(getattr(dtype, "kind", ""), 2)
            else:
                total += cells * int(dtype.itemsize)
        return total

    @property
    def folder(self) -> bool:
        """Whether it is a folder, named by no suffix."""
        return not self.suffixes

    @property
    def shown(self) -> str:
        """Its name in prose: ``title``, else ``name``."""
        return self.title or self.name

    @property
    def compresses(self) -> bool:
        """Whether its writer takes a compression other than none."""
        return bool(self.compressions)

    @property
    def writes(self) -> bool:
        """Whether expcli writes it (it does not ``refuse_write``); ``--to`` offers those."""
        return type(self).refuse_write is Format.refuse_write

    @property
    def streams(self) -> bool:
        """Whether it is written to a stream (``write_stream``): it does not seek."""
        return type(self).write_stream is not Format.write_stream

    @property
    def shards(self) -> bool:
        """Whether a file of it can be a shard of a sharded folder (``write_shard``)."""
        return type(self).write_shard is not Format.write_shard


class ModuleFormat(Format):
    """A format whose work is done by the functions of one module, imported on first use.

    ``work`` names that module. It has ``read(path, *, num_envs)``, ``open_lazy(path, *,
    num_envs, cache)`` and ``write(dataset, plan)``; what else the format does (a stream,
    shards) its object says in methods of its own, calling the module too.
    """

    work: ClassVar[str]

    @property
    def module(self) -> Any:
        """The working module (``work``): the table stays light until a file is read."""
        return importlib.import_module(self.work)

    def read(self, path: Path, *, num_envs: int | None = None) -> Dataset:
        """Read the whole dataset at ``path`` (the module's ``read``)."""
        found: Dataset = self.module.read(path, num_envs=num_envs)
        return found

    def open_lazy(
        self, path: Path, *, num_envs: int | None = None, cache: BlockCache | None = None
    ) -> tuple[Dataset, Closer]:
        """Open the dataset at ``path`` with its rows left on disk (the module's ``open_lazy``)."""
        opened: tuple[Dataset, Closer] = self.module.open_lazy(path, num_envs=num_envs, cache=cache)
        return opened

    def write(self, dataset: Dataset, plan: WritePlan) -> None:
        """Write ``dataset`` as ``plan`` says, atomically (the module's ``write``)."""
        self.module.write(dataset, plan)


class TableFormat(ModuleFormat):
    """A ``ModuleFormat`` of tables read by their columns (Parquet, Arrow IPC).

    Its module's ``open_lazy`` takes a ``mapping`` too (``--columns``, ``--done-means``).
    """

    def open_mapped(
        self, path: Path, mapping: ColumnRoles, *, cache: BlockCache | None = None
    ) -> tuple[Dataset, Closer]:
        """Open the table lazily, its columns in the roles ``mapping`` gives."""
        opened: tuple[Dataset, Closer] = self.module.open_lazy(path, cache=cache, mapping=mapping)
        return opened


@dataclass(frozen=True, slots=True)
class WritePlan:
    """One write, handed down whole: what to write where, and how.

    The registry checks it once (``registry.write_planned``: the format, the compression
    it takes, the shard format) before a format's ``write`` is given it.

    Attributes:
        target: The file or folder to write.
        format: The format's name (a foreign layout's: the format or storage it writes).
        layout: expcli's own schema, or a foreign layout.
        compression: One the format (a sharded folder: its shard format) takes; None: its
            default, or none.
        shard_format: A sharded folder's shards' format; None: npz.
        frames: How next observations are stored (``formats.frames``).
        overwrite: Whether an existing target may be replaced.
        authorship: Who made the data and with what, for a layout that keeps it
            (``FileLayout.keeps_authorship``: Minari); None: nothing given.
        license: The dataset card's license, where the output is a folder with a card
            (``dataset_card``; None: the one a collect run recorded, else ``other``).
        images: How Parquet stores image-like uint8 frames: PNG cells (HF ``Image``) or raw.
    """

    target: Path
    format: str
    layout: Layout = Layout.EXPCLI
    compression: str | None = None
    shard_format: str | None = None
    frames: FramesForm = FramesForm.ONCE
    overwrite: bool = True
    authorship: Authorship | None = None
    license: str | None = None
    images: ImagesForm = ImagesForm.PNG


@dataclass(frozen=True, slots=True)
class WrittenShard:
    """A shard as ``Format.write_shard`` left it.

    Attributes:
        bytes: Its size.
        crc32: The CRC-32 of its bytes, 8 hex digits.
        once: Whether it stores some next observations once (schema ``FRAMES_SCHEMA``).
        carry: What the next shard is handed (``Format.write_shard``'s ``after``).
    """

    bytes: int
    crc32: str
    once: bool
    carry: object | None = None


def _nothing() -> None:
    """The closer of a dataset read whole."""


class FileLayout(ABC):
    """A layout: the formats it is written in, and how it is read and written.

    Its methods say what it does; the base's versions say it does not (``writes``,
    ``reads_folders`` tell from them).

    Attributes:
        name: The layout.
        formats: The formats it writes, its default first; none for a folder layout.
        title: How prose names it ("Minari").
        storage: The format a folder of the layout keeps its data in (Minari: hdf5).
        storages: The formats a folder layout may keep its data in, ``storage`` first
            (``--to`` picks one; Minari: hdf5, parquet, arrow).
        keeps_metadata: Whether the layout's files carry expcli's metadata (skrl's and
            tianshou's do not).
        keeps_authorship: Whether its files keep a plan's ``authorship`` (Minari's do).
        work: The module that reads and writes it (``module``).
    """

    name: ClassVar[Layout]
    formats: ClassVar[tuple[str, ...]] = ()
    title: ClassVar[str] = ""
    storage: ClassVar[str | None] = None
    storages: ClassVar[tuple[str, ...]] = ()
    keeps_metadata: ClassVar[bool] = True
    keeps_authorship: ClassVar[bool] = False
    work: ClassVar[str] = ""

    @property
    def module(self) -> Any:
        """The module that does the layout's work (``work``), imported on first use."""
        return importlib.import_module(self.work)

    def write(self, dataset: Dataset, plan: WritePlan) -> None:
        """Write the layout atomically to ``plan.target``, as the registry checked ``plan``.

        ``plan.format``: its storage (one of ``formats`` or ``storages``); ``plan.overwrite``:
        whether an existing target is replaced.

        Raises:
            NotImplementedError: expcli's own layout: the format's writer writes it (the base).
        """
        raise NotImplementedError(f"the {self.name} layout is written by its format")

    def refuse_target(self, plan: WritePlan) -> None:
        """Refuse, in one line, a plan the layout cannot write, before anything is read.

        The base refuses an ``authorship`` where the layout does not keep it
        (``keeps_authorship``); a layout refuses what else its target must be (Minari: a
        folder named as its dataset id).

        Raises:
            ConfigError: The plan cannot be written in the layout.
        """
        if plan.authorship and not self.keeps_authorship:
            raise ConfigError(
                f"{plan.target}: the {self.name} layout keeps no author, author email, "
                "algorithm name or code permalink (Minari's metadata); write them with "
                "--layout minari"
            )

    def read_hdf5(self, h5: Any, path: Path, num_envs: int | None, lazy: bool) -> Dataset | None:
        """Read an open HDF5 file of the layout, or None: the file is not of it (the base)."""
        return None

    def read_folder(self, path: Path) -> Dataset:
        """Read a folder of the layout.

        Raises:
            NotImplementedError: The layout is not kept in folders (the base).
        """
        raise NotImplementedError(f"the {self.name} layout reads no folders")

    def open_folder(self, path: Path) -> tuple[Dataset, Closer]:
        """Open a folder of the layout with its rows left on disk (the base reads it whole)."""
        return self.read_folder(path), _nothing

    def claims(self, path: Path) -> bool:
        """Whether a folder is of the layout, before it is taken for Minari's (the default)."""
        return False

    def marks(self, path: Path) -> bool:
        """Whether a folder bears the layout's mark, sound or not (the base: ``claims``).

        Such a folder is the layout's to read (or to say what is wrong with), never a
        folder of Parquet files read as one table (``parquet_sources``).
        """
        return self.claims(path)

    def losses(self, dataset: Dataset, storage: str) -> list[str]:
        """What writing ``dataset`` in ``storage`` does not keep, one phrase each.

        Said in one warning and, where the layout keeps metadata, under ``LOSSES_KEY``;
        none (the base): the writer says so itself (Minari, LeRobot) or nothing is lost.
        """
        return []

    @property
    def writes(self) -> bool:
        """Whether it has its own writer (expcli's own layout is its format's)."""
        return type(self).write is not FileLayout.write

    @property
    def reads_folders(self) -> bool:
        """Whether it is kept in folders (``read_folder``)."""
        return type(self).read_folder is not FileLayout.read_folder


class ExpcliLayout(FileLayout):
    """expcli's own schema, written by each format's writer."""

    name = Layout.EXPCLI


EXPCLI_LAYOUT = ExpcliLayout()
"""expcli's own layout (``formats.table`` names it)."""
