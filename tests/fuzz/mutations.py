"""Seeded mutations of the seed corpus: byte damage and structure-aware hostile edits.

``make_mutant(seed, folder, number, campaign)`` copies a seed (a CSV with its sidecar, a
Minari folder whole) into ``folder`` and damages the copy; the same ``(campaign, number)``
always gives the same mutant, so a failure is reproduced from its name alone. Byte damage
(flips, overwrites, truncation, splices) finds what corruption does; the structure-aware
edits (``_formats``) write what a hostile file declares: huge or negative shapes, deflate
bombs, deep JSON, absurd spaces, meta-device tensors, non-UTF-8 names.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.fuzz.structure import (
    arrow_edit,
    csv_edit,
    h5_edit,
    lerobot_json,
    lerobot_parquet,
    metadata_edit,
    minari_json,
    npz_edit,
    parquet_edit,
    pt_edit,
)

Mutation = Callable[[Path, random.Random], str]

_INTERESTING = [
    b"\x00",
    b"\xff",
    b"\x7f",
    b"\x80",
    b"\xff\xff",
    b"\x00\x80",
    b"\xff\xff\xff\xff",
    b"\xff\xff\xff\x7f",
    b"\x00\x00\x00\x80",
    b"\xff" * 8,
    b"\xff\xff\xff\xff\xff\xff\xff\x7f",
]


def kind(seed: Path) -> str:
    """``pt``, ``npz``, ``csv``, ``h5``, ``parquet``, ``minari`` or ``lerobot`` (folders)."""
    if seed.is_dir():
        return "lerobot" if (seed / "meta" / "info.json").is_file() else "minari"
    return {".hdf5": "h5"}.get(seed.suffix, seed.suffix.lstrip("."))


def make_mutant(seed: Path, folder: Path, number: int, campaign: int) -> tuple[Path, str]:
    """Copy ``seed`` into ``folder`` and damage the copy; returns it and what was done."""
    rng = random.Random(f"{campaign}:{number}:{seed.name}")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / seed.name
    if seed.is_dir():
        shutil.copytree(seed, target)
    else:
        shutil.copyfile(seed, target)
        sidecar = seed.with_name(seed.name + ".meta.json")
        if sidecar.is_file():
            shutil.copyfile(sidecar, folder / sidecar.name)
    what = kind(seed)
    strategies: list[tuple[float, Mutation]] = [(3.0, _bytes), (2.0, metadata_edit)]
    strategies += {
        "npz": [(3.0, npz_edit)],
        "pt": [(3.0, pt_edit)],
        "csv": [(3.0, csv_edit)],
        "h5": [(3.0, h5_edit)],
        "parquet": [(3.0, parquet_edit)],
        "arrow": [],  # Arrow IPC: bytes and metadata edits
        "minari": [(2.0, _minari_data), (1.0, minari_json)],
        "lerobot": [(2.0, lerobot_json), (2.0, lerobot_parquet)],
    }[what]
    weights = [w for w, _ in strategies]
    [mutation] = rng.choices([m for _, m in strategies], weights)
    try:
        done = mutation(target, rng)
    except Exception as e:  # a mutation that cannot apply falls back to byte damage
        done = f"{mutation.__name__} failed ({type(e).__name__}); " + _bytes(target, rng)
    return target, f"{seed.name}: {done}"


def _minari_data(target: Path, rng: random.Random) -> str:
    """A hostile edit of a Minari folder's data: its HDF5 file, or one episode's file."""
    episodes = sorted(target.glob("data/*/part-0.*"))
    if not episodes:
        return h5_edit(target, rng)
    path = rng.choice(episodes)
    edit = parquet_edit if path.suffix == ".parquet" else arrow_edit
    return f"episode {path.parent.name}: {edit(path, rng)}"


def _bytes(target: Path, rng: random.Random) -> str:
    """Byte damage to the file, or to one file of a folder (a CSV's sidecar sometimes)."""
    path = target
    if target.is_dir():
        path = rng.choice(sorted(p for p in target.rglob("*") if p.is_file()))
    elif target.suffix == ".csv" and rng.random() < 0.2:
        sidecar = target.with_name(target.name + ".meta.json")
        path = sidecar if sidecar.is_file() else target
    data = bytearray(path.read_bytes())
    steps = []
    for _ in range(rng.choice([1, 1, 2, 3, 6])):
        steps.append(_damage(data, rng))
    path.write_bytes(bytes(data))
    return f"bytes of {path.name}: " + ", ".join(steps)


def _offset(data: bytearray, rng: random.Random) -> int:
    """Where to damage: anywhere, or (half the time) in the first 4 kB, where headers lie."""
    if not data:
        return 0
    if rng.random() < 0.5:
        return rng.randrange(min(len(data), 4096))
    return rng.randrange(len(data))


def _damage(data: bytearray, rng: random.Random) -> str:
    at = _offset(data, rng)
    how = rng.choice(["flip", "overwrite", "interesting", "truncate", "insert", "delete", "copy"])
    if how == "flip" and data:
        bit = rng.randrange(8)
        data[at] ^= 1 << bit
        return f"flip bit {bit} at {at}"
    if how == "overwrite":
        length = rng.choice([1, 4, 16, 256])
        data[at : at + length] = rng.randbytes(length)
        return f"overwrite {length} at {at}"
    if how == "interesting":
        value = rng.choice(_INTERESTING)
        data[at : at + len(value)] = value
        return f"write {value.hex()} at {at}"
    if how == "truncate":
        del data[at:]
        return f"truncate at {at}"
    if how == "insert":
        length = rng.choice([1, 8, 100])
        data[at:at] = rng.randbytes(length)
        return f"insert {length} at {at}"
    if how == "delete":
        length = rng.choice([1, 8, 100])
        del data[at : at + length]
        return f"delete {length} at {at}"
    source = _offset(data, rng)
    length = rng.choice([8, 64, 512])
    data[at:at] = data[source : source + length]
    return f"copy {length} from {source} to {at}"
