"""Dataset files: read and write every format of the table through one interchange type.

The formats and layouts, one object each, are ``formats.table``'s (pt, npz, csv, HDF5, sharded
folders, and any registered with ``table.register_format``).

``read_dataset`` tells a file's format by its bytes (then its suffix), ``write_dataset`` by
the target's suffix; both convert any failure of the underlying library into an expcli
error naming the file. Importing this package loads numpy only: torch is imported when a
``.pt`` file is read (never to write one), h5py when an HDF5 file is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from expcli._lazy_names import lazy_names

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset
    from expcli.formats.registry import (
        FORMATS,
        MINARI_FOLDER,
        SHARDED_FOLDER,
        detect_format,
        format_from_suffix,
        open_lazy,
        read_dataset,
        source_format,
        write_dataset,
    )

__all__ = [
    "FORMATS",
    "MINARI_FOLDER",
    "SHARDED_FOLDER",
    "Dataset",
    "detect_format",
    "format_from_suffix",
    "open_lazy",
    "read_dataset",
    "source_format",
    "write_dataset",
]

# a leaf such as ``formats.layout_keys`` is imported without the registry and numpy
__getattr__, __dir__ = lazy_names(
    __name__, dict.fromkeys(__all__, ".registry") | {"Dataset": ".dataset"}
)
