"""The episodes of a Minari ``main_data.hdf5`` as expcli's tensors, left in the file.

Reading a Minari file first scans its episodes: every dataset's shape and dtype is checked
(one row per step, observations one more, the same features in every episode) without
reading its rows, except the flags (a byte a step: the episode ends and seams need them),
and the leaves whose values must be checked (Text strings, uint64). Each tensor is then a
``ConcatRows`` over the episodes, an episode's rows read from its dataset only when a
slice or a gather touches them, so that ``convert``, ``inspect`` and ``sample`` hold a few
slices whatever the file's size. ``np.asarray`` of a tensor reads it whole: the same
values as concatenating the episodes' arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError, SchemaError
from expcli.formats._hdf5_lazy import read_dataset_rows
from expcli.formats.concat_rows import ConcatRows
from expcli.formats.layouts._episodes import load_array, native, one_column
from expcli.formats.layouts.minari._spaces import expcli_leaf, read_leaf
from expcli.formats.row_gather import take_rows

__all__ = ["EpisodeScan"]

_STEP_KEYS = ("actions", "rewards", "terminations", "truncations")
_FLAGS = (("terminations", "terminated"), ("truncations", "truncated"))


@dataclass
class _Column:
    """Where one tensor's rows lie in every episode.

    The dataset ``where`` under the episode's group, from row ``offsets[k]`` on
    (observations 0, next observations 1, infos 0 or 1: their reset row dropped).
    """

    where: str
    text: int | None
    feature: tuple[int, ...]
    dtype: np.dtype[Any]
    offsets: list[int] = field(default_factory=list)


class EpisodeScan:
    """The episodes ``keys`` (groups of ``h5``, in order) checked and described.

    Raises:
        FormatError: An episode is not a group, lacks a key, holds JPEG-encoded images or
            data that is not numbers.
        SchemaError: An episode's arrays disagree in length, or episodes in features.
    """

    def __init__(
        self,
        h5: Any,
        path: Path,
        keys: list[str],
        image_shape: tuple[int, ...] | None,
        texts: dict[str, int],
    ) -> None:
        import h5py

        self.h5, self.path, self.keys = h5, path, keys
        self.lengths: list[int] = []
        self.columns: dict[str, _Column] = {}
        self.flags: dict[str, list[np.ndarray]] = {"terminated": [], "truncated": []}
        self.skipped: list[str] = []
        infos: dict[str, _Column] = {}
        for key in keys:
            group = h5[key]
            if not isinstance(group, h5py.Group):
                raise FormatError("is not a group; expected an episode", path=path, key=key)
            steps = self._episode(group, key, image_shape, texts)
            self._infos(group, key, steps, infos)
            self.lengths.append(steps)
        for name, column in infos.items():
            if len(column.offsets) == len(keys):
                self.columns[name] = column
            else:
                self.skipped.append(f"{name} (not in every episode)")
        for name, column in self.columns.items():
            if len(column.offsets) != len(keys):
                raise SchemaError("missing from some episodes", path=path, key=name)

    def tensors(self) -> dict[str, Any]:
        """Every tensor ``(T, 1, *feature)``, the flags as arrays.

        The others are ``ConcatRows`` over the episodes: the file must stay open while
        they are read.
        """
        tensors: dict[str, Any] = {}
        for name, column in self.columns.items():
            tensors[name] = ConcatRows(
                partial(_EpisodeRows, self, column),
                self.lengths,
                (1, *(column.feature or (1,))),
                column.dtype,
            )
            if name == "rewards":  # as a whole read orders them: the flags after the rewards
                for flag, pieces in self.flags.items():
                    tensors[flag] = one_column(np.concatenate(pieces))
        return tensors

    def _episode(
        self, group: Any, key: str, image_shape: tuple[int, ...] | None, texts: dict[str, int]
    ) -> int:
        """Check and describe one episode's step data; return its number of steps."""
        leaves = {name: self._leaves(group, name, key) for name in ("observations", *_STEP_KEYS)}
        rewards = self._single(leaves["rewards"], f"{key}/rewards")
        steps = int(rewards.shape[0])
        for name in _STEP_KEYS:
            for sub, dataset in leaves[name].items():
                if _rows(dataset) != steps:
                    raise SchemaError(
                        f"has {_rows(dataset)} rows; expected {steps}, one per step (as rewards)",
                        path=self.path,
                        key=f"{key}/{name}{sub}",
                    )
        for sub, dataset in leaves["observations"].items():
            where = f"{key}/observations{sub}"
            if _rows(dataset) != steps + 1:
                raise SchemaError(
                    f"has {_rows(dataset)} rows for {steps} actions; expected {steps + 1} "
                    f"(one more: the observation after the last step)",
                    path=self.path,
                    key=where,
                )
            if image_shape is not None and tuple(dataset.shape[1:]) != image_shape:
                raise FormatError(
                    "holds JPEG-encoded images (jpeg_encoding); decoding them is not supported",
                    path=self.path,
                    key=where,
                )
            text = texts.get(f"observations{sub}")
            leaf = expcli_leaf(sub)
            self._add(f"observations{leaf}", f"observations{sub}", dataset, where, text, 0)
            self._add(f"next_observations{leaf}", f"observations{sub}", dataset, where, text, 1)
        for sub, dataset in leaves["actions"].items():
            text = texts.get(f"actions{sub}")
            where = f"{key}/actions{sub}"
            self._add(f"actions{expcli_leaf(sub)}", f"actions{sub}", dataset, where, text, 0)
        self._add("rewards", "rewards", rewards, f"{key}/rewards", None, 0)
        for name, flag in _FLAGS:
            where = f"{key}/{name}"
            values = load_array(self._single(leaves[name], where), self.path, where)
            self.flags[flag].append(np.asarray(values.reshape(steps, -1).astype(bool).any(axis=1)))
        return steps

    def _infos(self, group: Any, key: str, steps: int, infos: dict[str, _Column]) -> None:
        """Describe one episode's infos (one row per step: the reset info dropped)."""
        import h5py

        info = group.get("infos")
        if not isinstance(info, h5py.Group):
            return

        def visit(name: str, obj: Any) -> None:
            if not isinstance(obj, h5py.Dataset):
                return
            where = f"{key}/infos/{name}"
            try:
                dtype = _checked_dtype(obj, self.path, where, None)
            except (FormatError, SchemaError):
                self.skipped.append(f"infos/{name}")
                return
            if not obj.shape or _rows(obj) not in (steps, steps + 1):
                raise SchemaError(
                    f"has shape {obj.shape}; expected {steps + 1} rows (the reset info, then "
                    f"one per step) or {steps}",
                    path=self.path,
                    key=where,
                )
            column = infos.get(f"infos/{name}")
            if column is None:
                column = infos[f"infos/{name}"] = _Column(
                    f"infos/{name}", None, tuple(obj.shape[1:]), dtype
                )
            self._join(column, f"infos/{name}", obj, dtype)
            column.offsets.append(_rows(obj) - steps)

        info.visititems(visit)

    def _add(
        self, name: str, where: str, dataset: Any, key: str, text: int | None, offset: int
    ) -> None:
        dtype = _checked_dtype(dataset, self.path, key, text)
        column = self.columns.get(name)
        if column is None:
            feature = (text,) if text is not None else tuple(dataset.shape[1:])
            column = self.columns[name] = _Column(where, text, feature, dtype)
        self._join(column, name, dataset, dtype, text)
        column.offsets.append(offset)

    def _join(
        self,
        column: _Column,
        name: str,
        dataset: Any,
        dtype: np.dtype[Any],
        text: int | None = None,
    ) -> None:
        """Check that an episode's dataset has the features of the others.

        The dtype is widened as concatenating their arrays would.
        """
        feature = (text,) if text is not None else tuple(dataset.shape[1:])
        if feature != column.feature:
            shapes = sorted({feature, column.feature})
            raise SchemaError(
                f"feature shapes differ between episodes: {shapes}", path=self.path, key=name
            )
        column.dtype = np.result_type(column.dtype, dtype)

    def _leaves(self, group: Any, name: str, key: str) -> dict[str, Any]:
        """The datasets under ``name``.

        ``{"": dataset}``, or ``{"/a": ..., "/b/c": ...}`` for a Dict or Tuple space stored
        as a group.
        """
        import h5py

        obj = group.get(name)
        if obj is None:
            raise FormatError("missing from the episode", path=self.path, key=f"{key}/{name}")
        if isinstance(obj, h5py.Dataset):
            if not obj.shape:
                raise SchemaError(
                    "is a scalar; expected one row per step", path=self.path, key=f"{key}/{name}"
                )
            return {"": obj}
        leaves: dict[str, Any] = {}

        def visit(sub: str, member: Any) -> None:
            if isinstance(member, h5py.Dataset):
                if not member.shape:
                    raise SchemaError(
                        "is a scalar; expected one row per step",
                        path=self.path,
                        key=f"{key}/{name}/{sub}",
                    )
                leaves[f"/{sub}"] = member

        obj.visititems(visit)
        if not leaves:
            raise FormatError(
                "is an empty group; expected arrays", path=self.path, key=f"{key}/{name}"
            )
        return leaves

    def _single(self, leaves: dict[str, Any], key: str) -> Any:
        if set(leaves) != {""}:
            raise FormatError("is a group; expected one array", path=self.path, key=key)
        return leaves[""]


class _EpisodeRows:
    """One episode's rows of one tensor, ``(steps, 1, *feature)``, read when asked for."""

    def __init__(self, scan: EpisodeScan, column: _Column, episode: int) -> None:
        self._scan, self._column, self._episode = scan, column, episode
        self._length = scan.lengths[episode]

    @property
    def shape(self) -> tuple[int, ...]:
        """``(steps, 1, *feature)``: what cell gathers (``row_gather.gather_flat``) read."""
        return (self._length, 1, *(self._column.feature or (1,)))

    @property
    def dtype(self) -> np.dtype[Any]:
        """The rows' dtype, as read."""
        return self._column.dtype

    def __getitem__(self, key: slice) -> np.ndarray:
        start, stop, _ = key.indices(self._length)
        return self._read(start, max(start, stop))

    def take(self, index: np.ndarray) -> np.ndarray:
        return take_rows(self._read, self.shape, self.dtype, index)

    def _read(self, start: int, stop: int) -> np.ndarray:
        scan, column = self._scan, self._column
        where = f"{scan.keys[self._episode]}/{column.where}"
        first = column.offsets[self._episode] + start
        last = first + (stop - start)
        dataset = scan.h5[where]
        if column.text is not None:
            rows = read_leaf(dataset, scan.path, where, column.text, slice(first, last))
        else:
            rows = native(
                read_dataset_rows(dataset, scan.path, where, first, last), scan.path, where
            )
        return one_column(rows).astype(column.dtype, copy=False)


def _rows(dataset: Any) -> int:
    return int(dataset.shape[0]) if dataset.shape else 0


def _checked_dtype(dataset: Any, path: Path, key: str, text: int | None) -> np.dtype[Any]:
    """The schema dtype of a dataset's rows.

    Text leaves and uint64 datasets are read here (one episode's), as their values decide
    whether they can be read at all.

    Raises:
        FormatError: Strings (outside Text leaves), objects or unreadable data.
        SchemaError: A numeric dtype without a lossless schema counterpart.
    """
    if text is not None:
        return read_leaf(dataset, path, key, text).dtype
    try:
        stored = dataset.dtype
    except (OSError, ValueError, TypeError, KeyError, RuntimeError):
        return load_array(dataset, path, key).dtype  # says what is wrong with it
    if stored.kind == "u" and stored.itemsize == 8:
        return load_array(dataset, path, key).dtype
    return native(np.empty(0, stored), path, key).dtype
