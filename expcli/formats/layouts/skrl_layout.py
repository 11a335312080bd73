"""skrl memory exports: what skrl's ``Memory.save`` writes, and nothing more.

skrl keeps every tensor shaped ``(memory_size, num_envs, size)`` (features flattened) and
saves the tensors as they lie, whatever the memory's fill: ``.pt`` is ``torch.save`` of a
dict name -> tensor (``Memory.load`` reads it back), ``.npz`` is ``np.savez`` of the same
arrays, ``.csv`` has a header ``name.i`` and one line per valid transition in (row, env)
order. The circular state and metadata are not recorded (skrl files have no place for
them): write expcli's own format to keep them. The reading side is the pt, npz and csv
readers, which take a file without expcli's metadata for a full skrl memory.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import IO, Any, cast

import numpy as np

from expcli.formats._atomic import atomic_path, atomic_write
from expcli.formats._guarded_file import guarded_file
from expcli.formats.dataset import Dataset

__all__ = ["write"]


def write(dataset: Dataset, path: Path, *, overwrite: bool) -> None:
    """Write ``dataset`` as skrl would save it, in the format that ``path``'s suffix names.

    ``.npz`` or ``.csv``; anything else is ``.pt``.
    """
    arrays = {name: _flat(dataset.tensors[name]) for name in sorted(dataset.tensors)}
    suffix = path.suffix.lower()
    if suffix == ".npz":
        with atomic_write(path, overwrite=overwrite) as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]
    elif suffix == ".csv":
        _write_csv(arrays, len(dataset), path, overwrite)
    else:
        _write_pt(arrays, path, overwrite)


def _flat(array: Any) -> np.ndarray:
    """``(T, N, *f)`` as skrl's ``(T, N, size)``.

    A lazy tensor read whole: skrl's files hold whole arrays.
    """
    size = math.prod(array.shape[2:])
    return np.ascontiguousarray(np.asarray(array).reshape(*array.shape[:2], size))


def _write_pt(arrays: dict[str, np.ndarray], path: Path, overwrite: bool) -> None:
    import torch

    tensors = {name: torch.from_numpy(array.copy()) for name, array in arrays.items()}
    with atomic_path(path, overwrite=overwrite) as tmp, guarded_file(tmp) as f:
        torch.save(tensors, cast(IO[bytes], f))  # it calls write, flush (and tell)


def _write_csv(arrays: dict[str, np.ndarray], valid: int, path: Path, overwrite: bool) -> None:
    names = list(arrays)
    views = [arrays[name].reshape(-1, arrays[name].shape[2]) for name in names]
    with atomic_write(path, "w", overwrite=overwrite) as f:
        writer = csv.writer(f)
        writer.writerow(
            [f"{name}.{i}" for name, v in zip(names, views, strict=True) for i in range(v.shape[1])]
        )
        for row in range(valid):
            writer.writerow([value for v in views for value in v[row].tolist()])
