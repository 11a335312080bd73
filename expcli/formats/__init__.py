"""Dataset files: read and write pt, npz, csv and HDF5 through one interchange type.

``read_dataset`` tells a file's format by its bytes (then its suffix), ``write_dataset`` by
the target's suffix; both convert any failure of the underlying library into an expcli
error naming the file. Importing this package loads numpy only: torch is imported when a
``.pt`` file is read (never to write one), h5py when an HDF5 file is opened.
"""

from __future__ import annotations

from expcli.formats.dataset import Dataset
from expcli.formats.registry import (
    FOLDER_FORMAT,
    FORMATS,
    detect_format,
    format_from_suffix,
    open_lazy,
    read_dataset,
    source_format,
    write_dataset,
)

__all__ = [
    "FOLDER_FORMAT",
    "FORMATS",
    "Dataset",
    "detect_format",
    "format_from_suffix",
    "open_lazy",
    "read_dataset",
    "source_format",
    "write_dataset",
]
