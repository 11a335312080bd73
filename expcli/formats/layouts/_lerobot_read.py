"""Reading the frames of a LeRobot v3 folder: its features checked, its data files read.

The features come from ``meta/info.json`` (or, for a folder expcli wrote, the tensors its
sidecar ``meta/expcli.json`` names); every data file's columns must be of the declared
types, with no nulls. The frames are put in ``index`` order. A folder expcli wrote is then
scattered back into its ``(T, N)`` cells by each episode's ``expcli/env`` and
``expcli/first_row``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError, SchemaError
from expcli.formats._guards import brief, check_read_whole
from expcli.formats.dataset import Dataset
from expcli.formats.header import dataset_from_header, header_specs
from expcli.formats.layouts._lerobot_features import AUTO_FEATURES, Feature
from expcli.formats.layouts._lerobot_features import from_arrow as column_values
from expcli.spec import SUPPORTED_DTYPES, TensorSpec

__all__ = ["Frames", "read_frames"]

_BOOK = ("index", "episode_index", "frame_index")


@dataclass
class Frames:
    """Every frame of a folder: each feature's values ``(F, *shape)``, in ``index`` order."""

    columns: dict[str, np.ndarray]
    book: dict[str, np.ndarray]

    def episode_ends(self) -> np.ndarray:
        """Whether each frame is the last one of its episode."""
        episodes = self.book["episode_index"]
        ends = np.ones(len(episodes), bool)
        ends[:-1] = episodes[1:] != episodes[:-1]
        return ends

    def scatter(self, root: Path, sidecar: dict[str, Any]) -> Dataset:
        """The frames of a folder expcli wrote back in their ``(T, N)`` cells.

        Raises:
            FormatError, SchemaError: The sidecar, the episodes or the frames disagree.
        """
        from expcli.formats.layouts.lerobot_layout import EXPCLI, sidecar_header

        header = sidecar_header(root, sidecar)
        names = sidecar.get("features")
        size, envs = header.get("memory_size"), header.get("num_envs")
        if not isinstance(names, dict) or type(size) is not int or type(envs) is not int:
            raise FormatError(
                "lacks the features, memory_size or num_envs", path=root / EXPCLI, key="features"
            )
        env, first = _episode_places(root, self.book["episode_index"], envs)
        rows = (first + self.book["frame_index"]) % max(size, 1)
        arrays = {}
        for spec in header_specs(header, root / EXPCLI):
            values = self.columns.get(str(names.get(spec.name)))
            if values is None:
                raise SchemaError("has no feature in the folder", path=root / EXPCLI, key=spec.name)
            array = np.zeros((size, envs, *spec.shape), values.dtype)
            array[rows, env] = values.reshape(len(values), *spec.shape)
            arrays[spec.name] = array
        dataset = dataset_from_header(arrays, header, root)
        dataset.metadata["layout"] = "lerobot"
        return dataset


def read_frames(root: Path, info: dict[str, Any], sidecar: dict[str, Any] | None) -> Frames:
    """Read every data file's frames.

    Raises:
        FormatError: A malformed feature, a video feature, a missing or damaged data file,
            or a column of another type than declared.
        ConfigError: The frames do not fit in the memory available.
    """
    import pyarrow.parquet as pq

    features = _features(root, info, sidecar)
    files = sorted((root / "data").glob("*/*.parquet"))
    if not files:
        raise FormatError("holds no data/*/*.parquet files", path=root)
    total = info.get("total_frames")
    frame_bytes = sum(math.prod(f.spec.shape) * np.dtype(f.spec.dtype).itemsize for f in features)
    check_read_whole((total if type(total) is int else 0) * (frame_bytes + 24), root)
    parts: dict[str, list[np.ndarray]] = {n: [] for n in (*_BOOK, *(f.name for f in features))}
    for path in files:
        try:
            table = pq.read_table(path, columns=list(parts))
        except (OSError, ValueError, KeyError) as e:  # pyarrow's errors derive from these
            raise FormatError(
                f"cannot read its frames ({type(e).__name__}: {brief(str(e))})", path=path
            ) from e
        for name in _BOOK:
            counter = Feature(name, TensorSpec(name, "int64", (1,)), image=False)
            parts[name].append(_values(counter, table.column(name), path).reshape(-1))
        for feature in features:
            parts[feature.name].append(_values(feature, table.column(feature.name), path))
    joined = {name: np.concatenate(p) for name, p in parts.items()}
    order = np.argsort(joined["index"], kind="stable")
    if not np.array_equal(order, np.arange(len(order))):
        joined = {name: values[order] for name, values in joined.items()}
    book = {name: joined.pop(name) for name in _BOOK}
    return Frames(joined, book)


def _values(feature: Feature, column: Any, path: Path) -> np.ndarray:
    try:
        return column_values(feature, column, feature.name)
    except FormatError as e:
        raise FormatError(e.message, path=path, key=e.key) from e


def _features(root: Path, info: dict[str, Any], sidecar: dict[str, Any] | None) -> list[Feature]:
    """The features to read: all declared but LeRobot's bookkeeping and ``next.done``."""
    from expcli.formats.layouts.lerobot_layout import EXPCLI, INFO, sidecar_header

    declared = info.get("features")
    if not isinstance(declared, dict):
        raise FormatError("lacks a 'features' object", path=root / INFO, key="features")
    specs: dict[str, TensorSpec] = {}
    if sidecar is not None:
        names = sidecar.get("features")
        header = sidecar_header(root, sidecar)
        if not isinstance(names, dict):
            raise FormatError("lacks a 'features' object", path=root / EXPCLI, key="features")
        specs = {str(names.get(s.name)): s for s in header_specs(header, root / EXPCLI)}
    derived = {*AUTO_FEATURES, *(("next.done",) if sidecar is not None else ())}
    features = []
    for name, entry in declared.items():
        if name in derived and name not in specs:
            continue
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if not isinstance(dtype, str) or not (
            isinstance(shape, list) and shape and all(type(d) is int and d > 0 for d in shape)
        ):
            raise FormatError(
                f"malformed feature {brief(entry)}; expected "
                '{"dtype": str, "shape": [positive sizes], "names": ...}',
                path=root / INFO,
                key=f"features/{name}",
            )
        if dtype == "video":
            raise FormatError(
                "is a video feature (frames in MP4 files); decoding LeRobot videos is not "
                "supported: convert it to an image feature with LeRobot first",
                path=root / INFO,
                key=f"features/{name}",
            )
        spec = specs.get(name) or _spec(root, name, dtype, shape, entry.get("names"))
        features.append(Feature(name, spec, image=dtype == "image"))
    return features


def _spec(root: Path, name: str, dtype: str, shape: list[int], names: Any) -> TensorSpec:
    from expcli.formats.layouts.lerobot_layout import INFO

    if dtype == "image":
        if len(shape) != 3:
            raise FormatError(
                f"is an image of shape {shape}; expected [height, width, channels]",
                path=root / INFO,
                key=f"features/{name}",
            )
        if isinstance(names, list) and names and names[0] == "channels":
            shape = [shape[1], shape[2], shape[0]]  # PNG frames decode height first
        return TensorSpec(name, "uint8", tuple(shape))
    if dtype not in SUPPORTED_DTYPES:
        raise FormatError(
            f"has dtype {dtype!r}; expected one of {sorted(SUPPORTED_DTYPES)} or image",
            path=root / INFO,
            key=f"features/{name}",
        )
    return TensorSpec(name, dtype, tuple(shape))


def _episode_places(root: Path, episodes: np.ndarray, envs: int) -> tuple[np.ndarray, np.ndarray]:
    """Each frame's env column and its episode's first row, from ``meta/episodes``."""
    import pyarrow.parquet as pq

    files = sorted((root / "meta" / "episodes").glob("*/*.parquet"))
    wanted = ["episode_index", "expcli/env", "expcli/first_row"]
    found: dict[str, list[np.ndarray]] = {name: [] for name in wanted}
    for path in files:
        try:
            table = pq.read_table(path, columns=wanted)
        except (OSError, ValueError, KeyError) as e:
            raise FormatError(
                f"cannot read the episodes ({type(e).__name__}: {brief(str(e))})", path=path
            ) from e
        for name in wanted:
            counter = Feature(name, TensorSpec(name, "int64", (1,)), image=False)
            found[name].append(_values(counter, table.column(name), path).reshape(-1))
    if not files:
        raise FormatError("holds no meta/episodes/*/*.parquet files", path=root)
    number, env, first = (np.concatenate(found[name]) for name in wanted)
    places = np.full((2, int(number.max(initial=-1)) + 1), -1, np.int64)
    if len(number) and number.min() < 0:
        raise FormatError("a negative episode_index", path=files[0], key="episode_index")
    places[0, number], places[1, number] = env, first
    if len(episodes) and (episodes.min() < 0 or episodes.max() >= places.shape[1]):
        raise FormatError("a frame's episode_index has no episode row", path=root / "data")
    env_of, first_of = places[0, episodes], places[1, episodes]
    if len(episodes) and (env_of.min() < 0 or env_of.max() >= envs or first_of.min() < 0):
        raise FormatError(
            f"an episode's expcli/env or expcli/first_row is outside {envs} env columns",
            path=files[0],
        )
    return env_of, first_of
