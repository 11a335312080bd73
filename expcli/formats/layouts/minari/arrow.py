"""Minari datasets in parquet or arrow storage: ``data/<id>/part-0.<ext>`` per episode.

Minari's ``ArrowStorage`` (``minari.dataset._storages.arrow_storage``; ``data_format``
``"parquet"`` or ``"arrow"``, an Arrow IPC file) keeps each episode in its own folder
``data/<id>/``: one data file of ``T + 1`` rows (``T`` steps) and a ``metadata.json``
(``{"id", "total_steps"}``). ``observations`` holds all ``T + 1`` observations; ``actions``,
``rewards``, ``terminations`` and ``truncations`` are padded at the end by one row (zeros,
``None`` for Text), and ``infos`` (a struct) has one row per observation, the reset info
first. A Box, MultiDiscrete or MultiBinary sample is a flat ``fixed_size_list`` (its shape
is the space's), a Discrete one a scalar, a Dict or Tuple a struct of its parts (``"0"``,
``"1"``... for a Tuple), a Text one a string; an info array a flat ``fixed_size_list``
whose field metadata ``shape`` gives its shape, or a scalar. Minari reads an episode as one
record batch: its file must hold one row group (one record batch) of at most 131,072 rows.

``write`` makes such a folder from the episodes ``minari._plan`` lists (images raw:
``jpeg_encoding`` false), one episode in memory at a time. Minari keeps no next
observations: within every episode ``next_observations[t]`` must equal
``observations[t + 1]`` bit for bit, or nothing is written. What the layout cannot carry
(env columns and circular state, extras' names) is named in ``metadata.json`` (``expcli``
``lost_in_minari``) and in one warning.

``minari.layout.open_folder`` reads such a folder as it reads the hdf5 storage: one env
column, a step's next observation the episode's row ``t + 1``, a step's infos its row
``t + 1``; the rows of every tensor are decoded an episode at a time, observations and next
observations from one decoded leaf (``minari._columns``).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import SchemaError
from expcli.formats.authorship import Authorship
from expcli.formats.dataset import Dataset
from expcli.formats.layout_keys import LOSSES_KEY, warn_losses
from expcli.formats.layouts._write import atomic_folder
from expcli.formats.layouts.minari._columns import (
    ARROW_STORAGES,
    DATA_FILE,
    MAX_EPISODE_ROWS,
    flat_array,
)
from expcli.formats.layouts.minari._meta import dataset_id, minari_metadata
from expcli.formats.layouts.minari._plan import MinariPlan, write_plan
from expcli.formats.layouts.minari._spaces import StoredLeaf, expcli_leaf, minari_space
from expcli.formats.layouts.minari.layout import METADATA_FILE, is_minari_folder
from expcli.space_json import SEPARATOR

__all__ = ["ARROW_STORAGES", "LOSSES_KEY", "write"]


_VERSION = "0.5.3"
"""The Minari dataset version written: the first with parquet and arrow storage."""


def write(
    dataset: Dataset,
    path: Path,
    *,
    overwrite: bool,
    storage: str,
    authorship: Authorship | None = None,
) -> None:
    """Write a Minari dataset folder in ``storage`` (``parquet`` or ``arrow``).

    Its id and ``authorship`` as ``minari.layout.write`` writes them.

    Raises:
        SchemaError: As ``minari.layout.write``; also a ``next_observations`` that is not the
            next step's observation within an episode, or an episode longer than Minari
            reads (131,071 steps).
        OutputExistsError: ``path`` exists and ``overwrite`` is false.
        ConfigError: ``path`` is a file or a folder that is not a Minari dataset.
        MissingDependencyError: pyarrow is not installed.
    """
    from expcli.formats.parquet_format import pyarrow_parquet

    pq = pyarrow_parquet()
    dataset_id(path)  # refused before anything is written
    plan = write_plan(dataset, path)
    losses = plan.record_losses()
    spaces = {p: json.loads(minari_space(dataset, p)) for p in ("observations", "actions")}
    episode = steps = 0
    with atomic_folder(path, overwrite=overwrite, replaceable=is_minari_folder) as tmp:
        data = tmp / "data"
        data.mkdir()
        for j, picked in plan.episodes():
            if len(picked) + 1 > MAX_EPISODE_ROWS:
                raise SchemaError(
                    f"an episode of {len(picked):,} steps (env column {j}); Minari reads at "
                    f"most {MAX_EPISODE_ROWS - 1:,} steps an episode in {storage} storage",
                    path=path,
                )
            table = _episode_table(plan, spaces, picked, j, path)
            folder = data / str(episode)
            folder.mkdir()
            target = folder / f"{DATA_FILE}.{storage}"
            if storage == "parquet":
                pq.write_table(table, target, row_group_size=len(picked) + 1, use_dictionary=False)
            else:
                _write_ipc(table, target)
            with open(folder / METADATA_FILE, "w", encoding="utf-8") as f:
                json.dump({"id": episode, "total_steps": len(picked)}, f)
            episode += 1
            steps += len(picked)
        meta = minari_metadata(dataset, path, plan.saved, authorship)
        size = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
        meta.update(
            {
                "data_format": storage,
                "minari_version": _VERSION,
                "total_episodes": episode,
                "total_steps": steps,
                "dataset_size": round(size / 1e6, 1),
            }
        )
        with open(data / METADATA_FILE, "w", encoding="utf-8") as f:
            json.dump(meta, f)
    warn_losses(path, "minari", losses)


def _episode_table(
    plan: MinariPlan, spaces: dict[str, Any], picked: np.ndarray, column: int, path: Path
) -> Any:
    """One episode as Minari's ``update_episodes`` lays it out: ``len(picked) + 1`` rows."""
    import pyarrow as pa

    steps = len(picked)
    columns: dict[str, Any] = {}
    tree: dict[str, Any] = {}
    for leaf in plan.observations:
        rows = _joined(plan.observation_parts(leaf, picked, column))
        _check_next(plan, leaf, rows, picked, column, path)
        _place(tree, leaf, _leaf_array(_subspace(spaces["observations"], leaf), rows, 0))
    columns["observations"] = _struct(tree["observations"])
    tree = {}
    for leaf in plan.actions:
        rows = _joined(plan.action_parts(leaf, picked, column))
        _place(tree, leaf, _leaf_array(_subspace(spaces["actions"], leaf), rows, 1))
    columns["actions"] = _struct(tree["actions"])
    rewards = _joined(plan.reward_parts(picked, column))
    columns["rewards"] = _numbers(rewards, 1)
    for flag, key in (("terminated", "terminations"), ("truncated", "truncations")):
        columns[key] = _numbers(plan.flags[flag][picked, column], 1)
    if plan.extras:
        arrays, fields = [], []
        for name, info in zip(plan.extras, plan.infos, strict=True):
            rows = _joined(plan.info_parts(name, picked, column))
            array = _numbers(rows, 0)
            shape = ",".join(str(d) for d in rows.shape[1:])
            fields.append(pa.field(info, array.type, metadata={"shape": shape} if shape else None))
            arrays.append(array)
        columns["infos"] = pa.StructArray.from_arrays(arrays, fields=fields)
    assert all(len(array) == steps + 1 for array in columns.values())
    return pa.table(columns)


def _joined(parts: Any) -> np.ndarray:
    return np.concatenate([rows for _, rows in parts])


def _check_next(
    plan: MinariPlan,
    leaf: StoredLeaf,
    rows: np.ndarray,
    picked: np.ndarray,
    column: int,
    path: Path,
) -> None:
    """Refuse an episode whose next observations are not its next steps' observations.

    ``rows`` are the episode's observations as stored (the final one from
    ``next_observations``); compared bit for bit (NaN payloads and -0.0 included).
    """
    final = plan.finals[leaf.name]
    if final is None or len(picked) < 2:
        return
    from expcli.formats.layouts._row_streams import rows_of

    after = leaf.rows(rows_of(final, picked[:-1])[:, column])
    stored = rows[1:-1]
    same = _row_bytes(after) == _row_bytes(stored)
    if bool(same.all()):
        return
    row = int(picked[int(np.argmin(same.all(axis=1)))])
    raise SchemaError(
        f"row {row} of env column {column} differs from the next step's {leaf.name}; the "
        "minari layout keeps one observation sequence an episode (next_observations[t] = "
        "observations[t + 1]), so writing it would lose data (write --layout expcli instead)",
        path=path,
        key="next_" + leaf.name,
    )


def _row_bytes(rows: np.ndarray) -> np.ndarray:
    flat = np.ascontiguousarray(rows).reshape(len(rows), -1)
    return flat.view(np.uint8).reshape(len(rows), -1) if flat.size else flat


def _subspace(space: Any, leaf: StoredLeaf) -> dict[str, Any]:
    node = space
    for key in expcli_leaf(leaf.key).split(SEPARATOR)[1:]:
        parts = node.get("subspaces")
        node = parts[int(key)] if isinstance(parts, list) else parts[key]
    return dict(node)


def _place(tree: dict[str, Any], leaf: StoredLeaf, array: Any) -> None:
    """Put a leaf's array where its path says: ``observations/a/0`` under a and 0."""
    *parents, last = expcli_leaf(leaf.key).split(SEPARATOR)
    node = tree
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = array


def _struct(node: Any) -> Any:
    """A tree of arrays as nested struct arrays (a leaf stays as it is)."""
    import pyarrow as pa

    if not isinstance(node, dict):
        return node
    names = list(node)
    return pa.StructArray.from_arrays([_struct(node[k]) for k in names], names=names)


def _leaf_array(space: dict[str, Any], rows: np.ndarray, pad: int) -> Any:
    """A leaf's rows as Minari's ``_encode_space`` stores them, ``pad`` rows added."""
    import pyarrow as pa

    kind = space.get("type")
    if kind == "Text":
        return pa.array([*rows.tolist(), *([None] * pad)], pa.string())
    if kind == "Discrete":
        return _numbers(rows.reshape(len(rows)), pad)
    return _numbers(rows.reshape(len(rows), -1), pad)


def _numbers(rows: np.ndarray, pad: int) -> Any:
    """Rows ``(n,)`` as a plain column, ``(n, *f)`` as a flat fixed-size list; zeros padded."""
    import pyarrow as pa

    flat = rows.reshape(len(rows), -1) if rows.ndim > 1 else rows
    if pad:
        flat = np.concatenate([flat, np.zeros((pad, *flat.shape[1:]), flat.dtype)])
    values = flat_array(np.ascontiguousarray(flat, flat.dtype.newbyteorder("=")).reshape(-1))
    if rows.ndim == 1:
        return values
    return pa.FixedSizeListArray.from_arrays(values, math.prod(rows.shape[1:]))


def _write_ipc(table: Any, target: Path) -> None:
    """An Arrow IPC file of one record batch, as ``pyarrow.dataset.write_dataset`` makes."""
    import pyarrow as pa

    with pa.OSFile(os.fspath(target), "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
        out.write_table(table, max_chunksize=max(1, table.num_rows))
