"""Streaming a collect run to a sharded folder: a staging memory flushed shard by shard.

The run's memory is a fixed staging area of one shard's rows. When its write head wraps
(``Memory.on_wrap``), its tensors are swapped with a spare set (``Memory.swap_tensors``,
no copy) and written as the next shard by a background thread while the envs go on
stepping into the spares (double buffering: memory holds two shards, whatever the run's
length). Tensors numpy cannot view (another device), and every array of a memory that is
numpy alone (``Memory.holds_torch`` false: a collect that never needs torch), are copied to
the spares instead: one copy of each shard's rows, a memory-bandwidth cost far below the
env steps that filled them.
``finish`` writes the rows since the last wrap as a last shard: the end of the run,
Ctrl-C or an env's failure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli.errors import ConfigError
from expcli.formats.dataset import Dataset
from expcli.formats.rows import WritePlan
from expcli.formats.sharded import Manifest, ShardWriter, find_shard_format, new_manifest

if TYPE_CHECKING:
    from expcli.memory import Memory

__all__ = ["DEFAULT_SHARD_SIZE", "ShardSink", "parse_shard_size"]

DEFAULT_SHARD_SIZE = "128MB"
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]i?b)", re.IGNORECASE)
_UNITS = {"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 2**10, "mib": 2**20}
_UNITS |= {"gib": 2**30, "tib": 2**40}


def parse_shard_size(text: str | int) -> tuple[int | None, int | None]:
    """``--shard-size``: rows (a plain number) or bytes (``256MB``, ``1GiB``).

    Returns:
        ``(rows, None)`` or ``(None, bytes)``.

    Raises:
        ConfigError: Neither a positive number of rows nor a size in bytes.
    """
    value = str(text).strip()
    if value.isdigit() and int(value) > 0:
        return int(value), None
    match = _SIZE.fullmatch(value)
    if match is None or float(match.group(1)) <= 0:
        raise ConfigError(
            f"--shard-size must be rows (e.g. 5000) or a size (e.g. 256MB, 1GiB), got {text!r}"
        )
    return None, max(1, int(float(match.group(1)) * _UNITS[match.group(2).lower()]))


class ShardSink:
    """Writes what a staging ``memory`` collects to the shards of a folder.

    Args:
        memory: The staging memory (its tensors created); every row it gets is stored.
        plan: The folder's write: ``target`` the folder; for a new folder, ``shard_format``
            (None: npz) and ``compression`` (checked: one the shard format takes); ``frames``:
            how its shards store next observations (``formats.frames``).
        metadata: Called at each shard for the user metadata the manifest records.
        manifest: A folder's manifest to go on from (``--resume``; its shard format and
            compression kept); without it, the new folder's manifest is written at once (no
            rows yet).
    """

    def __init__(
        self,
        memory: Memory,
        plan: WritePlan,
        metadata: Callable[[], dict[str, Any]],
        manifest: Manifest | None = None,
    ) -> None:
        self.memory = memory
        self._metadata = metadata
        tensors = memory.to_dataset().tensors
        fresh = manifest is None
        if manifest is None:
            empty = {name: tensors[name][:0] for name in sorted(tensors)}
            header = Dataset(empty, metadata=metadata()).header()
            shard = find_shard_format(plan.shard_format)
            manifest = new_manifest(header, shard, plan.compression)
        self.writer = ShardWriter(
            plan.target, manifest, frames=plan.frames, license=plan.license, images=plan.images
        )
        if fresh:
            self.writer.replace_metadata(metadata())
        self._spare: dict[str, Any] = {}  # name -> the tensor (or array) not in the memory
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="expcli-shards")
        self._pending: Future[Any] | None = None
        memory.on_wrap = self._on_wrap

    @property
    def rows(self) -> int:
        """Rows in the folder's shards (those being written included once done)."""
        self._wait()
        return self.writer.manifest.rows

    def _on_wrap(self) -> None:
        self._submit(self.memory.memory_size)

    def _submit(self, rows: int) -> None:
        self._wait()
        memory = self.memory
        arrays = memory.to_dataset().tensors
        names = sorted(arrays)  # an ``infos/<key>`` met later joins the manifest then
        swap = (
            {n: self._spare_tensor(n) for n in names if _viewable(memory.tensors[n])}
            if memory.holds_torch
            else {}
        )
        taken = memory.swap_tensors(swap) if swap else {}
        staged = {}
        for name in names:
            if name in taken:
                self._spare[name] = taken[name]
                staged[name] = taken[name].numpy()[:rows]
                continue
            source = arrays[name][:rows]
            spare = self._spare.get(name)
            if spare is None:
                spare = self._spare[name] = np.empty(arrays[name].shape, source.dtype)
            np.copyto(spare[:rows], source)
            staged[name] = spare[:rows]
        self._pending = self._pool.submit(self.writer.append, staged, self._metadata())

    def _spare_tensor(self, name: str) -> Any:
        spare = self._spare.get(name)
        if spare is None:
            import torch

            spare = self._spare[name] = torch.empty_like(self.memory.tensors[name])
        return spare

    def _wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()  # a write's error (a full disk) surfaces here

    def finish(self, metadata: dict[str, Any]) -> None:
        """Write the rows since the last flush as a last shard, then the manifest with ``metadata``.

        Wait for every write.
        """
        try:
            rows = self.memory.memory_index
            self._wait()
            self.memory.on_wrap = None
            if rows:
                self._submit(rows)
                self._wait()
            self.writer.replace_metadata(metadata)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the writing thread (after the shard it is writing, if any)."""
        self._pool.shutdown(wait=True)


def _viewable(tensor: Any) -> bool:
    """Whether numpy can view ``tensor`` in place (on the CPU, a dtype numpy has)."""
    import torch

    return bool(tensor.device.type == "cpu" and tensor.dtype != torch.bfloat16)
