"""Gathering a training batch once per tensor, straight into the arrays it is handed in.

A batch of frame stacks is where sampling spends its time: 256 four-frame stacks of Pong
observations and next observations move 200 MB. Here each tensor is gathered once, into an
output allocated once (by an ``Empty`` that the caller may give: page-locked memory from
torch, for ``non_blocking`` copies to a GPU):

* frame stacks walk back from each drawn step to the frames before it in its episode
  (``frame_rows``: the first frame repeats at an episode's start), and read those frames
  in one gather;
* a ``next_<name>`` stack is the ``<name>`` stack shifted by one step plus ``next_<name>`` at
  the step drawn, so its first frames are copied from the stack just gathered rather than
  read again;
* big rows of a mapped file (frames) are read with ``preadv`` straight into their slot of the
  output: no mapping to fault in and let go of, no copy in between; small rows are taken
  from the mapping with ``numpy.take(..., out=...)``; tensors left on disk read only the
  rows drawn (``row_gather``).

The batch is numpy arrays, so sampling without torch (``expcli sample``) gathers the same
bytes; torch is imported only to name devices and to allocate page-locked outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli.errors import ConfigError
from expcli.formats.row_gather import gather_flat, take_flat

if TYPE_CHECKING:
    import torch

__all__ = [
    "Empty",
    "frame_rows",
    "gather_arrays",
    "gather_into",
    "is_observation",
    "pinned_empty",
    "stack_base",
]

Empty = Callable[[tuple[int, ...], np.dtype[Any]], np.ndarray]
"""Allocates an output array of a shape and dtype (``numpy.empty``'s arguments)."""


def is_observation(name: str) -> bool:
    """Whether frame stacking stacks ``name``: observations, next ones, and their leaves."""
    return name.removeprefix("next_").partition("/")[0] == "observations"


def stack_base(name: str) -> str | None:
    """The tensor whose stack a ``next_`` tensor's stack shifts, or None for other names.

    ``next_observations`` -> ``observations``, ``next_observations/rgb`` -> ``observations/rgb``.
    """
    base = name.removeprefix("next_")
    return base if base != name else None


def frame_rows(
    index: np.ndarray,
    stack_num: int,
    flags: Sequence[np.ndarray],
    oldest: np.ndarray,
    memory_size: int,
    num_envs: int,
) -> np.ndarray:
    """Flat indexes of the frames stacked at each of ``index``: ``(*index.shape, stack_num)``.

    Position ``-1`` is the step itself; each earlier one is the step before in the same env
    column, unless the step is its episode's first (a done flag on the row before, or the
    column's oldest row), where the first frame repeats (tianshou's and EnvPool's stacks).

    Args:
        index: Flat indexes ``t * num_envs + env``, any shape.
        stack_num: Frames per stack.
        flags: The episode flags (``terminated``, ``truncated``) as ``(T * N, k)`` arrays.
        oldest: Each env column's oldest row.
        memory_size: ``T``.
        num_envs: ``N``.
    """
    flat = np.asarray(index, dtype=np.int64).reshape(-1)
    out = np.empty((len(flat), stack_num), dtype=np.int64)
    row, env = np.divmod(flat, num_envs)
    out[:, -1] = flat
    first = oldest[env]
    for k in range(stack_num - 2, -1, -1):
        before = np.where(row == 0, memory_size - 1, row - 1)
        at = before * num_envs + env
        stop = row == first
        for flag in flags:
            stop |= flag[at].any(axis=-1)
        row = np.where(stop, row, before)
        out[:, k] = row * num_envs + env
    return out.reshape(*np.shape(index), stack_num)


RELEASE_ROWS = 32
"""Transitions gathered from a mapped file between two ``release`` calls."""


def gather_into(
    array: Any,
    index: np.ndarray,
    out: np.ndarray,
    num_envs: int,
    release: Callable[[], None] | None = None,
) -> None:
    """Transitions at flat ``index`` of a tensor into ``out``, ``(*index.shape, *feature)``.

    ``array``: a numpy array flat, ``(T * N, *feature)``, or a tensor left on disk,
    ``(T, N, *feature)``. ``out`` may be a slice of a bigger output. ``release`` lets go
    of the pages a mapped ``array`` brought in: it is called every ``RELEASE_ROWS``
    transitions, as the kernel maps a whole page-cache folio (up to megabytes) per row
    touched.
    """
    flat = index.reshape(-1)
    feature = out.shape[index.ndim :]
    target = out.reshape(len(flat), *feature)
    step = len(flat) if release is None else RELEASE_ROWS
    for start in range(0, len(flat), max(1, step)):
        part = slice(start, start + step)
        _gather_part(array, flat[part], target[part], num_envs)
        if release is not None:
            release()
    if not np.may_share_memory(target, out):
        out[...] = target.reshape(out.shape)  # reshape had to copy (a strided slice)


def _gather_part(array: Any, flat: np.ndarray, target: np.ndarray, num_envs: int) -> None:
    feature = target.shape[1:]
    if _in_place(array):
        source = array.reshape(-1, *feature)
        np.take(source, flat, axis=0, out=target, mode="clip")  # "clip": not buffered
    elif isinstance(array, np.ndarray):  # mapped at an odd offset: numpy would copy it whole
        target[...] = take_flat(array.reshape(-1, *feature), flat)
    elif callable(getattr(array, "take_flat", None)):  # a folder: each shard's transitions
        array.take_flat(flat, num_envs, target)
    else:
        target[...] = gather_flat(array, flat, num_envs)


def torch_device(spec: str | torch.device) -> torch.device:
    """``spec`` as a torch device.

    Raises:
        ConfigError: Not a device torch knows, or a CUDA device where there is none.
    """
    import torch

    try:
        device = torch.device(spec)
    except (RuntimeError, TypeError) as e:
        raise ConfigError(f"not a device: {spec!r} ({e})") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {spec!r} asked for, but torch sees no CUDA device here")
    return device


def cuda_available() -> bool:
    """Whether torch can use a CUDA device here (pinned memory needs one)."""
    import torch

    return torch.cuda.is_available()


def pinned_empty(tensors: dict[int, torch.Tensor]) -> Empty:
    """An ``Empty`` of page-locked torch tensors' arrays; ``tensors`` maps ``id(array)`` to each.

    The caller hands the batch on as those tensors (not ``torch.from_numpy`` of their
    arrays), which torch knows to be pinned.
    """
    import torch

    def empty(shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
        like = torch.from_numpy(np.empty(0, dtype)).dtype
        tensor = torch.empty(shape, dtype=like, pin_memory=True)
        array = tensor.numpy()
        tensors[id(array)] = tensor
        return array

    return empty


def gather_arrays(
    arrays: Mapping[str, Any],
    names: Sequence[str],
    index: np.ndarray,
    num_envs: int,
    *,
    stack_num: int = 1,
    stacked: Callable[[str], bool] = lambda name: False,
    frames: Callable[[], np.ndarray] | None = None,
    empty: Empty | None = None,
    releases: Mapping[str, Callable[[], None]] | None = None,
) -> dict[str, np.ndarray]:
    """The named tensors at flat ``index``, each gathered once into its own new array.

    ``empty``: allocates every output (``pinned_empty``); by default numpy does, which asks
    Linux for huge pages for big arrays: a batch of frames written into fresh memory then
    faults a page per 2 MiB, not per 4 KiB (about 4x faster for a 100 MB batch here than
    ``torch.empty``).

    ``releases``: for tensors that are mapped files, what lets go of the pages a gather
    brought in (``gather_into``).

    ``arrays``: numpy arrays flat, ``(T * N, *feature)``; tensors left on disk as they are,
    ``(T, N, *feature)``.

    Names that ``stacked`` picks come as ``(*index.shape, stack_num, *feature)`` frame
    stacks, whose rows ``frames()`` gives (``frame_rows``), computed once per batch.
    """
    let_go = (releases or {}).get
    allocate: Empty = np.empty if empty is None else empty
    result: dict[str, np.ndarray] = {}
    frame_index: np.ndarray | None = None
    stacks: dict[str, np.ndarray] = {}
    if stack_num == 1 and empty is None and not releases:  # the short way, every tensor
        for name in names:
            array = arrays[name]
            if _in_place(array):
                result[name] = array.take(index, axis=0)
            else:
                out = allocate((*index.shape, *_feature(array)), array.dtype)
                gather_into(array, index, out, num_envs)
                result[name] = out
        return result
    order = sorted(names, key=lambda n: stack_base(n) is not None)  # bases before next_
    for name in order:
        array = arrays[name]
        plain = stack_num == 1 or not stacked(name)
        if plain and empty is None and let_go(name) is None and _in_place(array):
            result[name] = array.take(index, axis=0)
            continue
        feature = _feature(array)
        if plain:
            out = allocate((*index.shape, *feature), array.dtype)
            gather_into(array, index, out, num_envs, let_go(name))
            result[name] = out
            continue
        if frame_index is None:
            assert frames is not None
            frame_index = frames()
        out = allocate((*index.shape, stack_num, *feature), array.dtype)
        base = stack_base(name)
        lead = (slice(None),) * index.ndim
        if base is not None and base in arrays:
            earlier = stacks.get(base)
            if earlier is not None:  # the base's stack, one step on
                out[(*lead, slice(0, -1))] = earlier[(*lead, slice(1, None))]
            else:
                gather_into(
                    arrays[base],
                    frame_index[..., 1:],
                    out[(*lead, slice(0, -1))],
                    num_envs,
                    let_go(base),
                )
            last: tuple[Any, ...] = (*lead, -1)
            gather_into(array, index, out[last], num_envs, let_go(name))
        else:
            gather_into(array, frame_index, out, num_envs, let_go(name))
            stacks[name] = out
        result[name] = out
    return {name: result[name] for name in names}


def _feature(array: Any) -> tuple[int, ...]:
    """The feature shape: a numpy array is flat, ``(T * N, *feature)``; others are not."""
    return tuple(array.shape[1:] if isinstance(array, np.ndarray) else array.shape[2:])


def _in_place(array: Any) -> bool:
    """Whether numpy's own ``take`` reads ``array`` without copying it first."""
    return isinstance(array, np.ndarray) and (array.flags.aligned or array.dtype.itemsize == 1)
