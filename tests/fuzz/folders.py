"""Hostile dataset folders: the folder seeds, their mutations, and what a run must leave alone.

Half the mutants are of LeRobot and Minari folders (``LAYOUT_SEEDS``, from the file corpus),
which their readers walk rather than read from a manifest: a file or folder on the way is
linked out of the folder (to a copy whose every float is ``MARKER``), made a pipe, a folder,
``/dev/zero`` or empty, damaged, or a LeRobot data file's rows reordered (``_layout_mutant``).
The rest, below, are sharded folders.

``make_folder_mutant(seed, work, number, campaign)`` copies the committed folder seed (a
tiny ``collect -o DIR`` run: a manifest and two shards) to ``work/src/data`` and changes it
as an attacker or a careless user would: numbers of the manifest at every edge (0, -1,
2**63, 1e300, huge counts), shard entries removed, repeated, renamed past the file system's
limit or out of the folder, tensors dropped from the manifest's list, the manifest written
compactly or with its keys reordered (still valid), and hostile file kinds in place of the
manifest or a shard: a named pipe, a folder, a symbolic link to ``/dev/zero`` or to a
sentinel outside the folder (``work/outside``), stray files, byte damage. The same
``(campaign, number)`` always gives the same mutant.

The sentinels hold values found nowhere else (``MARKER`` in every float, ``TEXT_MARKER`` in
the metadata) and are given an access time older than their modification time, so that
any read of them moves it (``relatime``): a run read outside the folder when a sentinel's
access time moved or its marker came out. A mutant may also name code (a policy file
outside the folder that writes ``work/CODE_RAN`` when imported): reading a folder must
never run it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tests.fuzz import hostile
from tests.fuzz.mutations import _damage
from tests.fuzz.structure import _npy, _npz_members, _write_npz

FOLDER_CORPUS = Path(__file__).with_name("folder_corpus")
FOLDER_SEED = FOLDER_CORPUS / "cartpole"
PARQUET_SEED = FOLDER_CORPUS / "cartpole_parquet"  # the same run in Parquet shards
FRAMES_SEED = FOLDER_CORPUS / "frames"  # frames in short episodes: next observations once
_FILES = Path(__file__).with_name("corpus")
LAYOUT_SEEDS = (  # folders of other layouts, under the same rules (from the file corpus)
    _FILES / "lerobot",  # written by expcli
    _FILES / "minari-parquet",
    _FILES / "lerobot-made",  # written by LeRobot
    _FILES / "minari-arrow",
    _FILES / "minari",  # hdf5 storage
)
MARKER = 271828.1875  # exact in float32 and float64; no seed value is this
TEXT_MARKER = "outside-sentinel-5f3a9c"
CODE_RAN = "CODE_RAN"

FolderMutation = Callable[[Path, Path, random.Random], str]


_FRAMES_ENV = ["benchmarks.frame_env:ConstantFrame-v0", "--env-kwargs"]
_FRAMES_ENV.append('{"shape": [8, 8], "length": 3}')  # 64-byte frames: stored once


def build_seed(
    folder: Path = FOLDER_SEED, shard_format: str = "npz", env: Sequence[str] = ("CartPole-v1",)
) -> Path:
    """Collect a folder seed anew: ``env`` (CartPole), 2 envs, 8 steps, shards of 2 rows."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    args = [*env, "-n", "2", "--steps", "8", "--shard-size", "2", "--seed", "0"]
    subprocess.run(
        [sys.executable, "-m", "expcli", "collect", *args, "--mode", "dummy", "-q"]
        + ["--shard-format", shard_format, "-o", str(folder)],
        check=True,
    )
    return folder


def snapshot(folder: Path) -> dict[str, Any]:
    """Every entry under ``folder`` as it is: kind, size, link target, content digest.

    Nothing but regular files is opened (a named pipe would block), and links are not
    followed.
    """
    entries: dict[str, Any] = {}
    if not os.path.lexists(folder):
        return entries
    for root, dirs, files in os.walk(folder):
        for name in sorted(dirs + files):
            path = Path(root) / name
            info = os.lstat(path)
            key = str(path.relative_to(folder))
            if stat.S_ISLNK(info.st_mode):
                entries[key] = ("link", os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                entries[key] = ("file", info.st_size, digest, info.st_mtime_ns)
            else:
                entries[key] = (stat.S_IFMT(info.st_mode), info.st_mtime_ns)
    return entries


def sentinel_times(outside: Path) -> dict[str, int]:
    """The access times of the sentinels, those in folders too (a read of one moves it)."""
    return {
        str(p.relative_to(outside)): p.stat().st_atime_ns
        for p in sorted(outside.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def seed_for(number: int) -> Path:
    """The seed of folder mutant ``number``: of every eight, four are sharded folders (two of
    npz shards, one of Parquet shards, one of frames stored once) and four LeRobot or Minari
    folders, taken in turn."""
    if number % 8 >= 4:
        return LAYOUT_SEEDS[(number // 8 * 4 + number % 8 - 4) % len(LAYOUT_SEEDS)]
    return {3: PARQUET_SEED, 1: FRAMES_SEED}.get(number % 4, FOLDER_SEED)


def _shards(folder: Path) -> list[str]:
    """The names of the seed's two shard files, in order."""
    names = sorted(p.name for p in folder.iterdir() if p.name.startswith("shard-"))
    return names[:2]


def make_folder_mutant(
    seed: Path, work: Path, number: int, campaign: int
) -> tuple[Path, Path, str, bool]:
    """Copy ``seed`` to ``work/src/data`` and change it.

    Returns the folder, the sentinel folder, what was done, and whether the mutant is still
    a valid dataset that every operation must read (a manifest reformatted, say).
    """
    rng = random.Random(f"folders:{campaign}:{number}")
    folder = work / "src" / "data"
    outside = work / "outside"
    folder.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(seed, folder)
    if seed in LAYOUT_SEEDS:
        return _layout_mutant(seed, folder, outside, rng)
    _sentinels(folder, outside)
    strategies: list[tuple[float, FolderMutation]] = [
        (4.0, _manifest_number),
        (2.0, _manifest_structure),
        (3.0, _hostile_kind),
        (1.5, _damage_bytes),
        (1.0, _parquet_content if seed == PARQUET_SEED else _shard_content),
        (1.0, _code_settings),
        (1.0, _valid_change),
    ]
    [mutation] = rng.choices([m for _, m in strategies], [w for w, _ in strategies])
    try:
        done = mutation(folder, outside, rng)
    except Exception as e:  # one that cannot apply (JSON too deep to write) damages bytes
        shutil.rmtree(folder)
        shutil.copytree(seed, folder)
        done = f"{mutation.__name__} failed ({type(e).__name__}); "
        done += _damage_bytes(folder, outside, rng)
        mutation = _damage_bytes
    valid = mutation is _valid_change
    _age(outside)
    return folder, outside, f"{seed.name}: {done}", valid


def _sentinels(folder: Path, outside: Path) -> None:
    """A shard and a manifest outside the folder, each marked, and a policy that leaves a trace."""
    outside.mkdir(parents=True, exist_ok=True)
    members = _npz_members(FOLDER_SEED / "shard-000000.npz")
    for name, raw in list(members.items()):
        array = np.load(io.BytesIO(raw))
        if array.dtype.kind == "f":
            members[name] = _npy(np.full_like(array, MARKER))
    _write_npz(outside / "secret.npz", members)
    manifest = _load(folder)
    manifest["env_id"] = TEXT_MARKER
    manifest["shards"][0]["bytes"] = (outside / "secret.npz").stat().st_size
    (outside / "manifest.json").write_text(json.dumps(manifest, indent=1))
    marker = outside.parent / CODE_RAN
    (outside / "evil.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
        "def act(observation):\n    return 0\n"
    )


def _age(outside: Path) -> None:
    for path in outside.rglob("*"):
        if path.is_file() and not path.is_symlink():
            info = path.stat()
            os.utime(path, ns=(info.st_mtime_ns - 10**12, info.st_mtime_ns))


def _load(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "manifest.json").read_text()))


def _save(folder: Path, manifest: Any, compact: bool = False) -> None:
    text = json.dumps(manifest, separators=(",", ":")) if compact else json.dumps(manifest)
    (folder / "manifest.json").write_text(text, encoding="utf-8", errors="surrogatepass")


EDGES: list[Any] = [
    0,
    -1,
    1,
    2,
    3,
    2**31,
    2**32 + 1,
    2**63 - 1,
    2**63,
    2**64,
    10**12,
    10**400,
    1e300,
    1e12,
    2.0,
    float("nan"),
    True,
    None,
    "2",
    [2],
]
_NUMBERS = ("num_envs", "memory_size", "memory_index", "env_index", "filled")
_ENTRY_KEYS = ("rows", "bytes", "crc32", "file", "missing")


def _manifest_number(folder: Path, outside: Path, rng: random.Random) -> str:
    """A number of the manifest (a header count, a shard's rows or bytes, a shape) at an edge."""
    manifest = _load(folder)
    value = rng.choice(EDGES)
    where = rng.choice(["header", "entry", "entry", "shape"])
    if where == "header":
        key = rng.choice(_NUMBERS)
        manifest[key] = value
        label = key
    elif where == "entry":
        index = rng.randrange(len(manifest["shards"]))
        key = rng.choice(("rows", "rows", "bytes"))
        manifest["shards"][index][key] = value
        label = f"shards[{index}].{key}"
    else:
        name = rng.choice(sorted(manifest["tensors"]))
        shape = manifest["tensors"][name]["shape"]
        shape = [value] if not shape else [value, *shape[1:]]
        manifest["tensors"][name]["shape"] = shape
        label = f"tensors.{name}.shape"
    _save(folder, manifest)
    return f"{label} = {json.dumps(value)[:40]}"


def _manifest_structure(folder: Path, outside: Path, rng: random.Random) -> str:
    """Entries dropped, repeated, renamed; tensors dropped or changed; the JSON broken."""
    manifest = _load(folder)
    shards = manifest["shards"]
    how = rng.choice(
        [
            "drop tensor",
            "drop shard",
            "repeat shard",
            "swap shards",
            "long name",
            "escaping name",
            "missing",
            "dtype",
            "entry key",
            "schema",
            "hostile json",
            "cut short",
            "deep",
            "no shards",
        ]
    )
    if how == "drop tensor":
        name = rng.choice(sorted(manifest["tensors"]))
        del manifest["tensors"][name]
        how += f" {name}"
    elif how == "drop shard":
        del shards[rng.randrange(len(shards))]
    elif how == "repeat shard":
        shards.append(dict(shards[0]))
    elif how == "swap shards":
        shards.reverse()
    elif how == "long name":
        shards[0]["file"] = "shard-" + "0" * rng.choice([200, 300, 5000]) + ".npz"
    elif how == "escaping name":
        shards[0]["file"] = rng.choice(
            ["../outside/secret.npz", "/dev/zero", "shard-000000.npz/", "..", "manifest.json"]
        )
    elif how == "missing":
        shards[0]["missing"] = rng.choice([["rewards"], ["actions"], ["nope"], "rewards", [1]])
    elif how == "dtype":
        name = rng.choice(sorted(manifest["tensors"]))
        manifest["tensors"][name]["dtype"] = rng.choice(["float64", "object", "<U3", "V8", "x"])
    elif how == "entry key":
        key = rng.choice(_ENTRY_KEYS)
        shards[rng.randrange(len(shards))][key] = hostile.hostile_value(rng)
        how += f" {key}"
    elif how == "schema":
        manifest["schema"] = rng.choice(["expcli/2", None, 1, ""])
    elif how == "hostile json":
        manifest = hostile.mutate_json(manifest, rng)
    elif how == "no shards":
        manifest["shards"] = rng.choice([[], None, {}, "shard-000000.npz"])
    if how == "cut short":
        text = json.dumps(manifest)
        (folder / "manifest.json").write_text(text[: rng.randrange(1, len(text))])
    elif how == "deep":
        (folder / "manifest.json").write_text(
            '{"schema": "expcli/1", "shards": ' + hostile.deep_json(100_000) + "}"
        )
    else:
        _save(folder, manifest)
    return f"manifest {how}"


def _hostile_kind(folder: Path, outside: Path, rng: random.Random) -> str:
    """The manifest or a shard replaced by a link out of the folder, a pipe, a folder."""
    target = rng.choice(["manifest.json", *_shards(folder)])
    path = folder / target
    kind = rng.choice(["fifo", "folder", "link zero", "link outside", "link outside", "empty"])
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "link zero":
        path.symlink_to("/dev/zero")
    elif kind == "empty":
        path.write_bytes(b"")
    else:
        source = outside / ("manifest.json" if target == "manifest.json" else "secret.npz")
        path.symlink_to(source)
        if target != "manifest.json":  # the manifest agrees with the link: the best a lie can do
            manifest = _load(folder)
            for entry in manifest["shards"]:
                if entry["file"] == target:
                    entry["bytes"] = source.stat().st_size
            _save(folder, manifest)
    return f"{target} is a {kind}"


def _damage_bytes(folder: Path, outside: Path, rng: random.Random) -> str:
    """Byte damage to the manifest or a shard."""
    path = folder / rng.choice(["manifest.json", *_shards(folder)])
    data = bytearray(path.read_bytes())
    steps = [_damage(data, rng) for _ in range(rng.choice([1, 1, 2, 4]))]
    path.write_bytes(bytes(data))
    return f"bytes of {path.name}: " + ", ".join(steps)


def _shard_content(folder: Path, outside: Path, rng: random.Random) -> str:
    """A shard rewritten: its members reshaped, dropped, added, or the shards swapped."""
    how = rng.choice(["swap files", "drop member", "extra member", "more rows", "deflated"])
    path = folder / "shard-000000.npz"
    if how == "swap files":
        other = folder / "shard-000001.npz"
        a, b = path.read_bytes(), other.read_bytes()
        path.write_bytes(b)
        other.write_bytes(a)
        return "shards swapped"
    members = _npz_members(path)
    names = sorted(n for n in members if n.startswith("__next__/") or not n.startswith("__"))
    if how == "drop member":
        del members[rng.choice(names)]
    elif how == "extra member":
        members["extra.npy"] = _npy(np.zeros((2, 2, 1), np.float32))
    elif how == "more rows":
        name = rng.choice(names)
        array = np.load(io.BytesIO(members[name]))
        members[name] = _npy(np.concatenate([array, array]))
    _write_npz(path, members, deflate=how == "deflated")
    if rng.random() < 0.7:  # the manifest agrees with the shard's size and CRC
        manifest = _load(folder)
        entry = manifest["shards"][0]
        entry["bytes"] = path.stat().st_size
        from expcli.formats._manifest import file_crc32

        entry["crc32"] = file_crc32(path)
        _save(folder, manifest)
        how += ", manifest updated"
    return f"shard-000000.npz {how}"


def _parquet_content(folder: Path, outside: Path, rng: random.Random) -> str:
    """A Parquet shard damaged or rewritten with the manifest agreeing (its size and CRC).

    Only the shard's own checks (footer, page checksums, column types, its metadata against
    the manifest) can tell: a damaged byte, the other shard's file, a column of another type.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / "shard-000000.parquet"
    how = rng.choice(["damaged", "damaged", "swap files", "other type", "no metadata"])
    if how == "damaged":
        data = bytearray(path.read_bytes())
        steps = [_damage(data, rng) for _ in range(rng.choice([1, 2, 4]))]
        path.write_bytes(bytes(data))
        how += " (" + ", ".join(steps) + ")"
    elif how == "swap files":
        other = folder / "shard-000001.parquet"
        a, b = path.read_bytes(), other.read_bytes()
        path.write_bytes(b)
        other.write_bytes(a)
    else:
        table = pq.read_table(path)
        if how == "other type":
            index = table.schema.get_field_index("rewards")
            table = table.set_column(index, "rewards", pa.array([0.5] * len(table), pa.float64()))
        else:
            table = table.replace_schema_metadata(None)
        pq.write_table(table, path)
    manifest = _load(folder)
    for entry in manifest["shards"]:
        name = entry["file"]
        if name in (path.name, "shard-000001.parquet"):
            from expcli.formats._manifest import file_crc32

            entry["bytes"] = (folder / name).stat().st_size
            entry["crc32"] = file_crc32(folder / name)
    _save(folder, manifest)
    return f"{path.name} {how}, manifest updated"


def _code_settings(folder: Path, outside: Path, rng: random.Random) -> str:
    """Recorded settings that name code outside the folder (never run by a read)."""
    manifest = _load(folder)
    settings = manifest["collector"]["collect_settings"]
    how = rng.choice(["policy", "wrappers", "env_id", "env_kwargs"])
    evil = str(outside / "evil.py")
    if how == "policy":
        settings["policy"] = f"{evil}:act"
        manifest["collector"]["policy"] = {"kind": "file", "spec": f"{evil}:act"}
    elif how == "wrappers":
        settings["wrappers"] = [f"{evil}:act"]
        manifest["wrappers"] = [f"{evil}:act"]
    elif how == "env_id":
        settings["env_id"] = "evil:Evil-v0"
        manifest["env_id"] = "evil:Evil-v0"
    else:
        settings["env_kwargs"] = {"render_mode": f"{evil}:act"}
    _save(folder, manifest)
    return f"settings name code: {how}"


def _valid_change(folder: Path, outside: Path, rng: random.Random) -> str:
    """Still a valid folder: the manifest compact, reordered, or a stray file beside."""
    manifest = _load(folder)
    how = rng.choice(["compact", "reordered", "stray shard", "lock file", "temp file"])
    if how == "compact":
        _save(folder, manifest, compact=True)
    elif how == "reordered":
        _save(folder, dict(reversed(list(manifest.items()))), compact=rng.random() < 0.5)
    elif how == "stray shard":
        first = _shards(folder)[0]
        shutil.copyfile(folder / first, folder / first.replace("000000", "000007"))
    elif how == "lock file":
        (folder / ".lock").write_text("12345 host 2026-01-01\n")
    else:
        (folder / ".shard-000002.npz.tmp-x1").write_bytes(b"torn")
    return f"valid: {how}"


def _layout_mutant(
    seed: Path, folder: Path, outside: Path, rng: random.Random
) -> tuple[Path, Path, str, bool]:
    """A LeRobot or Minari folder made hostile: a file or folder on its way linked out of it
    (to a marked copy), a pipe, a folder or ``/dev/zero`` in a file's place, byte damage,
    LeRobot rows reordered; or a stray file its reader passes over (still valid)."""
    outside.mkdir(parents=True, exist_ok=True)
    shutil.copytree(seed, outside / "copy")
    _mark(outside / "copy")
    strategies: list[tuple[float, Callable[[Path, Path, random.Random], str]]] = [
        (4.0, _layout_kind),
        (1.5, _layout_bytes),
        (1.0, _layout_rows),
        (1.0, _layout_valid),
    ]
    [mutation] = rng.choices([m for _, m in strategies], [w for w, _ in strategies])
    done = mutation(folder, outside, rng)
    _age(outside)
    # a valid one is read by every operation; --check may still find what the seed holds
    # (the corpus's random observations lie outside their Box)
    return folder, outside, f"{seed.name}: {done}", mutation is _layout_valid


def _mark(copy: Path) -> None:
    """Every float of the copy's data files becomes ``MARKER``: a read of them shows."""
    import h5py
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in sorted(copy.rglob("*")):
        if path.suffix == ".parquet":
            table = pq.read_table(path)
            pq.write_table(_marked_table(table, pa), path)
        elif path.suffix == ".arrow":
            table = pa.ipc.open_file(pa.BufferReader(path.read_bytes())).read_all()
            with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
                out.write_table(_marked_table(table, pa))
        elif path.suffix == ".hdf5":
            with h5py.File(path, "r+") as h5:
                h5.visititems(
                    lambda _, item: (
                        item.__setitem__(Ellipsis, MARKER)
                        if isinstance(item, h5py.Dataset) and item.dtype.kind == "f" and item.shape
                        else None
                    )
                )


def _marked_table(table: Any, pa: Any) -> Any:
    columns = []
    for column in table.columns:
        kind, whole = column.type, column.combine_chunks()
        if pa.types.is_floating(kind):
            whole = pa.array(np.full(len(whole), MARKER), kind)
        elif pa.types.is_fixed_size_list(kind) and pa.types.is_floating(kind.value_type):
            values = pa.array(np.full(len(whole.values), MARKER), kind.value_type)
            whole = pa.FixedSizeListArray.from_arrays(values, kind.list_size)
        elif pa.types.is_list(kind) and pa.types.is_floating(kind.value_type):
            values = pa.array(np.full(len(whole.values), MARKER), kind.value_type)
            whole = pa.ListArray.from_arrays(whole.offsets, values)
        columns.append(whole)
    marked = pa.table(columns, names=table.column_names)
    return marked.replace_schema_metadata(table.schema.metadata)


def _layout_paths(folder: Path) -> list[str]:
    """The folders and files a reader walks through, relative to the folder."""
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if not p.name.startswith(".") and p.name != "tasks.parquet" and p.name != "stats.json"
    )


def _layout_kind(folder: Path, outside: Path, rng: random.Random) -> str:
    """A file or folder on the reader's way replaced by a link out, a pipe, a folder, a void."""
    relative = rng.choice(_layout_paths(folder))
    path = folder / relative
    was_folder = path.is_dir()
    kinds = ["link outside", "link outside", "link outside", "fifo", "link zero", "empty"]
    kind = rng.choice(kinds if not was_folder else ["link outside", "link outside", "fifo"])
    if was_folder:
        shutil.rmtree(path)
    else:
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link zero":
        path.symlink_to("/dev/zero")
    elif kind == "empty":
        path.write_bytes(b"")
    else:
        path.symlink_to(outside / "copy" / relative, target_is_directory=was_folder)
    return f"{relative} is a {kind}"


def _layout_bytes(folder: Path, outside: Path, rng: random.Random) -> str:
    """Byte damage to one of the folder's files."""
    files = [p for p in (folder / r for r in _layout_paths(folder)) if p.is_file()]
    path = rng.choice(files)
    data = bytearray(path.read_bytes())
    steps = [_damage(data, rng) for _ in range(rng.choice([1, 1, 2, 4]))]
    path.write_bytes(bytes(data))
    return f"bytes of {path.relative_to(folder)}: " + ", ".join(steps)


def _layout_rows(folder: Path, outside: Path, rng: random.Random) -> str:
    """A LeRobot data file's rows reversed or shuffled; Minari episodes' folders swapped."""
    import pyarrow.parquet as pq

    files = sorted((folder / "data").glob("*/*.parquet"))
    if (folder / "meta" / "info.json").exists() and files:
        path = rng.choice(files)
        table = pq.read_table(path)
        order = list(range(len(table)))
        how = rng.choice(["reversed", "shuffled"])
        order.reverse() if how == "reversed" else rng.shuffle(order)
        pq.write_table(table.take(order), path)
        return f"rows of {path.relative_to(folder)} {how}"
    episodes = sorted(p for p in (folder / "data").iterdir() if p.is_dir())
    if len(episodes) < 2:
        return _layout_bytes(folder, outside, rng)
    a, b = rng.sample(episodes, 2)
    a.rename(folder / "data" / "swap")
    b.rename(a)
    (folder / "data" / "swap").rename(b)
    return f"episodes {a.name} and {b.name} swapped"


def _layout_valid(folder: Path, outside: Path, rng: random.Random) -> str:
    """Still valid: a stray file beside what the reader reads, which it passes over."""
    if (folder / "meta" / "info.json").exists():
        where = rng.choice(["data/chunk-000/notes.txt", "meta/README.md", ".lock"])
    else:
        where = rng.choice(["data/README.md", ".lock"])
    (folder / where).write_text("a note\n")
    return f"valid: stray {where}"


if __name__ == "__main__":
    print(build_seed(Path(sys.argv[1]) if len(sys.argv) > 1 else FOLDER_SEED))
    print(build_seed(PARQUET_SEED, "parquet"))
    print(build_seed(FRAMES_SEED, env=_FRAMES_ENV))
