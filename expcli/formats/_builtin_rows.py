"""The rows of expcli's own formats and layouts: each calls its module only when used.

So that reading the table (names, suffixes, help texts) imports no format module, and
``import expcli.formats`` never loads torch or h5py.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from expcli.formats._sniffing import (
    is_hdf5,
    is_npy_zip,
    is_parquet,
    is_torch_file,
    looks_like_csv,
)
from expcli.formats.layouts.kinds import Layout
from expcli.formats.rows import Closer, FormatRow, LayoutRow, SpaceEstimate, Streaming, Writer
from expcli.spec import FramesForm

if TYPE_CHECKING:
    from expcli.formats.block_cache import BlockCache
    from expcli.formats.dataset import Dataset
    from expcli.formats.hdf5_format import ForeignLayouts

__all__ = [
    "FORMAT_ROWS",
    "LAYOUT_ROWS",
    "MINARI_FOLDER",
    "SHARDED_FOLDER",
    "read_foreign_hdf5",
    "write_shards",
]

SHARDED_FOLDER = "folder"
"""The format of a sharded dataset folder (shards and a ``manifest.json``)."""

MINARI_FOLDER = Layout.MINARI.value
"""What ``source_format`` calls another folder: a Minari dataset, the layout kept in folders."""


# ------------------------------------------------------------------ pt


def _read_pt(path: Path, *, num_envs: int | None = None) -> Dataset:
    from expcli.formats import pt_format

    return pt_format.read(path, num_envs=num_envs)


def _open_pt(path: Path, *, num_envs: int | None = None) -> tuple[Dataset, Closer]:
    from expcli.formats import pt_format

    return pt_format.open_lazy(path, num_envs=num_envs)


def _native_writer(fmt: str) -> Writer:
    """The writer of pt, npz, HDF5 or Parquet files, or of a sharded folder.

    It takes ``frames`` (``FormatRow.frames``).
    """

    def write(
        dataset: Dataset,
        path: Path,
        *,
        overwrite: bool,
        compression: str | None,
        frames: FramesForm = FramesForm.FULL,
    ) -> None:
        if fmt == "pt":
            from expcli.formats import pt_format

            pt_format.write(dataset, path, overwrite=overwrite, frames=frames)
        elif fmt == "npz":
            from expcli.formats import npz_format

            npz_format.write(dataset, path, overwrite=overwrite, frames=frames)
        elif fmt == "parquet":
            from expcli.formats import parquet_format

            parquet_format.write(
                dataset, path, overwrite=overwrite, compression=compression, frames=frames
            )
        elif fmt == SHARDED_FOLDER:
            from expcli.formats import sharded

            sharded.write(dataset, path, overwrite=overwrite, frames=frames)
        else:
            from expcli.formats import hdf5_format

            hdf5_format.write(
                dataset, path, overwrite=overwrite, compression=compression, frames=frames
            )

    return write


def _stream_pt(dataset: Dataset, out: IO[bytes], source: str | PathLike[str]) -> None:
    from expcli.formats import pt_format
    from expcli.formats.header import encode_header

    pt_format.write_to(dataset, out, encode_header(dataset.header(), source))


# ------------------------------------------------------------------ npz


def _read_npz(path: Path, *, num_envs: int | None = None) -> Dataset:
    from expcli.formats import npz_format

    return npz_format.read(path, num_envs=num_envs)


def _open_npz(path: Path, *, num_envs: int | None = None) -> tuple[Dataset, Closer]:
    from expcli.formats import npz_format

    return npz_format.open_lazy(path, num_envs=num_envs)


def _stream_npz(dataset: Dataset, out: IO[bytes], source: str | PathLike[str]) -> None:
    from expcli.formats import npz_format
    from expcli.formats.header import encode_header

    npz_format.write_to(dataset, out, encode_header(dataset.header(), source))


# ------------------------------------------------------------------ csv


def _read_csv(path: Path, *, num_envs: int | None = None) -> Dataset:
    from expcli.formats import csv_format

    return csv_format.read(path, num_envs=num_envs)


def _open_csv(path: Path, *, num_envs: int | None = None) -> tuple[Dataset, Closer]:
    from expcli.formats import csv_format

    return csv_format.open_lazy(path, num_envs=num_envs)


def _write_csv(dataset: Dataset, path: Path, *, overwrite: bool, compression: str | None) -> None:
    from expcli.formats import csv_format

    csv_format.write(dataset, path, overwrite=overwrite)


def _stream_csv(dataset: Dataset, out: IO[bytes], source: str | PathLike[str]) -> None:
    from expcli.formats import csv_format

    csv_format.write_rows(dataset, out)


def _csv_sidecar(path: Path) -> tuple[Path, ...]:
    from expcli.formats.csv_format import sidecar_path

    return (sidecar_path(path),)


def _csv_without_sidecar(path: Path) -> str | None:
    from expcli.formats.csv_format import sidecar_path

    return None if sidecar_path(path).exists() else "a CSV file without its sidecar"


# ------------------------------------------------------------------ hdf5


def _read_hdf5(path: Path, *, num_envs: int | None = None) -> Dataset:
    from expcli.formats import hdf5_format

    return hdf5_format.read(path, num_envs=num_envs, foreign=_foreign_hdf5())


def _open_hdf5(
    path: Path, *, num_envs: int | None = None, cache: BlockCache | None = None
) -> tuple[Dataset, Closer]:
    from expcli.formats import hdf5_format

    return hdf5_format.open_lazy(path, num_envs=num_envs, foreign=_foreign_hdf5(), cache=cache)


# ------------------------------------------------------------------ parquet


def _read_parquet(path: Path, *, num_envs: int | None = None) -> Dataset:
    from expcli.formats import parquet_format

    return parquet_format.read(path, num_envs=num_envs)


def _open_parquet(
    path: Path, *, num_envs: int | None = None, cache: BlockCache | None = None
) -> tuple[Dataset, Closer]:
    from expcli.formats import parquet_format

    return parquet_format.open_lazy(path, num_envs=num_envs, cache=cache)


# ------------------------------------------------------------------ sharded folder


def _read_folder(path: Path, *, num_envs: int | None = None) -> Dataset:
    from expcli.formats import sharded

    return sharded.read(path, num_envs=num_envs)


def _open_folder(
    path: Path, *, num_envs: int | None = None, cache: BlockCache | None = None
) -> tuple[Dataset, Closer]:
    from expcli.formats import sharded

    return sharded.open_lazy(path, num_envs=num_envs, cache=cache)


def write_shards(
    dataset: Dataset,
    path: Path,
    shard_format: str,
    *,
    overwrite: bool,
    compression: str | None,
    frames: FramesForm = FramesForm.FULL,
) -> None:
    """Write a sharded folder whose shards are ``shard_format`` files (``compression``-ed)."""
    from expcli.formats import sharded

    sharded.write(
        dataset,
        path,
        overwrite=overwrite,
        shard_format=shard_format,
        compression=compression,
        frames=frames,
    )


FORMAT_ROWS: tuple[FormatRow, ...] = (
    FormatRow(
        "pt",
        (".pt", ".pth"),
        "a torch.save zip archive",
        _read_pt,
        _native_writer("pt"),
        _open_pt,
        sniff=is_torch_file,
        streaming=Streaming(_stream_pt, rank=1),
        layouts=(Layout.EXPCLI, Layout.SKRL),
        frames=True,
    ),
    FormatRow(
        "npz",
        (".npz",),
        "a zip archive of .npy members",
        _read_npz,
        _native_writer("npz"),
        _open_npz,
        sniff=is_npy_zip,
        streaming=Streaming(_stream_npz),
        layouts=(Layout.EXPCLI, Layout.SKRL),
        shard=True,
        frames=True,
    ),
    FormatRow(
        "csv",
        (".csv",),
        "comma-separated text",
        _read_csv,
        _write_csv,
        _open_csv,
        sniff=looks_like_csv,
        space=SpaceEstimate.TEXT,
        streaming=Streaming(_stream_csv, note="rows only", text=True, rank=2),
        layouts=(Layout.EXPCLI, Layout.SKRL),
        companions=_csv_sidecar,
        unrecorded_envs=_csv_without_sidecar,
    ),
    FormatRow(
        "hdf5",
        (".h5", ".hdf5"),
        "an HDF5 file",
        _read_hdf5,
        _native_writer("hdf5"),
        _open_hdf5,
        sniff=is_hdf5,
        compresses=True,
        compressions=("none", "gzip", "lzf"),
        layouts=(Layout.EXPCLI, Layout.TIANSHOU, Layout.MINARI, Layout.D4RL),
        title="HDF5",
        caches=True,
        frames=True,
    ),
    FormatRow(
        "parquet",
        (".parquet",),
        "a Parquet file",
        _read_parquet,
        _native_writer("parquet"),
        _open_parquet,
        sniff=is_parquet,
        compresses=True,
        compressions=("zstd", "snappy", "gzip", "none"),
        space=SpaceEstimate.UNKNOWN,
        title="Parquet",
        shard=True,
        caches=True,
        frames=True,
    ),
    FormatRow(
        SHARDED_FOLDER,
        (),
        "a sharded dataset folder",
        _read_folder,
        _native_writer(SHARDED_FOLDER),
        _open_folder,
        caches=True,
        frames=True,
    ),
)
"""expcli's formats, in the order messages list them (and sniffing tries them)."""


# ------------------------------------------------------------------ layouts


def _write_skrl(dataset: Dataset, path: Path, overwrite: bool) -> None:
    from expcli.formats.layouts import skrl_layout

    skrl_layout.write(dataset, path, overwrite=overwrite)


def _write_tianshou(dataset: Dataset, path: Path, overwrite: bool) -> None:
    from expcli.formats.layouts import tianshou_layout

    tianshou_layout.write(dataset, path, overwrite=overwrite)


def _read_tianshou(h5: Any, path: Path, num_envs: int | None, lazy: bool) -> Dataset | None:
    from expcli.formats.layouts import tianshou_layout

    return tianshou_layout.read(h5, path, lazy=lazy) if tianshou_layout.is_tianshou(h5) else None


def _write_minari(dataset: Dataset, path: Path, overwrite: bool) -> None:
    from expcli.formats.layouts import minari_layout

    minari_layout.write(dataset, path, overwrite=overwrite)


def _write_minari_in(dataset: Dataset, path: Path, overwrite: bool, storage: str) -> None:
    if storage == "hdf5":
        _write_minari(dataset, path, overwrite)
        return
    from expcli.formats.layouts import minari_arrow

    minari_arrow.write(dataset, path, overwrite=overwrite, storage=storage)


def _read_minari(h5: Any, path: Path, num_envs: int | None, lazy: bool) -> Dataset | None:
    from expcli.formats.layouts import minari_layout

    return (
        minari_layout.read(h5, path, lazy=lazy) if minari_layout.is_minari_file(h5, path) else None
    )


def _read_minari_folder(path: Path) -> Dataset:
    from expcli.formats.layouts import minari_layout

    return minari_layout.read_folder(path)


def _open_minari_folder(path: Path) -> tuple[Dataset, Closer]:
    from expcli.formats.layouts import minari_layout

    return minari_layout.open_folder(path)


def _write_lerobot(dataset: Dataset, path: Path, overwrite: bool) -> None:
    from expcli.formats.layouts import lerobot_layout

    lerobot_layout.write(dataset, path, overwrite=overwrite)


def _write_lerobot_in(dataset: Dataset, path: Path, overwrite: bool, storage: str) -> None:
    from expcli.formats.layouts import lerobot_layout

    lerobot_layout.write(dataset, path, overwrite=overwrite, storage=storage)


def _read_lerobot_folder(path: Path) -> Dataset:
    from expcli.formats.layouts import lerobot_layout

    return lerobot_layout.read_lerobot(path)


def _open_lerobot_folder(path: Path) -> tuple[Dataset, Closer]:
    from expcli.formats.layouts import lerobot_layout

    return lerobot_layout.open_lerobot(path)


def _is_lerobot_folder(path: Path) -> bool:
    from expcli.formats.layouts import lerobot_layout

    return lerobot_layout.is_lerobot_folder(path)


def _write_d4rl(dataset: Dataset, path: Path, overwrite: bool) -> None:
    from expcli.formats.layouts import d4rl_layout

    d4rl_layout.write(dataset, path, overwrite=overwrite)


def _read_d4rl(h5: Any, path: Path, num_envs: int | None, lazy: bool) -> Dataset | None:
    from expcli.formats.layouts import d4rl_layout

    return d4rl_layout.read(h5, path, num_envs, lazy=lazy) if d4rl_layout.is_d4rl(h5) else None


def _skrl_losses(dataset: Dataset, storage: str) -> list[str]:
    from expcli.formats.layouts import skrl_layout

    return skrl_layout.losses(dataset, storage)


def _tianshou_losses(dataset: Dataset, storage: str) -> list[str]:
    from expcli.formats.layouts import tianshou_layout

    return tianshou_layout.losses(dataset)


def _d4rl_losses(dataset: Dataset, storage: str) -> list[str]:
    from expcli.formats.layouts import d4rl_layout

    return d4rl_layout.losses(dataset)


LAYOUT_ROWS: tuple[LayoutRow, ...] = (
    LayoutRow(Layout.EXPCLI),
    LayoutRow(
        Layout.SKRL, ("pt", "npz", "csv"), _write_skrl, losses=_skrl_losses, keeps_metadata=False
    ),
    LayoutRow(
        Layout.TIANSHOU,
        ("hdf5",),
        _write_tianshou,
        read_hdf5=_read_tianshou,
        title="tianshou",
        losses=_tianshou_losses,
        keeps_metadata=False,
    ),
    LayoutRow(
        Layout.MINARI,
        (),
        _write_minari,
        read_hdf5=_read_minari,
        read_folder=_read_minari_folder,
        open_folder=_open_minari_folder,
        title="Minari",
        storage="hdf5",
        storages=("hdf5", "parquet", "arrow"),
        write_in=_write_minari_in,
    ),
    LayoutRow(
        Layout.D4RL,
        ("hdf5",),
        _write_d4rl,
        read_hdf5=_read_d4rl,
        title="D4RL",
        losses=_d4rl_losses,
    ),
    LayoutRow(
        Layout.LEROBOT,
        (),
        _write_lerobot,
        read_folder=_read_lerobot_folder,
        open_folder=_open_lerobot_folder,
        title="LeRobot",
        storage="parquet",
        claims=_is_lerobot_folder,
        storages=("parquet", "video"),  # video: uint8 (H, W, 3) tensors as lossy MP4
        write_in=_write_lerobot_in,
    ),
)
"""The layouts, in ``Layout``'s order; HDF5 files are offered to them in this order."""


def _foreign_hdf5() -> ForeignLayouts:
    """The foreign layouts an HDF5 file without expcli's metadata is offered to."""
    from expcli.formats.hdf5_format import ForeignLayouts

    titles = ", ".join(row.title or row.name for row in LAYOUT_ROWS if row.read_hdf5)
    return ForeignLayouts(read_foreign_hdf5, titles)


def read_foreign_hdf5(
    h5: Any, path: Path, num_envs: int | None = None, *, lazy: bool = False
) -> Dataset | None:
    """Read an open HDF5 file of a foreign layout, or return None when none matches.

    Tried in the order of ``LAYOUT_ROWS``: tianshou (a ``_meta`` group and a ``maxsize``
    attribute), Minari (only ``episode_<id>`` groups at the root), D4RL (``observations``,
    ``actions`` and ``rewards`` datasets at the root).

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
    for row in LAYOUT_ROWS:
        if row.read_hdf5 is not None:
            found = row.read_hdf5(h5, path, num_envs, lazy)
            if found is not None:
                return found
    return None
