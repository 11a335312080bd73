"""Next observations left out of a LeRobot folder's features, kept apart (frames once).

A trainer reads ``next.observation.*`` features as more frames: image observations twice
over. Where a next observation is the next row's observation but in a few cells (episode
ends, the newest row: what ``expcli.formats.frames`` calls *kept*), the writer leaves the
feature out and stores only those cells, in ``meta/expcli-next/<tensor>.parquet`` (columns
``cell``, the flat ``t * N + n``, and ``value``, a LeRobot feature column: images as PNG),
one row group a slice; the sidecar header says so in its ``frames`` object, and the reader
rebuilds the tensor as ``frames.derive`` does. By default (``next_observations`` not
given) that is done for tensors frames once already derived (read from a file that stores
them once); ``--no-next-observations`` does it for every next observation it can (its
observations of the same dtype and shape), ``--next-observations`` for none.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError
from expcli.formats.dataset import Dataset
from expcli.formats.frames import PREFIX, DerivedRows, encode
from expcli.formats.layouts.lerobot._features import Feature, feature_column, feature_values
from expcli.formats.layouts.lerobot.settings import next_observations_of
from expcli.formats.lazy import SLICE_BYTES, LazyRows
from expcli.spec import FRAMES_SCHEMA, FramesForm

__all__ = ["FOLDER", "apart", "kept_feature", "mark", "read_kept", "write_kept"]

FOLDER = "meta/expcli-next"
"""Where the kept cells of the next observations left out lie, a Parquet file a tensor."""


def apart(dataset: Dataset, path: Path) -> dict[str, tuple[np.ndarray, Any]]:
    """The next-observation tensors to leave out, each with its kept cells and their values.

    ``(cells, kept)``: flat indexes (sorted int64) and a ``(K, *feature)`` tensor.
    """
    choice = next_observations_of(dataset.metadata)
    if choice is True:
        return {}
    tensors = dataset.tensors
    out: dict[str, tuple[np.ndarray, Any]] = {}
    for name, following in tensors.items():
        if name != "next_observations" and not name.startswith("next_observations/"):
            continue
        source = tensors.get(name.removeprefix("next_"))
        if source is None:
            continue
        if isinstance(following, DerivedRows) and following.observations is source:
            out[name] = (np.asarray(following.cells, np.int64), following.kept)
        elif choice is False:
            members, header = encode(
                {name: following, name.removeprefix("next_"): source}, {}, FramesForm.ONCE, path
            )
            if name in header.get("frames", {}):
                out[name] = (members[f"{PREFIX}{name}/cells"], members[f"{PREFIX}{name}/kept"])
    return out


def kept_feature(feature: Feature) -> Feature:
    """How a tensor's kept cells are stored: images (video ones too) as PNG, else as they are."""
    return dataclasses.replace(feature, image=feature.image or feature.video, video=False)


def mark(header: dict[str, Any], stored: dict[str, tuple[np.ndarray, Any]]) -> None:
    """Say in ``header`` (the sidecar's) which tensors are stored once, as ``frames`` does."""
    if stored:
        header["schema"] = FRAMES_SCHEMA
        header["frames"] = {
            name: {"form": "sparse", "kept": len(c)} for name, (c, _) in stored.items()
        }


def write_kept(root: Path, feature: Feature, cells: np.ndarray, kept: Any, pq: Any) -> None:
    """``meta/expcli-next/<tensor>.parquet``: the kept cells, a slice of them a row group."""
    import pyarrow as pa

    schema = pa.schema([("cell", pa.int64()), ("value", feature.arrow_type())])
    folder = root / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    cell_bytes = max(1, math.prod(feature.spec.shape) * np.dtype(feature.spec.dtype).itemsize)
    step = max(1, SLICE_BYTES // cell_bytes)
    with pq.ParquetWriter(folder / _file(feature.spec.name), schema, compression="snappy") as out:
        for at in range(0, len(cells), step):
            values = np.asarray(kept[at : at + step])
            column = feature_column(feature, values.reshape(len(values), *feature.spec.shape))
            part = pa.Table.from_arrays(
                [pa.array(cells[at : at + step], pa.int64()), column], schema=schema
            )
            out.write_table(part, row_group_size=max(1, part.num_rows))
        if not len(cells):
            out.write_table(schema.empty_table())


def read_kept(root: Path, feature: Feature, count: int) -> dict[str, Any]:
    """The two members ``frames.derive`` takes for a tensor written apart (its kept cells).

    Raises:
        FormatError: The file is missing, damaged, or holds another number of cells.
    """
    import pyarrow.parquet as pq

    name = feature.spec.name
    path = root / FOLDER / _file(name)
    try:
        opened = pq.ParquetFile(path)
        cells = np.asarray(opened.read(columns=["cell"]).column(0).to_numpy(), np.int64)
    except (OSError, ValueError, KeyError) as e:  # pyarrow's errors are OSError/ValueError
        raise FormatError(f"cannot read the kept next observations: {e}", path=path) from e
    if len(cells) != count:
        raise FormatError(f"holds {len(cells)} cells; the sidecar says {count}", path=path)
    starts = np.cumsum(
        [0] + [opened.metadata.row_group(i).num_rows for i in range(opened.num_row_groups)]
    )

    def read(start: int, stop: int) -> np.ndarray:
        first = int(np.searchsorted(starts, start, side="right")) - 1
        last = int(np.searchsorted(starts, stop, side="left"))
        groups = list(range(max(0, first), max(first + 1, last)))
        table = opened.read_row_groups(groups, columns=["value"])
        values = feature_values(feature, table.column(0), f"{FOLDER}/{_file(name)}")
        offset = start - int(starts[groups[0]])
        return values[offset : offset + stop - start]

    kept = LazyRows((count, *feature.spec.shape), np.dtype(feature.spec.dtype), read)
    return {f"{PREFIX}{name}/kept": kept, f"{PREFIX}{name}/cells": cells}


def _file(tensor: str) -> str:
    return tensor.replace("/", ".") + ".parquet"
