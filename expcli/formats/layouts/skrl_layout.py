"""skrl memory exports: what skrl's ``Memory.save`` writes, and nothing more.

skrl keeps every tensor shaped ``(memory_size, num_envs, size)`` (features flattened) and
saves the tensors as they lie, whatever the memory's fill: ``.pt`` is ``torch.save`` of a
dict name -> tensor (``Memory.load`` reads it back), ``.npz`` is ``np.savez`` of the same
arrays, ``.csv`` has a header ``name.i`` and one line per valid transition in (row, env)
order. The circular state and metadata are not recorded (skrl files have no place for
them): write expcli's own format to keep them. The reading side is the pt, npz and csv
readers, which take a file without expcli's metadata for a full skrl memory.

Every file is written a slice of rows at a time (the pt and npz writers of expcli's own
formats, without the metadata entry), so a source read lazily is never held whole.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np

from expcli.files.atomic import atomic_write
from expcli.formats.dataset import Dataset
from expcli.formats.lazy import LazyRows, row_chunks

__all__ = ["losses", "write"]


def write(dataset: Dataset, path: Path, *, overwrite: bool) -> None:
    """Write ``dataset`` as skrl would save it, in the format ``path``'s suffix names.

    ``.npz`` or ``.csv``; anything else is ``.pt``.
    """
    flat = {name: _flat(dataset.tensors[name]) for name in sorted(dataset.tensors)}
    suffix = path.suffix.lower()
    if suffix == ".csv":
        _write_csv(flat, len(dataset), path, overwrite)
        return
    from expcli.formats import npz_format, pt_format

    write_to = npz_format.write_to if suffix == ".npz" else pt_format.write_to
    with atomic_write(path, overwrite=overwrite) as f:
        write_to(Dataset(flat, dataset.state), f, None)


def losses(dataset: Dataset, storage: str) -> list[str]:
    """What a skrl file in ``storage`` (pt, npz or csv) does not keep of ``dataset``."""
    lost = []
    state = dataset.state
    if (state.memory_index, state.env_index, state.filled) != (0, 0, True):
        lost.append(
            "the circular state (skrl reads a full memory from row 0: a wrapped memory's "
            "order, and which rows were never written, are lost)"
        )
    if storage == "csv":
        if dataset.num_envs > 1:
            lost.append(
                f"the {dataset.num_envs} env columns (a CSV without sidecar reads back as "
                f"one; --num-envs {dataset.num_envs} restores them)"
            )
        changed = sorted(
            name for name, array in dataset.tensors.items() if array.dtype not in _CSV_DTYPES
        )
        if changed:
            lost.append(
                f"the dtypes of {', '.join(changed)} (CSV numbers read back as float32, "
                "int64 or bool)"
            )
    if dataset.metadata:
        lost.append("the metadata (env, spaces, seed, collector)")
    return lost


_CSV_DTYPES = (np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.bool_))


def _flat(array: Any) -> Any:
    """``(T, N, *f)`` as skrl's ``(T, N, size)``.

    A view of a numpy array, or ``LazyRows`` reshaping each slice as it is read.
    """
    shape = (*array.shape[:2], math.prod(array.shape[2:]))
    if not isinstance(array, LazyRows):
        return np.ascontiguousarray(np.asarray(array).reshape(shape))

    def read(start: int, stop: int) -> np.ndarray:  # take: no nested read ahead
        return array.take(np.arange(start, stop)).reshape(stop - start, *shape[1:])

    return LazyRows(shape, array.dtype, read, block_rows=array.block_rows)


def _write_csv(arrays: dict[str, Any], valid: int, path: Path, overwrite: bool) -> None:
    """The first ``valid`` transitions in (row, env) order, a slice of rows at a time."""
    names = list(arrays)
    widths = [arrays[name].shape[2] for name in names]
    num_envs = arrays[names[0]].shape[1] if names else 1
    rows = -(-valid // max(1, num_envs))
    with atomic_write(path, "w", overwrite=overwrite) as f:
        writer = csv.writer(f)
        writer.writerow(
            [f"{name}.{i}" for name, w in zip(names, widths, strict=True) for i in range(w)]
        )
        if not names:
            return
        widest = max(arrays.values(), key=lambda a: math.prod(a.shape[1:]) * a.dtype.itemsize)
        chunks = row_chunks(widest)
        for start in chunks:
            stop = min(start + chunks.step, rows)
            if start >= stop:
                break
            parts = [
                np.asarray(arrays[n][start:stop]).reshape(-1, w)
                for n, w in zip(names, widths, strict=True)
            ]
            count = min(len(parts[0]), valid - start * num_envs)
            for i in range(count):
                writer.writerow([value for part in parts for value in part[i].tolist()])
