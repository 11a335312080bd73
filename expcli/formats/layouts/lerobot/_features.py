"""How expcli's tensors become LeRobot v3.0 features and back, and the features' statistics.

A LeRobot feature is ``{"dtype", "shape", "names"}`` in ``meta/info.json`` and one column of
the data files: a scalar (shape ``[1]``), a ``fixed_size_list`` (shape ``[n]``) or an image
(``dtype: "image"``: a ``struct<bytes, path>`` of PNG bytes, lossless). Features of two or
more dimensions that are not images are flattened to ``[n]``: LeRobot would make them HF
``ArrayND`` extension columns; expcli's own sidecar keeps their shape. Names follow
LeRobot's (``observation.state``, ``action``, ``next.reward``); a ``/`` becomes a ``.``, as
LeRobot refuses slashes in feature names.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from expcli.errors import FormatError, MissingDependencyError, SchemaError
from expcli.formats._arrow_values import values_as
from expcli.formats._parquet_columns import flat_array
from expcli.spec import TensorSpec

__all__ = [
    "AUTO_FEATURES",
    "Feature",
    "decode_images",
    "encode_images",
    "feature_column",
    "feature_for",
    "feature_values",
    "is_image",
    "lerobot_name",
]

AUTO_FEATURES: dict[str, dict[str, Any]] = {
    name: {"dtype": dtype, "shape": [1], "names": None}
    for name, dtype in (
        ("timestamp", "float32"),
        ("frame_index", "int64"),
        ("episode_index", "int64"),
        ("index", "int64"),
        ("task_index", "int64"),
    )
}
"""The bookkeeping features LeRobot adds to every dataset (``DEFAULT_FEATURES``)."""

_PREFIXES = (
    ("next_observations", "next.observation"),
    ("observations", "observation"),
    ("actions", "action"),
)
_RENAMED = {
    "rewards": "next.reward",
    "terminated": "next.terminated",
    "truncated": "next.truncated",
}
_SINGLE = {"observation": "observation.state", "next.observation": "next.observation.state"}


@dataclass(frozen=True, slots=True)
class Feature:
    """One tensor stored as one LeRobot feature.

    Attributes:
        name: The feature's (and column's) name.
        spec: The tensor it holds, with its own dtype and feature shape.
        image: Stored as PNG images (uint8 ``(H, W[, C])``).
        video: Stored as video (uint8 ``(H, W, 3)``; in MP4 files, not in the data files).
    """

    name: str
    spec: TensorSpec
    image: bool
    video: bool = False

    @property
    def shape(self) -> list[int]:
        """The shape ``info.json`` declares: ``[1]``, ``[n]`` or ``[H, W, C]``."""
        shape = self.spec.shape
        if self.image or self.video:
            return [*shape, 1] if len(shape) == 2 else list(shape)
        return [max(1, math.prod(shape))] if len(shape) != 1 else list(shape)

    def info(self) -> dict[str, Any]:
        """The feature's entry in ``info.json``."""
        if self.image or self.video:
            kind = "video" if self.video else "image"
            return {"dtype": kind, "shape": self.shape, "names": ["height", "width", "channels"]}
        return {"dtype": self.spec.dtype, "shape": self.shape, "names": None}

    def arrow_type(self) -> Any:
        """The Arrow type of its column."""
        import pyarrow as pa

        if self.image:
            return pa.struct([("bytes", pa.binary()), ("path", pa.string())])
        kind = pa.from_numpy_dtype(np.dtype(self.spec.dtype))
        size = self.shape[0]
        return kind if self.shape == [1] else pa.list_(kind, size)


def is_image(spec: TensorSpec) -> bool:
    """Whether a tensor is stored as images: uint8 ``(H, W)`` or ``(H, W, C)``, C 1, 3 or 4."""
    shape = spec.shape
    if spec.dtype != "uint8" or len(shape) not in (2, 3) or min(shape[:2]) < 2:
        return False
    return len(shape) == 2 or shape[2] in (1, 3, 4)


def lerobot_name(tensor: str, single: bool) -> str:
    """The feature name of a tensor (``single``: its group, observations say, has one tensor)."""
    if tensor in _RENAMED:
        return _RENAMED[tensor]
    for prefix, feature in _PREFIXES:
        if tensor == prefix:
            return _SINGLE.get(feature, feature) if single else feature
        if tensor.startswith(prefix + "/"):
            return f"{feature}.{tensor[len(prefix) + 1 :].replace('/', '.')}"
    return tensor.replace("/", ".")


def feature_for(spec: TensorSpec, single: bool) -> Feature:
    """The feature a tensor is stored as.

    Raises:
        SchemaError: The tensor has an empty feature (no column can hold it).
    """
    if math.prod(spec.shape) == 0:
        raise SchemaError(
            f"has the empty feature shape {spec.shape}; the lerobot layout cannot store it",
            key=spec.name,
        )
    image = is_image(spec)
    name = lerobot_name(spec.name, single)
    if image and name.startswith(("observation.", "next.observation.")) and ".images." not in name:
        head, _, rest = name.partition("observation.")
        name = f"{head}observation.image" if rest == "state" else f"{head}observation.images.{rest}"
    return Feature(name, spec, image)


def feature_column(feature: Feature, rows: np.ndarray) -> Any:
    """Frames ``(n, *feature)`` as an Arrow array of the feature's type (values untouched)."""
    import pyarrow as pa

    if feature.image:
        data = pa.array(encode_images(rows), pa.binary())
        paths = pa.nulls(len(rows), pa.string())
        return pa.StructArray.from_arrays([data, paths], names=["bytes", "path"])
    native = np.ascontiguousarray(rows, dtype=rows.dtype.newbyteorder("="))
    array = flat_array(native.reshape(-1))
    if feature.shape != [1]:
        array = pa.FixedSizeListArray.from_arrays(array, feature.shape[0])
    return array


def feature_values(feature: Feature, array: Any, where: str) -> np.ndarray:
    """An Arrow column as frames ``(n, *feature)`` of the feature's dtype.

    Raises:
        FormatError: Nulls, a type other than the feature's, or an image that is no PNG of
            the feature's shape.
    """
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.null_count:
        raise FormatError(f"{array.null_count} null values; expected none", key=where)
    count, shape = len(array), feature.spec.shape
    if feature.image:
        if not pa.types.is_struct(array.type) or array.type.get_field_index("bytes") < 0:
            raise FormatError(f"is {array.type}; expected struct<bytes, path>", key=where)
        return decode_images(array.field("bytes").to_pylist(), shape, where)
    values = array
    if feature.shape != [1] and not pa.types.is_list(array.type):
        if not pa.types.is_fixed_size_list(array.type):
            raise FormatError(f"is {array.type}; expected a list of {feature.shape[0]}", key=where)
    while pa.types.is_fixed_size_list(values.type) or pa.types.is_list(values.type):
        values = values.flatten()  # LeRobot's ArrayND columns nest one list per dimension
        if values.null_count:
            raise FormatError(f"{values.null_count} null values; expected none", key=where)
    dtype = np.dtype(feature.spec.dtype)
    if values.type != pa.from_numpy_dtype(dtype) or len(values) != count * math.prod(shape):
        raise FormatError(
            f"is {array.type} of {len(values)} values; expected {feature.spec.dtype} "
            f"{list(shape) or [1]} per frame",
            key=where,
        )
    return values_as(values, dtype).reshape(count, *shape)


def encode_images(rows: np.ndarray) -> list[bytes]:
    """Each frame ``(H, W[, C])`` as PNG bytes (compression level 1, as LeRobot writes)."""
    image = _pil()
    out = []
    for frame in rows:
        squeezed = frame[:, :, 0] if frame.ndim == 3 and frame.shape[2] == 1 else frame
        buffer = io.BytesIO()
        image.fromarray(np.ascontiguousarray(squeezed)).save(buffer, "PNG", compress_level=1)
        out.append(buffer.getvalue())
    return out


def decode_images(data: list[Any], shape: tuple[int, ...], where: str) -> np.ndarray:
    """PNG (or any image PIL opens) bytes as uint8 frames of ``shape``.

    Raises:
        FormatError: Data that is no image, or an image of another size or channel count.
    """
    image = _pil()
    out = np.empty((len(data), *shape), np.uint8)
    for i, blob in enumerate(data):
        try:
            with image.open(io.BytesIO(blob)) as opened:
                size = (opened.width, opened.height)
                frame = None if size[0] * size[1] > 2 * math.prod(shape) else np.asarray(opened)
        except Exception as e:  # PIL raises many kinds for damaged data
            raise FormatError(
                f"frame {i}: not a readable image ({type(e).__name__}: {e})", key=where
            ) from e
        if frame is None:  # a bomb: said before decoding it
            raise FormatError(
                f"frame {i}: not a readable image (an image of {size[0]}x{size[1]}; "
                f"expected {shape})",
                key=where,
            )
        if frame.dtype != np.uint8 or frame.size != out[i].size:
            raise FormatError(
                f"frame {i}: an image of shape {frame.shape} {frame.dtype}; expected uint8 {shape}",
                key=where,
            )
        out[i] = frame.reshape(shape)
    return out


def _pil() -> Any:
    try:
        from PIL import Image
    except ImportError as e:
        raise MissingDependencyError("Pillow", "lerobot", "images of the lerobot layout") from e
    return Image
