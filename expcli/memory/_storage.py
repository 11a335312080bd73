"""The tensors of a Memory and their numpy views: what is stored, never where the head is.

Each tensor is shaped ``(rows, columns, *feature)``. On the CPU every tensor of a dtype
numpy shares is paired with zero-copy numpy views, ``(T, N, *f)`` and flattened
``(T * N, *f)``, so that writing a row or gathering a batch costs a numpy assignment or
``take`` instead of torch's per-call dispatch. The small ones live side by side in one
record per transition (``_packed.PackedTensors``), so that a draw reads each transition
once. The dicts here are updated in place, never replaced, so a reader holding one sees
every tensor installed later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from expcli.errors import InvalidTypeError, InvalidValueError, SchemaError
from expcli.memory._packed import PackedTensors, joins_records
from expcli.memory._shapes import NUMPY_DTYPES, DTypeLike, SizeLike, feature_shape, torch_dtype

__all__ = ["TensorStorage"]


class TensorStorage:
    """Named torch tensors on one device, with numpy views of the CPU ones.

    Attributes:
        device: Where new tensors are allocated.
        tensors: Name to tensor ``(T, N, *feature)``.
        views: Name to the tensor's flat view ``(T * N, *feature)`` (skrl's ``tensors_view``).
        arrays: Name to the numpy view ``(T, N, *feature)`` of a CPU tensor numpy can view.
        flat: The same arrays flattened to ``(T * N, *feature)``.
        features: Name to feature shape.
        row_shapes: Name to the shape of one row, ``(N, *feature)``.
        fast: Name to ``(row shape, numpy view)``: what a whole-row write needs in one lookup.
        packed: The records of the small CPU tensors (their tensors are strided views of
            one buffer), or None.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.tensors: dict[str, torch.Tensor] = {}
        self.views: dict[str, torch.Tensor] = {}
        self.arrays: dict[str, np.ndarray] = {}
        self.flat: dict[str, np.ndarray] = {}
        self.features: dict[str, tuple[int, ...]] = {}
        self.row_shapes: dict[str, tuple[int, ...]] = {}
        self.fast: dict[str, tuple[tuple[int, ...], np.ndarray]] = {}
        self.packed: PackedTensors | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Only the tensors and the device travel: the views are rebuilt on arrival.

        The packed tensors travel as their one buffer of records (None in ``tensors``).
        """
        held = self.packed.names if self.packed is not None else frozenset()
        tensors = {n: None if n in held else t for n, t in self.tensors.items()}
        return {"device": self.device, "tensors": tensors, "packed": self.packed}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(vars(TensorStorage(state["device"])))
        packed = self.packed = state["packed"]
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
        existing = self.tensors.get(name)
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
        kind = torch_dtype(dtype)
        packed = self.packed
        if self.device.type == "cpu" and joins_records(kind, shape):
            if packed is None or not packed.shared:  # others see a shared buffer: keep it
                self._pack(name, rows, columns, kind, shape)
                return True
        tensor = torch.zeros((rows, columns, *shape), device=self.device, dtype=kind)
        if tensor.is_floating_point():
            tensor.fill_(float("nan"))
        self.install(name, tensor)
        return True

    def _pack(
        self, name: str, rows: int, columns: int, dtype: torch.dtype, shape: tuple[int, ...]
    ) -> None:
        """Add the tensor ``name`` to the records: the held tensors move to a wider buffer.

        They stay the same objects, and so do their flat views, pointed at the new buffer.
        """
        old = self.packed
        if old is None:
            packed = self.packed = PackedTensors(rows, columns, {name: (dtype, shape)})
        else:
            packed = self.packed = old.widened(name, dtype, shape)
            for held in old.names:
                packed.place(self.tensors[held], held)
                packed.place(self.views[held], held, flat=True)
                packed.adopt(held, self.tensors[held])
                self.rebind(held)
        self.install(name, packed.tensor(name))

    def install(self, name: str, tensor: torch.Tensor) -> None:
        """Make ``tensor`` the one named ``name``, with its views."""
        self.tensors[name] = tensor
        shape = tuple(tensor.shape[2:])
        self.features[name] = shape
        self.row_shapes[name] = tuple(tensor.shape[1:])
        packed = self.packed
        if packed is not None:
            packed.adopt(name, tensor)
        if packed is not None and name in packed.names:
            self.views[name] = packed.tensor(name, flat=True)
        else:
            self.views[name] = tensor.view(-1, *shape)
        self.rebind(name)

    def rebind(self, name: str) -> None:
        """Take new numpy views of the tensor ``name`` (after its data moved, e.g. shared)."""
        tensor = self.tensors[name]
        if tensor.device.type == "cpu" and tensor.dtype in NUMPY_DTYPES:
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
        for table in (
            self.tensors,
            self.views,
            self.arrays,
            self.flat,
            self.features,
            self.row_shapes,
            self.fast,
        ):
            table.clear()
        self.packed = None
        small = {
            name: (torch_dtype(array.dtype), tuple(array.shape[2:]))
            for name, array in tensors.items()
            if self.device.type == "cpu" and array.size and _packs_array(array)
        }
        if small:
            rows, columns = next(tensors[n] for n in small).shape[:2]
            self.packed = PackedTensors(int(rows), int(columns), small)
        for name, array in tensors.items():
            if name in small:
                assert self.packed is not None
                self.packed.table[name] = np.asarray(array).reshape(-1, *small[name][1])
                self.install(name, self.packed.tensor(name))
                continue
            copy = np.array(array, copy=True, order="C")
            self.install(name, torch.from_numpy(copy).to(self.device))

    def share(self) -> None:
        """Move the CPU tensors to shared memory, so that other processes see the writes.

        Each moves in place: every view of its storage (a packed tensor's records) sees it.
        """
        if self.packed is not None:
            self.packed.share()
        for name, tensor in self.tensors.items():
            if tensor.device.type == "cpu":
                tensor.untyped_storage().share_memory_()
                self.rebind(name)

    def swap(self, spares: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Put ``spares`` in place of the tensors of those names; return the ones taken out.

        Raises:
            InvalidValueError: A name without a tensor, or a spare whose shape, dtype or
                device differs from its tensor's.
        """
        for name, spare in spares.items():
            old = self.tensors.get(name)
            if old is None:
                raise InvalidValueError(
                    f"no tensor named {name!r} to swap; tensors: {sorted(self.tensors)}"
                )
            if (spare.shape, spare.dtype, spare.device) != (old.shape, old.dtype, old.device):
                raise InvalidValueError(
                    f"spare for {name!r} is {tuple(spare.shape)} {spare.dtype} on "
                    f"{spare.device}; expected {tuple(old.shape)} {old.dtype} on {old.device}"
                )
        taken = {name: self.tensors[name] for name in spares}
        for name, spare in spares.items():
            self.install(name, spare)
        return taken

    def grow(self, rows: int, head: int) -> None:
        """Give every tensor ``rows`` rows, oldest first: row ``head`` becomes row 0.

        The new rows start as ``create`` makes them (NaN floats, zeros); a shared tensor's
        replacement is shared too. Every tensor is a new object.
        """
        packed = self.packed = None if self.packed is None else self.packed.grown(rows, head)
        for name, tensor in list(self.tensors.items()):
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
        target = self.tensors[name]
        with torch.no_grad():
            target[where] = torch.as_tensor(value).to(device=target.device, dtype=target.dtype)

    def gather(self, names: Sequence[str], index: np.ndarray) -> list[torch.Tensor | None]:
        """Rows at flat ``index`` of each named tensor (None for unknown names).

        Packed tensors alone come from one ``take`` of records: views of them, strided.
        """
        packed = self.packed
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
            elif name in self.views:
                view = self.views[name]
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
        for name, tensor in self.tensors.items():
            if name not in arrays:  # on another device, or a dtype numpy lacks
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
                tensor = self.tensors[name]
                if tensor.dtype not in NUMPY_DTYPES:
                    raise SchemaError(
                        f"dtype {tensor.dtype} cannot be saved; expected one of "
                        f"{', '.join(str(d) for d in NUMPY_DTYPES)}",
                        key=name,
                    )
                array = tensor.detach().cpu().numpy()
            out[name] = array
        return out


def _packs_array(array: np.ndarray) -> bool:
    """Whether a numpy array's tensor joins the records (a dtype the memory stores)."""
    try:
        dtype = torch_dtype(array.dtype)
    except InvalidTypeError:
        return False
    return joins_records(dtype, tuple(array.shape[2:]))
