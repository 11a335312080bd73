"""The tensors of a Memory and their numpy views: what is stored, never where the head is.

Each tensor is shaped ``(rows, columns, *feature)``. On the CPU every tensor of a dtype
numpy shares is paired with zero-copy numpy views, ``(T, N, *f)`` and flattened
``(T * N, *f)``, so that writing a row or gathering a batch costs a numpy assignment or
``take`` instead of torch's per-call dispatch. The small ones live side by side in one
record per transition (``_packed.PackedTensors``), so that a draw reads each transition
once. The dicts here are updated in place, never replaced, so a reader holding one sees
every tensor installed later.

A CPU storage starts as numpy alone (``numpy_only``): its arrays, and its small ones' records,
are numpy's, and torch is not imported, so that a collector writing rows to a file never
pays torch's start-up. The first use of torch (``tensors``, ``views``, ``packed``, a
gather, a swap, sharing, pickling) ``promote``s it: every array becomes a torch tensor on
the same memory (``torch.from_numpy``, no copy; the records one buffer as before), and the
numpy views already handed out go on seeing the writes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli.errors import InvalidTypeError, InvalidValueError, SchemaError
from expcli.memory._shapes import (
    DTypeLike,
    SizeLike,
    dtype_name,
    feature_shape,
    numpy_dtype,
    numpy_dtypes,
    torch_dtype,
)
from expcli.memory.records import packs, record_dtype

if TYPE_CHECKING:
    import torch

    from expcli.memory._packed import PackedTensors

__all__ = ["TensorStorage"]


class TensorStorage:
    """Named torch tensors on one device, with numpy views of the CPU ones.

    Args:
        device: Where new tensors are allocated; ``"cpu"`` (the string) starts the storage as
            numpy alone, torch coming with the first use of it (``promote``).

    Attributes:
        arrays: Name to the numpy view ``(T, N, *feature)`` of a CPU tensor numpy can view.
        flat: The same arrays flattened to ``(T * N, *feature)``.
        features: Name to feature shape (every tensor, in the order they were created).
        row_shapes: Name to the shape of one row, ``(N, *feature)``.
        fast: Name to ``(row shape, numpy view)``: what a whole-row write needs in one lookup.
    """

    def __init__(self, device: torch.device | str) -> None:
        self._device = device
        self._tensors: dict[str, torch.Tensor] = {}
        self._views: dict[str, torch.Tensor] = {}
        self.arrays: dict[str, np.ndarray] = {}
        self.flat: dict[str, np.ndarray] = {}
        self.features: dict[str, tuple[int, ...]] = {}
        self.row_shapes: dict[str, tuple[int, ...]] = {}
        self.fast: dict[str, tuple[tuple[int, ...], np.ndarray]] = {}
        self._packed: PackedTensors | None = None
        self._records: _Records | None = None  # the small arrays' records while numpy alone

    @property
    def numpy_only(self) -> bool:
        """Whether the storage is numpy alone: torch not used (nor imported) for it yet."""
        return isinstance(self._device, str)

    @property
    def on_cpu(self) -> bool:
        """Whether the tensors live on the CPU (asked without importing torch)."""
        return isinstance(self._device, str) or self._device.type == "cpu"

    @property
    def device(self) -> torch.device:
        """Where new tensors are allocated."""
        if isinstance(self._device, str):
            import torch

            return torch.device(self._device)
        return self._device

    @property
    def tensors(self) -> dict[str, torch.Tensor]:
        """Name to tensor ``(T, N, *feature)`` (torch: ``promote``s a numpy storage)."""
        self.promote()
        return self._tensors

    @property
    def views(self) -> dict[str, torch.Tensor]:
        """Name to the tensor's flat view ``(T * N, *feature)`` (skrl's ``tensors_view``)."""
        self.promote()
        return self._views

    @property
    def packed(self) -> PackedTensors | None:
        """The records of the small CPU tensors (strided views of one buffer), or None."""
        self.promote()
        return self._packed

    def promote(self) -> None:
        """Make every array a torch tensor on the same memory (no copy); torch from now on.

        The records become ``PackedTensors`` over their buffer; the numpy views handed out
        before still see every write. Nothing happens to a storage that is torch already.
        """
        if not isinstance(self._device, str):
            return
        import torch

        from expcli.memory._packed import PackedTensors

        self._device = torch.device(self._device)
        records, self._records = self._records, None
        if records is not None:
            fields = {n: (torch_dtype(d), f) for n, (d, f) in records.fields.items()}
            buffer = torch.from_numpy(records.buffer)
            self._packed = PackedTensors(records.rows, records.columns, fields, buffer)
        for name in list(self.features):
            if records is not None and name in records.fields:
                assert self._packed is not None
                self.install(name, self._packed.tensor(name))
            else:
                self.install(name, torch.from_numpy(self.arrays[name]))

    def __getstate__(self) -> dict[str, Any]:
        """Only the tensors and the device travel: the views are rebuilt on arrival.

        The packed tensors travel as their one buffer of records (None in ``tensors``).
        """
        self.promote()
        held = self._packed.names if self._packed is not None else frozenset()
        tensors = {n: None if n in held else t for n, t in self._tensors.items()}
        return {"device": self._device, "tensors": tensors, "packed": self._packed}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(vars(TensorStorage(state["device"])))
        packed = self._packed = state["packed"]
        for name, tensor in state["tensors"].items():
            if tensor is None:
                assert packed is not None  # the tensors left out are those it holds
                tensor = packed.tensor(name)
            self.install(name, tensor)

    # ------------------------------------------------------------ allocation

    def create(
        self,
        name: str,
        rows: int,
        columns: int,
        size: SizeLike,
        dtype: DTypeLike = None,
        keep_dimensions: bool = False,
    ) -> bool:
        """Allocate ``(rows, columns, *feature)``; float tensors start as NaN.

        Returns:
            True if the tensor was created, False if one of that name, size and dtype exists.

        Raises:
            InvalidValueError: A bad name, or an existing tensor of another size or dtype.
        """
        if not isinstance(name, str) or not name or name.startswith("__"):
            raise InvalidValueError(
                f"tensor name must be a non-empty string not starting with '__', got {name!r}"
            )
        shape = feature_shape(size, keep_dimensions)
        if self.numpy_only and not _torch_only(dtype):
            return self._create_array(name, rows, columns, shape, dtype)
        self.promote()
        existing = self._tensors.get(name)
        if existing is not None:
            if tuple(existing.shape[2:]) != shape:
                raise InvalidValueError(
                    f"Tensor size ({shape}) doesn't match the existing one "
                    f"({tuple(existing.shape[2:])}): {name!r}"
                )
            if dtype is not None and existing.dtype != torch_dtype(dtype):
                raise InvalidValueError(
                    f"Tensor dtype ({torch_dtype(dtype)}) doesn't match the existing one "
                    f"({existing.dtype}): {name!r}"
                )
            return False
        import torch

        kind = torch_dtype(dtype)
        packed = self._packed
        if self.device.type == "cpu" and joins_records(kind, shape):
            if packed is None or not packed.shared:  # others see a shared buffer: keep it
                self._pack(name, rows, columns, kind, shape)
                return True
        tensor = torch.zeros((rows, columns, *shape), device=self.device, dtype=kind)
        if tensor.is_floating_point():
            tensor.fill_(float("nan"))
        self.install(name, tensor)
        return True

    def _create_array(
        self, name: str, rows: int, columns: int, shape: tuple[int, ...], dtype: DTypeLike
    ) -> bool:
        """``create`` for a storage that is numpy alone: arrays, small ones in records."""
        kind = numpy_dtype(dtype)
        existing = self.features.get(name)
        if existing is not None:
            if existing != shape:
                raise InvalidValueError(
                    f"Tensor size ({shape}) doesn't match the existing one ({existing}): {name!r}"
                )
            held = self.arrays[name].dtype
            if dtype is not None and held != kind:
                raise InvalidValueError(
                    f"Tensor dtype ({dtype_name(kind)}) doesn't match the existing one "
                    f"({dtype_name(held)}): {name!r}"
                )
            return False
        if joins_records(kind, shape):
            records = self._records
            fields = {} if records is None else dict(records.fields)
            fields[name] = (kind, shape)
            self._records = _Records(rows, columns, fields, records)
            for field in fields:
                self._install_array(field, self._records.field(field))
            return True
        array = np.zeros((rows, columns, *shape), dtype=kind)
        if kind.kind == "f":
            array.fill(np.nan)
        self._install_array(name, array)
        return True

    def _install_array(self, name: str, array: np.ndarray) -> None:
        """Make ``array`` the one named ``name`` (a storage that is numpy alone)."""
        self.arrays[name] = array
        self.flat[name] = array.reshape(-1, *array.shape[2:])
        self.features[name] = tuple(array.shape[2:])
        self.row_shapes[name] = tuple(array.shape[1:])
        self.fast[name] = (self.row_shapes[name], array)

    def _pack(
        self, name: str, rows: int, columns: int, dtype: torch.dtype, shape: tuple[int, ...]
    ) -> None:
        """Add the tensor ``name`` to the records: the held tensors move to a wider buffer.

        They stay the same objects, and so do their flat views, pointed at the new buffer.
        """
        from expcli.memory._packed import PackedTensors

        old = self._packed
        if old is None:
            packed = self._packed = PackedTensors(rows, columns, {name: (dtype, shape)})
        else:
            packed = self._packed = old.widened(name, dtype, shape)
            for held in old.names:
                packed.place(self._tensors[held], held)
                packed.place(self._views[held], held, flat=True)
                packed.adopt(held, self._tensors[held])
                self.rebind(held)
        self.install(name, packed.tensor(name))

    def install(self, name: str, tensor: torch.Tensor) -> None:
        """Make ``tensor`` the one named ``name``, with its views."""
        self._tensors[name] = tensor
        shape = tuple(tensor.shape[2:])
        self.features[name] = shape
        self.row_shapes[name] = tuple(tensor.shape[1:])
        packed = self._packed
        if packed is not None:
            packed.adopt(name, tensor)
        if packed is not None and name in packed.names:
            self._views[name] = packed.tensor(name, flat=True)
        else:
            self._views[name] = tensor.view(-1, *shape)
        self.rebind(name)

    def rebind(self, name: str) -> None:
        """Take new numpy views of the tensor ``name`` (after its data moved, e.g. shared)."""
        tensor = self._tensors[name]
        if tensor.device.type == "cpu" and tensor.dtype in numpy_dtypes():
            array = tensor.numpy()
            self.arrays[name] = array
            self.flat[name] = array.reshape(-1, *array.shape[2:])
            self.fast[name] = (self.row_shapes[name], array)
        else:
            self.arrays.pop(name, None)
            self.flat.pop(name, None)
            self.fast.pop(name, None)

    def replace(self, tensors: Mapping[str, np.ndarray]) -> None:
        """Forget every tensor; hold copies of ``tensors`` instead (on ``device``)."""
        import torch

        from expcli.memory._packed import PackedTensors

        self.promote()
        for table in (
            self._tensors,
            self._views,
            self.arrays,
            self.flat,
            self.features,
            self.row_shapes,
            self.fast,
        ):
            table.clear()
        self._packed = None
        small = {
            name: (torch_dtype(array.dtype), tuple(array.shape[2:]))
            for name, array in tensors.items()
            if self.device.type == "cpu" and array.size and _packs_array(array)
        }
        if small:
            rows, columns = next(tensors[n] for n in small).shape[:2]
            self._packed = PackedTensors(int(rows), int(columns), small)
        for name, array in tensors.items():
            if name in small:
                assert self._packed is not None
                self._packed.table[name] = np.asarray(array).reshape(-1, *small[name][1])
                self.install(name, self._packed.tensor(name))
                continue
            copy = np.array(array, copy=True, order="C")
            self.install(name, torch.from_numpy(copy).to(self.device))

    def share(self) -> None:
        """Move the CPU tensors to shared memory, so that other processes see the writes.

        Each moves in place: every view of its storage (a packed tensor's records) sees it.
        """
        self.promote()
        if self._packed is not None:
            self._packed.share()
        for name, tensor in self._tensors.items():
            if tensor.device.type == "cpu":
                tensor.untyped_storage().share_memory_()
                self.rebind(name)

    def swap(self, spares: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Put ``spares`` in place of the tensors of those names; return the ones taken out.

        Raises:
            InvalidValueError: A name without a tensor, or a spare whose shape, dtype or
                device differs from its tensor's.
        """
        self.promote()
        for name, spare in spares.items():
            old = self._tensors.get(name)
            if old is None:
                raise InvalidValueError(
                    f"no tensor named {name!r} to swap; tensors: {sorted(self._tensors)}"
                )
            if (spare.shape, spare.dtype, spare.device) != (old.shape, old.dtype, old.device):
                raise InvalidValueError(
                    f"spare for {name!r} is {tuple(spare.shape)} {spare.dtype} on "
                    f"{spare.device}; expected {tuple(old.shape)} {old.dtype} on {old.device}"
                )
        taken = {name: self._tensors[name] for name in spares}
        for name, spare in spares.items():
            self.install(name, spare)
        return taken

    def grow(self, rows: int, head: int) -> None:
        """Give every tensor ``rows`` rows, oldest first: row ``head`` becomes row 0.

        The new rows start as ``create`` makes them (NaN floats, zeros); a shared tensor's
        replacement is shared too. Every tensor is a new object.
        """
        if self.numpy_only:
            records = self._records = (
                None if self._records is None else self._records.grown(rows, head)
            )
            for name, array in list(self.arrays.items()):
                if records is not None and name in records.fields:
                    self._install_array(name, records.field(name))
                else:
                    self._install_array(name, _grown(array, rows, head))
            return
        import torch

        packed = self._packed = None if self._packed is None else self._packed.grown(rows, head)
        for name, tensor in list(self._tensors.items()):
            if packed is not None and name in packed.names:
                self.install(name, packed.tensor(name))
                continue
            old = tensor.shape[0]
            grown = torch.empty((rows, *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
            grown[old:] = float("nan") if tensor.is_floating_point() else 0
            grown[: old - head] = tensor[head:]
            grown[old - head : old] = tensor[:head]
            if tensor.untyped_storage().is_shared():
                grown.untyped_storage().share_memory_()
            self.install(name, grown)

    # --------------------------------------------------------------- reading

    def write(self, name: str, where: tuple[Any, ...], value: np.ndarray) -> None:
        """``tensor[where] = value``: through the numpy view when there is one."""
        dst = self.arrays.get(name)
        if dst is not None:
            dst[where] = value
            return
        import torch

        target = self._tensors[name]
        with torch.no_grad():
            target[where] = torch.as_tensor(value).to(device=target.device, dtype=target.dtype)

    def gather(self, names: Sequence[str], index: np.ndarray) -> list[torch.Tensor | None]:
        """Rows at flat ``index`` of each named tensor (None for unknown names).

        Packed tensors alone come from one ``take`` of records: views of them, strided.
        """
        import torch

        self.promote()
        packed = self._packed
        if packed is not None and packed.names.issuperset(names):
            records = packed.records(index)
            return [torch.from_numpy(records[name]) for name in names]
        flat = self.flat
        out: list[torch.Tensor | None] = []
        on_device: dict[torch.device, torch.Tensor] = {}  # the index copied once per device
        for name in names:
            array = flat.get(name)
            if array is not None:
                out.append(torch.from_numpy(array.take(index, axis=0)))
            elif name in self._views:
                view = self._views[name]
                where = on_device.get(view.device)
                if where is None:
                    where = on_device[view.device] = torch.from_numpy(index).to(view.device)
                out.append(view[where])
            else:
                out.append(None)
        return out

    def readable(self) -> dict[str, np.ndarray]:
        """Every tensor as numpy: the views, else a CPU copy (bfloat16 read as float32)."""
        arrays = dict(self.arrays)
        for name, tensor in self._tensors.items():
            if name not in arrays:  # on another device, or a dtype numpy lacks
                import torch

                cpu = tensor.detach().cpu()
                arrays[name] = (cpu.float() if cpu.dtype == torch.bfloat16 else cpu).numpy()
        return arrays

    def storable(self, names: Iterable[str]) -> dict[str, np.ndarray]:
        """The named tensors as numpy, as files store them: views, else CPU copies.

        Raises:
            SchemaError: A tensor's dtype has no numpy equivalent that expcli stores.
        """
        out: dict[str, np.ndarray] = {}
        for name in names:
            array = self.arrays.get(name)
            if array is None:
                tensor = self._tensors[name]
                if tensor.dtype not in numpy_dtypes():
                    raise SchemaError(
                        f"dtype {tensor.dtype} cannot be saved; expected one of "
                        f"{', '.join(str(d) for d in sorted(numpy_dtypes(), key=str))}",
                        key=name,
                    )
                array = tensor.detach().cpu().numpy()
            out[name] = array
        return out


class _Records:
    """The small arrays of a storage that is numpy alone, side by side: one record a row.

    The same layout as ``_packed.PackedTensors`` (``records.record_dtype``), in a uint8
    buffer ``(rows, columns, record bytes)`` that ``promote`` hands to torch as it is.

    Args:
        rows, columns: Of every field.
        fields: Name to numpy dtype and feature shape.
        old: Records whose fields' values the new ones take (widened by a field: NaN floats
            and zeros in it).
    """

    def __init__(
        self,
        rows: int,
        columns: int,
        fields: dict[str, tuple[np.dtype[Any], tuple[int, ...]]],
        old: _Records | None = None,
        buffer: np.ndarray | None = None,
    ) -> None:
        self.rows, self.columns, self.fields = rows, columns, fields
        self.dtype = record_dtype(fields)
        blank = buffer is None
        if buffer is None:
            buffer = np.zeros((rows, columns, self.dtype.itemsize), dtype=np.uint8)
        self.buffer: np.ndarray = buffer
        self.table = self.buffer.reshape(-1, self.dtype.itemsize).view(self.dtype).reshape(-1)
        if blank:
            self._blank(0, skip=set() if old is None else set(old.fields))
        if old is not None:
            for name in old.fields:
                self.table[name] = old.table[name]

    def _blank(self, row: int, skip: set[str]) -> None:
        for name, (dtype, _) in self.fields.items():
            if dtype.kind == "f" and name not in skip:
                self.table[name][row * self.columns :] = np.nan

    def field(self, name: str) -> np.ndarray:
        """The field ``name`` as an array ``(rows, columns, *feature)``: a strided view."""
        return self.table[name].reshape(self.rows, self.columns, *self.fields[name][1])

    def grown(self, rows: int, head: int) -> _Records:
        """New records of ``rows`` rows, oldest first (row ``head`` becomes row 0)."""
        old = self.rows
        buffer = np.zeros((rows, *self.buffer.shape[1:]), dtype=np.uint8)
        buffer[: old - head] = self.buffer[head:]
        buffer[old - head : old] = self.buffer[:head]
        grown = _Records(rows, self.columns, self.fields, buffer=buffer)
        grown._blank(old, skip=set())
        return grown


def _grown(array: np.ndarray, rows: int, head: int) -> np.ndarray:
    """``array`` with ``rows`` rows, oldest first; new rows NaN (floats) or zeros."""
    old = array.shape[0]
    grown = np.empty((rows, *array.shape[1:]), dtype=array.dtype)
    grown[old:] = np.nan if array.dtype.kind == "f" else 0
    grown[: old - head] = array[head:]
    grown[old - head : old] = array[:head]
    return grown


def _torch_only(dtype: DTypeLike) -> bool:
    """Whether ``dtype`` is a torch dtype numpy has no twin of (bfloat16): torch must hold it."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(dtype, torch.dtype) and dtype not in numpy_dtypes()


def _packs_array(array: np.ndarray) -> bool:
    """Whether a numpy array's tensor joins the records (a dtype the memory stores)."""
    return joins_records(array.dtype, tuple(array.shape[2:]))


def joins_records(dtype: DTypeLike, feature: tuple[int, ...]) -> bool:
    """Whether a CPU tensor (or array) of ``dtype`` and ``feature`` shape joins the records.

    Small rows (``records.packs``) of a dtype numpy views (not bfloat16) do.
    """
    try:
        kind = numpy_dtype(dtype)
    except InvalidTypeError:
        return False
    return packs(kind, feature)
