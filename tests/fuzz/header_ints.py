"""Every integer of every header at an edge: the property behind "no OverflowError anywhere".

A header is a JSON object a reader trusts for counts, sizes and indexes: the ``__expcli__``
member of npz and pt files, a CSV's sidecar, HDF5's ``expcli`` attribute, a Parquet file's
``expcli`` and ``expcli.parquet`` footer keys, a folder's ``manifest.json``, a LeRobot
folder's ``meta/info.json`` and ``meta/expcli.json``, a Minari folder's ``metadata.json``.
``fields(seed)`` lists each integer leaf (its header and path); mutant ``i`` sets field
``i`` to ``EDGES[i % len(EDGES)]`` and, on the next lap, to the next edge. A reader must
read such a file or refuse it in one line: never an ``OverflowError``, a numpy error, a
hang or gigabytes (the campaign's ``header_ints`` mode runs them).
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tests.fuzz.folders import FOLDER_SEED, PARQUET_SEED
from tests.fuzz.seeds import CORPUS, seeds
from tests.fuzz.structure import _npy, _npz_members, _write_npz

EDGES = [2**63 - 1, -1, 2**64 - 1, -(2**63), 2**62, 2**31, 2**53 + 1, 0, 2**70]

Path_ = tuple[Any, ...]


@dataclass(frozen=True)
class Header:
    """One JSON header of a seed: where it is, read and written on a copy (``root``)."""

    label: str
    read: Callable[[Path], Any]
    write: Callable[[Path, Any], None]


def _json_file(relative: str) -> Header:
    return Header(
        relative,
        lambda root: json.loads((root / relative).read_text()),
        lambda root, obj: (root / relative).write_text(json.dumps(obj)),
    )


def _npz(root: Path) -> Any:
    return json.loads(str(np.load(io.BytesIO(_npz_members(root)["__expcli__.npy"]))))


def _npz_write(root: Path, obj: Any) -> None:
    members = _npz_members(root)
    members["__expcli__.npy"] = _npy(np.array(json.dumps(obj)))
    _write_npz(root, members)


def _pt(root: Path) -> Any:
    import torch

    return json.loads(torch.load(root, weights_only=True)["__expcli__"])


def _pt_write(root: Path, obj: Any) -> None:
    import torch

    data = torch.load(root, weights_only=True)
    data["__expcli__"] = json.dumps(obj)
    torch.save(data, root)


def _h5(root: Path) -> Any:
    import h5py

    with h5py.File(root, "r") as h5:
        return json.loads(h5.attrs["expcli"])


def _h5_write(root: Path, obj: Any) -> None:
    import h5py

    with h5py.File(root, "r+") as h5:
        h5.attrs["expcli"] = json.dumps(obj)


def _parquet(key: bytes) -> Header:
    def read(root: Path) -> Any:
        import pyarrow.parquet as pq

        return json.loads(pq.ParquetFile(root).metadata.metadata[key])

    def write(root: Path, obj: Any) -> None:
        import pyarrow.parquet as pq

        table = pq.read_table(root)
        kv = dict(table.schema.metadata or {})
        kv[key] = json.dumps(obj).encode()
        pq.write_table(table.replace_schema_metadata(kv), root)

    return Header(f"footer {key.decode()}", read, write)


def headers(seed: Path) -> list[Header]:
    """The JSON headers of a seed that expcli reads."""
    if seed.is_dir():
        if (seed / "manifest.json").exists():
            return [_json_file("manifest.json")]
        if (seed / "meta" / "info.json").exists():
            found = [_json_file("meta/info.json")]
            return found + ([_json_file("meta/expcli.json")] * (seed / "meta/expcli.json").exists())
        return [_json_file("data/metadata.json")]
    if seed.suffix == ".csv" and seed.with_name(seed.name + ".meta.json").is_file():
        sidecar = seed.name + ".meta.json"
        return [
            Header(
                "sidecar",
                lambda root: json.loads(root.with_name(sidecar).read_text()),
                lambda root, obj: root.with_name(sidecar).write_text(json.dumps(obj)),
            )
        ]
    if seed.suffix == ".npz" and "__expcli__.npy" in _npz_members(seed):
        return [Header("__expcli__", _npz, _npz_write)]
    if seed.suffix == ".pt" and isinstance(_pt_key(seed), str):
        return [Header("__expcli__", _pt, _pt_write)]
    if seed.suffix in (".h5", ".hdf5") and _has_h5_header(seed):
        return [Header("attribute expcli", _h5, _h5_write)]
    if seed.suffix == ".parquet":  # tables other writers made have no expcli header
        import pyarrow.parquet as pq

        keys = pq.ParquetFile(seed).metadata.metadata or {}
        return [_parquet(key) for key in (b"expcli", b"expcli.parquet") if key in keys]
    return []


def _pt_key(seed: Path) -> Any:
    import torch

    return torch.load(seed, weights_only=True).get("__expcli__")


def _has_h5_header(seed: Path) -> bool:
    import h5py

    with h5py.File(seed, "r") as h5:
        return "expcli" in h5.attrs


def _integers(value: Any, at: Path_ = ()) -> list[Path_]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [at]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _integers(v, (*at, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _integers(v, (*at, i))]
    return []


@dataclass(frozen=True)
class Field:
    """One integer leaf: the seed, its header and the path to it."""

    seed: Path
    header: int
    at: Path_


def all_seeds() -> list[Path]:
    """The file corpus and the two sharded folder seeds (npz and Parquet shards)."""
    return [*seeds(CORPUS), FOLDER_SEED, PARQUET_SEED]


def fields(corpus: list[Path] | None = None) -> list[Field]:
    """Every integer leaf of every header of every seed, in a fixed order."""
    found = []
    for seed in corpus if corpus is not None else all_seeds():
        for number, header in enumerate(headers(seed)):
            found += [Field(seed, number, at) for at in _integers(header.read(seed))]
    return found


def make(field: Field, value: int, folder: Path) -> tuple[Path, str]:
    """Copy the field's seed into ``folder`` with the field set to ``value``."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / field.seed.name
    if field.seed.is_dir():
        shutil.copytree(field.seed, target)
    else:
        shutil.copyfile(field.seed, target)
        sidecar = field.seed.with_name(field.seed.name + ".meta.json")
        if sidecar.is_file():
            shutil.copyfile(sidecar, folder / sidecar.name)
    header = headers(field.seed)[field.header]
    obj = header.read(target)
    place = obj
    for key in field.at[:-1]:
        place = place[key]
    place[field.at[-1]] = value
    header.write(target, obj)
    where = ".".join(str(k) for k in field.at)
    return target, f"{field.seed.name}: {header.label} {where} = {value}"
