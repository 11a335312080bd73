"""What a Minari dataset written from expcli holds, checked before anything is written.

Every storage (hdf5: ``minari.layout``; parquet and arrow: ``minari.arrow``) writes the same
episodes: one per run of steps of each env column (valid rows, oldest first) up to a
``terminated | truncated`` row. ``MinariPlan`` lists them and gives each episode's rows of
every stored array a bounded slice at a time, as Minari keeps them: observations one row
more than the steps (the final one from ``next_observations``), infos one row more too (the
first step's repeated as the reset info), actions, rewards and flags one row per step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import SchemaError
from expcli.formats.dataset import Dataset
from expcli.formats.header import encode_header
from expcli.formats.layout_keys import LOSSES_KEY
from expcli.formats.layouts._episodes import (
    column_rows,
    done_flags,
    episode_bounds,
    foreign_rows,
    user_metadata,
)
from expcli.formats.layouts._row_streams import picked_rows, rows_of
from expcli.formats.layouts.minari._spaces import StoredLeaf, stored_leaves

__all__ = ["FLAG_KEYS", "MinariPlan", "Parts", "write_plan"]

FLAG_KEYS = (("terminated", "terminations"), ("truncated", "truncations"))
"""expcli's flag tensors and the arrays Minari keeps them in."""

Parts = Iterator[tuple[int, np.ndarray]]
"""An episode's rows of one array, ``(offset, rows)``, a bounded slice at a time."""

_STANDARD = frozenset(
    {"observations", "next_observations", "actions", "rewards", "terminated", "truncated"}
)


@dataclass(frozen=True)
class MinariPlan:
    """The arrays of a Minari dataset to write, and where their rows come from.

    Attributes:
        dataset: The source.
        observations, actions: Their leaves (one, or one per leaf of a Dict or Tuple).
        extras: The other tensors, kept as infos under the names ``infos``.
        infos: Each extra's info name (``infos/x`` and ``x`` alike become ``x``).
        finals: Per observation leaf, its ``next_observations`` tensor, if there is one.
        flags: ``terminated`` and ``truncated``, a bool per row and env column.
        done: Their union: where episodes end.
        saved: The expcli metadata the dataset keeps.
    """

    dataset: Dataset
    observations: list[StoredLeaf]
    actions: list[StoredLeaf]
    extras: list[str]
    infos: list[str]
    finals: dict[str, Any]
    flags: dict[str, np.ndarray]
    done: np.ndarray
    saved: dict[str, Any]

    def losses(self) -> list[str]:
        """What reading the written dataset back will not give as it is in the dataset."""
        dataset, losses = self.dataset, []
        rows = column_rows(dataset)
        if dataset.num_envs > 1 or not np.array_equal(rows[0], np.arange(dataset.memory_size)):
            losses.append(
                f"the {dataset.num_envs} env column(s) and circular state (episodes are stored "
                "one after another, oldest first, and read back as one env column)"
            )
        renamed = [name for name in self.extras if not name.startswith("infos/")]
        if renamed:
            losses.append(
                f"the names of {', '.join(renamed)} (kept as infos: read as infos/<name>)"
            )
        if any(final is None for final in self.finals.values()):
            losses.append("no next_observations (read back with each episode's last one repeated)")
        flags = [flag for flag in self.flags if flag not in dataset.tensors]
        flags += [
            f for f in self.flags if f in dataset.tensors and dataset.tensors[f].shape[2:] != (1,)
        ]
        if flags:
            losses.append(f"{', '.join(flags)} as they are (one flag a step; absent: false)")
        return losses

    def record_losses(self) -> list[str]:
        """``losses()``, also listed in the metadata the dataset keeps (``LOSSES_KEY``)."""
        losses = self.losses()
        if losses:
            self.saved[LOSSES_KEY] = losses
        return losses

    def episodes(self) -> Iterator[tuple[int, np.ndarray]]:
        """Each episode's env column and rows, in the order they are written."""
        for j, rows in enumerate(column_rows(self.dataset)):
            for start, stop in episode_bounds(self.done[rows, j]):
                yield j, rows[start:stop]

    def observation_parts(self, leaf: StoredLeaf, picked: np.ndarray, column: int) -> Parts:
        """An episode's ``len(picked) + 1`` observations of one leaf."""
        values, final = self.dataset.tensors[leaf.name], self.finals[leaf.name]
        last = rows_of(values if final is None else final, picked[-1:])[:, column]
        parts = _leaf_parts(leaf.rows, values, picked, column)
        return chain(parts, [(len(picked), leaf.rows(last))])

    def action_parts(self, leaf: StoredLeaf, picked: np.ndarray, column: int) -> Parts:
        """An episode's actions of one leaf, one per step."""
        return _leaf_parts(leaf.rows, self.dataset.tensors[leaf.name], picked, column)

    def reward_parts(self, picked: np.ndarray, column: int) -> Parts:
        """An episode's rewards, one per step."""
        convert = partial(foreign_rows, "rewards")
        return _leaf_parts(convert, self.dataset.tensors["rewards"], picked, column)

    def info_parts(self, name: str, picked: np.ndarray, column: int) -> Parts:
        """An episode's ``len(picked) + 1`` rows of an extra: its first repeated as reset info."""
        convert = partial(foreign_rows, name)
        array = self.dataset.tensors[name]
        first = convert(rows_of(array, picked[:1])[:, column])
        parts = _leaf_parts(convert, array, picked, column)
        return chain([(0, first)], ((1 + at, rows) for at, rows in parts))


def write_plan(dataset: Dataset, path: Path) -> MinariPlan:
    """Check that ``dataset`` can be written as a Minari dataset at ``path``, and plan it.

    Raises:
        SchemaError: ``observations``, ``actions`` or ``rewards`` is missing, two tensors
            would be the same info, observations and next observations differ in shape, or
            the metadata is not JSON-serialisable.
    """
    tensors = dataset.tensors
    if "rewards" not in tensors:
        raise SchemaError("missing; the minari layout needs it", path=path, key="rewards")
    try:
        observations, actions = (stored_leaves(dataset, p) for p in ("observations", "actions"))
    except SchemaError as e:
        raise SchemaError(e.message, path=path, key=e.key) from e
    leaves = {leaf.name for leaf in (*observations, *actions)}
    leaves |= {"next_" + leaf.name for leaf in observations}
    extras = sorted(name for name in tensors if name not in _STANDARD and name not in leaves)
    infos = [name.removeprefix("infos/") for name in extras]
    for name, info in zip(extras, infos, strict=True):
        if infos.count(info) > 1:
            raise SchemaError(
                f"would be stored as the same Minari info {info!r} as another tensor",
                path=path,
                key=name,
            )
    finals = {leaf.name: tensors.get("next_" + leaf.name) for leaf in observations}
    for name, final in finals.items():
        feature = tensors[name].shape[2:]
        if final is not None and final.shape[2:] != feature:  # Minari keeps both in one array
            raise SchemaError(
                f"has feature shape {final.shape[2:]} and {name} {feature}; the minari "
                "layout stores both in one array, so they must agree",
                path=path,
                key="next_" + name,
            )
    done = done_flags(tensors, dataset.memory_size, dataset.num_envs)
    flags: dict[str, np.ndarray] = {  # a byte a row, read whole
        flag: np.asarray(np.asarray(tensors[flag]).reshape(*done.shape, -1).any(axis=2))
        if flag in tensors
        else np.zeros(done.shape, dtype=bool)
        for flag, _ in FLAG_KEYS
    }
    saved = user_metadata(dataset.metadata, "minari")
    if any(final is None for final in finals.values()):
        saved["final_observations"] = "repeated: the dataset had no next_observations"
    encode_header(saved, path)
    return MinariPlan(dataset, observations, actions, extras, infos, finals, flags, done, saved)


def _leaf_parts(
    convert: Callable[[np.ndarray], np.ndarray], array: Any, picked: np.ndarray, column: int
) -> Parts:
    """An episode's rows of one tensor in one env column, a bounded slice at a time."""
    for at, rows in picked_rows(array, picked, column):
        yield at, convert(rows)
