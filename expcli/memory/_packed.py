"""A CPU memory's small tensors as fields of one buffer: one record per transition.

The buffer is uint8 ``(rows, columns, record bytes)`` and each tensor is a strided torch
view of its field, ``(rows, columns, *feature)`` (``records`` lays the fields out): writes
land in place, and a draw of transitions is one ``take`` of records whose fields are the
batch. A tensor object outlives its buffer: a memory that gains a small tensor copies the
fields into a wider buffer and points the same objects there (``Tensor.set_``), so whoever
holds one (skrl's ``_tensor_<name>``) goes on reading and writing the memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from expcli.memory.records import record_dtype

__all__ = ["PackedTensors"]

Fields = Mapping[str, tuple[torch.dtype, tuple[int, ...]]]


def _numpy_dtype(dtype: torch.dtype) -> np.dtype[Any]:
    return torch.empty(0, dtype=dtype).numpy().dtype


class PackedTensors:
    """Tensors of ``fields`` (name to torch dtype and feature) as fields of one buffer.

    Args:
        rows: Rows of every tensor.
        columns: Columns (envs) of every tensor.
        fields: The tensors laid out in each record.
        buffer: The records, when they exist already (pickled, grown); else new ones,
            float fields NaN and the rest zeros, as ``Memory.create_tensor`` makes them.

    Attributes:
        names: The fields whose tensors the memory holds now (a swapped-out tensor is not
            the memory's until it comes back): what ``records`` gives for the memory.
        table: The records as numpy, ``(rows * columns,)`` of ``dtype``.
    """

    def __init__(
        self, rows: int, columns: int, fields: Fields, buffer: torch.Tensor | None = None
    ) -> None:
        self._lay_out(rows, columns, fields, buffer)
        self.names: frozenset[str] = frozenset()
        if buffer is None:
            self._blank(0)

    def _lay_out(
        self, rows: int, columns: int, fields: Fields, buffer: torch.Tensor | None
    ) -> None:
        self.rows, self.columns = rows, columns
        self.fields = dict(fields)
        self.dtype = record_dtype({n: (_numpy_dtype(d), f) for n, (d, f) in fields.items()})
        if buffer is None:
            buffer = torch.zeros((rows, columns, self.dtype.itemsize), dtype=torch.uint8)
        self.buffer = buffer
        self.table = self._table()

    def __getstate__(self) -> dict[str, Any]:
        """The buffer travels once (a view per tensor would carry it whole each time)."""
        return {
            "sizes": (self.rows, self.columns),
            "fields": self.fields,
            "names": self.names,
            "buffer": self.buffer,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        rows, columns = state["sizes"]
        self._lay_out(rows, columns, state["fields"], state["buffer"])
        self.names = state["names"]

    def _table(self) -> np.ndarray:
        records = self.buffer.numpy().reshape(-1, self.dtype.itemsize)
        return records.view(self.dtype).reshape(-1)

    def _blank(self, row: int) -> None:
        """Float fields NaN from ``row`` on (the buffer starts zeroed)."""
        for name, (dtype, _) in self.fields.items():
            if dtype.is_floating_point:
                self.table[name][row * self.columns :] = np.nan

    # ------------------------------------------------------------ tensors

    def tensor(self, name: str, flat: bool = False) -> torch.Tensor:
        """A new tensor object on the field ``name``: ``(rows, columns, *f)``, or ``flat``."""
        return self.place(torch.empty(0, dtype=self.fields[name][0]), name, flat)

    def place(self, tensor: torch.Tensor, name: str, flat: bool = False) -> torch.Tensor:
        """Point ``tensor`` (the same object) at the field ``name`` of this buffer; return it."""
        offset, size, stride = self._geometry(name, flat)
        with torch.no_grad():
            tensor.set_(self.buffer.untyped_storage(), offset, size, stride)
        return tensor

    def holds(self, name: str, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` is the field ``name`` of this buffer, ``(rows, columns, *f)``."""
        if name not in self.fields or tensor.dtype != self.fields[name][0]:
            return False
        if tensor.device.type != "cpu":
            return False
        ours = self.buffer.untyped_storage().data_ptr()
        offset, size, stride = self._geometry(name, False)
        return (
            tensor.untyped_storage().data_ptr() == ours
            and tensor.storage_offset() == offset
            and tuple(tensor.shape) == size
            and tensor.stride() == stride
        )

    def adopt(self, name: str, tensor: torch.Tensor) -> None:
        """The memory now holds ``tensor`` as ``name``: one of the records, or not."""
        held = self.holds(name, tensor)
        if held != (name in self.names):
            self.names = self.names | {name} if held else self.names - {name}

    def _geometry(self, name: str, flat: bool) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        """Storage offset, size and strides (in elements) of the field ``name``."""
        dtype, feature = self.fields[name]
        item = torch.empty(0, dtype=dtype).element_size()
        record = self.dtype.itemsize // item
        inner = tuple(int(np.prod(feature[i + 1 :])) for i in range(len(feature)))
        layout = self.dtype.fields
        assert layout is not None  # a record dtype has fields
        offset = layout[name][1] // item
        if flat:
            return offset, (self.rows * self.columns, *feature), (record, *inner)
        lead = (self.rows, self.columns)
        return offset, (*lead, *feature), (self.columns * record, record, *inner)

    # ------------------------------------------------------------ records

    def records(self, index: np.ndarray) -> np.ndarray:
        """The records at flat ``index`` (any shape); IndexError past the end.

        A field of them is that tensor's rows, ``(*index.shape, *feature)``: a view, strided.
        """
        if index.ndim:
            return self.table.take(index)
        return self.table.take(index.reshape(1)).reshape(())

    # ------------------------------------------------------------ new buffers

    @property
    def shared(self) -> bool:
        """Whether the buffer is in shared memory (``share``)."""
        return self.buffer.untyped_storage().is_shared()

    def share(self) -> None:
        """Move the buffer to shared memory: every field's tensor moves with it, in place."""
        self.buffer.untyped_storage().share_memory_()
        self.table = self._table()

    def widened(self, name: str, dtype: torch.dtype, feature: tuple[int, ...]) -> PackedTensors:
        """New records holding the fields held now and a new one, ``name`` (NaN or zeros).

        The held fields' values are copied; their tensors still point here (``place``).
        """
        fields = {n: self.fields[n] for n in self.names}
        fields[name] = (dtype, feature)
        wider = PackedTensors(self.rows, self.columns, fields)
        for held in self.names:
            wider.table[held] = self.table[held]
        return wider

    def grown(self, rows: int, head: int) -> PackedTensors:
        """New records of ``rows`` rows, oldest first: row ``head`` becomes row 0.

        The new rows are NaN floats and zeros; a shared buffer's replacement is shared too.
        """
        old = self.rows
        buffer = torch.zeros((rows, *self.buffer.shape[1:]), dtype=torch.uint8)
        buffer[: old - head] = self.buffer[head:]
        buffer[old - head : old] = self.buffer[:head]
        if self.shared:
            buffer.untyped_storage().share_memory_()
        grown = PackedTensors(rows, self.columns, self.fields, buffer)
        grown._blank(old)
        grown.names = self.names
        return grown
