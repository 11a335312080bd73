"""NumPy ``.npz`` archives: one ``.npy`` member per tensor plus the metadata as a 0-d string.

Written with ``np.savez`` (uncompressed). Read with ``allow_pickle=False``: object arrays,
which would need unpickling, are refused.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from expcli.errors import FormatError
from expcli.formats._atomic import atomic_write
from expcli.formats.dataset import Dataset
from expcli.formats.registry import (
    dataset_from_header,
    encode_header,
    error_summary,
    foreign_dataset,
    parse_header,
)
from expcli.spec import METADATA_KEY

__all__ = ["read", "write"]


_SAVEZ_PARAMETERS = frozenset({"file", "allow_pickle"})
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")


def write(dataset: Dataset, path: Path, *, overwrite: bool) -> None:
    """Write every tensor as a ``.npy`` member, plus the metadata member ``__expcli__``."""
    members = {name: dataset.tensors[name] for name in sorted(dataset.tensors)}
    members[METADATA_KEY] = np.array(encode_header(dataset.header(), path))
    with atomic_write(path, overwrite=overwrite) as f:
        if _SAVEZ_PARAMETERS.isdisjoint(members):
            np.savez(f, allow_pickle=False, **members)
        else:  # a tensor named like a parameter of np.savez: write the same archive by hand
            with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
                for name, array in members.items():
                    with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, array, allow_pickle=False)


def read(path: Path, *, num_envs: int | None = None) -> Dataset:
    """Load an ``.npz`` archive; one without metadata is read as a full skrl memory.

    Args:
        path: File to read.
        num_envs: Unused: an ``.npz`` archive records its arrays' shapes.

    Raises:
        FormatError: Not an ``.npz`` archive, corrupt or truncated, holding object arrays,
            or with a malformed metadata member.
        SchemaError: A tensor has an unsupported dtype or disagrees with the metadata.
    """
    del num_envs
    arrays: dict[str, np.ndarray] = {}
    with open(path, "rb") as file:
        head = file.read(6)
        if not head.startswith(_ZIP_MAGICS):
            raise FormatError(
                f"not an .npz archive ({_what(head)}); expected a zip archive of .npy members",
                path=path,
            )
        file.seek(0)
        try:
            loaded = np.load(file, allow_pickle=False)
            if not isinstance(loaded, np.lib.npyio.NpzFile):
                raise FormatError("expected an .npz archive of .npy members", path=path)
            with loaded:
                for name in loaded.files:
                    value = loaded[name]
                    if not isinstance(value, np.ndarray):
                        raise FormatError(
                            "is not a .npy member; expected only .npy members", path=path, key=name
                        )
                    arrays[name] = value
        except FormatError:
            raise
        except ValueError as e:
            raise FormatError(
                f"cannot be read ({error_summary(e)}); expected an .npz archive of numeric "
                f"arrays (object arrays are never unpickled)",
                path=path,
            ) from e
        except (zipfile.BadZipFile, EOFError, OSError, KeyError, RuntimeError) as e:
            raise FormatError(
                f"corrupt or truncated .npz archive ({error_summary(e)})", path=path
            ) from e
    meta = arrays.pop(METADATA_KEY, None)
    if meta is None:
        return foreign_dataset(arrays, path)
    if meta.ndim != 0 or meta.dtype.kind != "U":
        raise FormatError(
            f"holds a {meta.dtype} array of shape {meta.shape}; expected a 0-d unicode string",
            path=path,
            key=METADATA_KEY,
        )
    return dataset_from_header(arrays, parse_header(str(meta[()]), path, METADATA_KEY), path)


def _what(head: bytes) -> str:
    """What a file that is not a zip archive holds, judging by its first bytes."""
    if not head:
        return "the file is empty"
    if head == b"\x93NUMPY":
        return "it holds a single .npy array"
    return "unrecognised content"
