"""The tensors of a Memory and their numpy views: what is stored, never where the head is.

Each tensor is shaped ``(rows, columns, *feature)``. On the CPU every tensor of a dtype
numpy shares is paired with zero-copy numpy views, ``(T, N, *f)`` and flattened
``(T * N, *f)``, so that writing a row or gathering a batch costs a numpy assignment or
``take`` instead of torch's per-call dispatch. The dicts here are updated in place, never
replaced, so a reader holding one sees every tensor installed later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from expcli.errors import InvalidValueError, SchemaError
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

    def __getstate__(self) -> dict[str, Any]:
        """Only the tensors and the device travel: the numpy views are rebuilt on arrival."""
        return {"device": self.device, "tensors": self.tensors}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(vars(TensorStorage(state["device"])))
        for name, tensor in state["tensors"].items():
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
        tensor = torch.zeros((rows, columns, *shape), device=self.device, dtype=torch_dtype(dtype))
        if tensor.is_floating_point():
            tensor.fill_(float("nan"))
        self.install(name, tensor)
        return True

    def install(self, name: str, tensor: torch.Tensor) -> None:
        """Make ``tensor`` the one named ``name``, with its views."""
        self.tensors[name] = tensor
        shape = tuple(tensor.shape[2:])
        self.features[name] = shape
        self.row_shapes[name] = tuple(tensor.shape[1:])
        self.rebind(name)

    def rebind(self, name: str) -> None:
        """Take new views of the tensor ``name`` (after its data moved, e.g. to shared memory)."""
        tensor = self.tensors[name]
        self.views[name] = tensor.view(-1, *tensor.shape[2:])
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
        for name, array in tensors.items():
            copy = np.array(array, copy=True, order="C")
            self.install(name, torch.from_numpy(copy).to(self.device))

    def share(self) -> None:
        """Move the CPU tensors to shared memory, so that other processes see the writes."""
        for name, tensor in self.tensors.items():
            if tensor.device.type == "cpu":
                tensor.share_memory_()  # type: ignore[no-untyped-call]
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
        replacement is shared too.
        """
        for name, tensor in list(self.tensors.items()):
            old = tensor.shape[0]
            grown = torch.empty((rows, *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
            grown[old:] = float("nan") if tensor.is_floating_point() else 0
            grown[: old - head] = tensor[head:]
            grown[old - head : old] = tensor[:head]
            if tensor.is_shared():  # type: ignore[no-untyped-call]
                grown.share_memory_()  # type: ignore[no-untyped-call]
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
        """Rows at flat ``index`` of each named tensor (None for unknown names)."""
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
