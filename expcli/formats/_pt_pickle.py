"""``data.pkl`` of a ``.pt`` file: the pickle ``torch.save`` writes for a dict of tensors.

Emitted opcode by opcode as CPython's pickler (protocol 2) emits it inside ``torch.save``,
memo included, so that no torch import is needed and the bytes match torch's own. Each
tensor is contiguous, on the CPU, and has a storage of its own: ``data/<i>`` for the i-th
tensor, which the ``.pt`` writer then streams into the archive.
"""

from __future__ import annotations

import math
import pickle
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["STORAGE_TYPES", "StoredTensor", "dict_pickle"]

STORAGE_TYPES = {
    "bool": "BoolStorage",
    "uint8": "ByteStorage",
    "int8": "CharStorage",
    "int16": "ShortStorage",
    "int32": "IntStorage",
    "int64": "LongStorage",
    "float16": "HalfStorage",
    "float32": "FloatStorage",
    "float64": "DoubleStorage",
}
"""torch's legacy storage class per numpy dtype name: what the pickle names a storage by."""

_BATCH = 1000  # the pickler sets dict items in batches of this many


@dataclass(frozen=True)
class StoredTensor:
    """A tensor's dtype and shape: what the pickle records of it (the bytes go elsewhere)."""

    dtype: np.dtype[np.generic]
    shape: tuple[int, ...]


def dict_pickle(items: Sequence[tuple[str, StoredTensor | str]]) -> bytes:
    """The pickle of a dict, in the order given, of name -> tensor or string.

    The i-th tensor (counting tensors only) refers to the storage named ``str(i)``.

    Raises:
        KeyError: A tensor's dtype has no torch storage type.
    """
    out = _Emitter()
    out.raw(pickle.EMPTY_DICT)
    out.put()
    storages = 0
    for start in range(0, len(items), _BATCH):
        batch = items[start : start + _BATCH]
        if len(batch) > 1:
            out.raw(pickle.MARK)
        for name, value in batch:
            out.text(name)
            if isinstance(value, str):
                out.text(value)
            else:
                _tensor(out, value, str(storages))
                storages += 1
        out.raw(pickle.SETITEMS if len(batch) > 1 else pickle.SETITEM)
    out.raw(pickle.STOP)
    return bytes(out.data)


def _tensor(out: _Emitter, tensor: StoredTensor, key: str) -> None:
    """``torch._utils._rebuild_tensor_v2(storage, 0, shape, stride, False, OrderedDict())``."""
    storage_type = STORAGE_TYPES[np.dtype(tensor.dtype).name]
    out.shared_global("torch._utils", "_rebuild_tensor_v2")
    out.raw(pickle.MARK)
    out.raw(pickle.MARK)  # the persistent id: ("storage", type, key, location, numel)
    out.shared_text("storage")
    out.shared_global("torch", storage_type)
    out.text(key)
    out.shared_text("cpu")
    out.integer(math.prod(tensor.shape))
    out.raw(pickle.TUPLE)
    out.put()
    out.raw(pickle.BINPERSID)
    out.integer(0)  # storage offset
    out.ints(tensor.shape)
    out.ints(_contiguous_strides(tensor.shape))
    out.raw(pickle.NEWFALSE)  # requires_grad
    out.shared_global("collections", "OrderedDict")  # backward hooks: OrderedDict()
    out.raw(pickle.EMPTY_TUPLE + pickle.REDUCE)
    out.put()
    out.raw(pickle.TUPLE)
    out.put()
    out.raw(pickle.REDUCE)
    out.put()


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides in elements, as torch computes them (a size-0 dim counts as 1)."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


class _Emitter:
    """Pickle opcodes with the pickler's memo.

    Every object is memoized (``BINPUT``) when written, and those that torch.save pickles as one
    shared object are written once and then fetched from the memo (``BINGET``).
    """

    def __init__(self) -> None:
        self.data = bytearray(pickle.PROTO + b"\x02")
        self._size = 0
        self._shared: dict[tuple[str, str], int] = {}

    def raw(self, opcodes: bytes) -> None:
        self.data += opcodes

    def put(self) -> None:
        index, self._size = self._size, self._size + 1
        self._memo_op(pickle.BINPUT, pickle.LONG_BINPUT, index)

    def text(self, value: str) -> None:
        encoded = value.encode("utf-8", "surrogatepass")
        self.data += pickle.BINUNICODE + struct.pack("<I", len(encoded)) + encoded
        self.put()

    def integer(self, value: int) -> None:
        if 0 <= value <= 0xFF:
            self.data += pickle.BININT1 + bytes([value])
        elif 0 <= value <= 0xFFFF:
            self.data += pickle.BININT2 + struct.pack("<H", value)
        elif -(2**31) <= value < 2**31:
            self.data += pickle.BININT + struct.pack("<i", value)
        else:
            encoded = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
            self.data += pickle.LONG1 + bytes([len(encoded)]) + encoded

    def ints(self, values: tuple[int, ...]) -> None:
        """A tuple of ints: short tuples get their own opcode; ``()`` is not memoized."""
        if not values:
            self.data += pickle.EMPTY_TUPLE
            return
        if len(values) > 3:
            self.data += pickle.MARK
        for value in values:
            self.integer(value)
        short = {1: pickle.TUPLE1, 2: pickle.TUPLE2, 3: pickle.TUPLE3}
        self.data += short.get(len(values), pickle.TUPLE)
        self.put()

    def shared_text(self, value: str) -> None:
        self._shared_op(("str", value), lambda: self.text(value))

    def shared_global(self, module: str, name: str) -> None:
        def emit() -> None:
            self.data += pickle.GLOBAL + f"{module}\n{name}\n".encode("ascii")
            self.put()

        self._shared_op((module, name), emit)

    def _shared_op(self, key: tuple[str, str], emit: Callable[[], None]) -> None:
        index = self._shared.get(key)
        if index is None:
            self._shared[key] = self._size
            emit()
        else:
            self._memo_op(pickle.BINGET, pickle.LONG_BINGET, index)

    def _memo_op(self, short: bytes, long: bytes, index: int) -> None:
        if index < 256:
            self.data += short + bytes([index])
        else:
            self.data += long + struct.pack("<I", index)
