"""Structure-aware hostile edits of one format each: metadata, npz members, pt tensors, CSV
text and HDF5 objects. Each takes the mutant's path and a seeded ``random.Random`` and
returns what it did, in a few words."""

from __future__ import annotations

import io
import json
import random
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from tests.fuzz import hostile
from tests.fuzz.bombs import bomb_npz

_KEY = "__expcli__"


def _json_text(before: Any, rng: random.Random) -> tuple[str, str]:
    """A hostile metadata text, and what it is."""
    roll = rng.random()
    if roll < 0.1:
        depth = rng.choice([900, 5000, 100_000])
        return '{"schema": "expcli/1", "x": ' + hostile.deep_json(depth) + "}", f"deep {depth}"
    if roll < 0.15:
        return json.dumps(before)[: rng.randrange(1, 40)], "cut short"
    if roll < 0.2:
        return json.dumps(hostile.hostile_value(rng)), "replaced whole"
    after = hostile.mutate_json(before, rng)
    changed = (
        [k for k in after if before.get(k) != after.get(k)]
        if isinstance(before, dict) and isinstance(after, dict)
        else []
    )
    label = f"{changed[0]} = {json.dumps(after[changed[0]])[:60]}" if changed else "node"
    return json.dumps(after), label


def metadata_edit(target: Path, rng: random.Random) -> str:
    """Hostile metadata wherever the format keeps it (added where there is none)."""
    if target.is_dir():
        if (target / "meta" / "info.json").is_file():
            return lerobot_json(target, rng)
        return minari_json(target, rng)
    suffix = target.suffix
    if suffix == ".csv":
        sidecar = target.with_name(target.name + ".meta.json")
        before = json.loads(sidecar.read_text()) if sidecar.is_file() else {}
        text, what = _json_text(before, rng)
        sidecar.write_text(text, encoding="utf-8", errors="surrogatepass")
        return f"sidecar {what}"
    if suffix == ".npz":
        members = _npz_members(target)
        raw = members.get(f"{_KEY}.npy")
        before = json.loads(str(np.load(io.BytesIO(raw)))) if raw else {}
        text, what = _json_text(before, rng)
        members[f"{_KEY}.npy"] = _npy(np.array(text))
        _write_npz(target, members)
        return f"npz metadata {what}"
    if suffix == ".pt":
        import torch

        obj = torch.load(target, weights_only=True)
        before = json.loads(obj[_KEY]) if isinstance(obj.get(_KEY), str) else {}
        text, what = _json_text(before, rng)
        obj[_KEY] = text
        torch.save(obj, target)
        return f"pt metadata {what}"
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        kv = dict(pq.ParquetFile(target).metadata.metadata or {})
        key = rng.choice([b"expcli", b"expcli", b"expcli.parquet"])
        text, what = _json_text(json.loads(kv.get(key, b"{}")), rng)
        kv[key] = text.encode("utf-8", "surrogatepass")
        _write_parquet(target, pq.read_table(target), kv)
        return f"parquet {key.decode()} {what}"
    return _h5_metadata(target, rng)


def _write_parquet(target: Path, table: Any, kv: dict[bytes, bytes]) -> None:
    import pyarrow.parquet as pq

    kv.pop(b"ARROW:schema", None)  # pyarrow stores the new table's
    pq.write_table(table.replace_schema_metadata(kv), target, row_group_size=7)


def parquet_edit(target: Path, rng: random.Random) -> str:
    """Columns of other types, nulls, dropped or extra columns, or an extension type."""
    import pyarrow.parquet as pq

    table = pq.read_table(target)
    kv = dict(pq.ParquetFile(target).metadata.metadata or {})
    table, kv, what = _table_edit(table, kv, rng)
    _write_parquet(target, table, kv)
    return f"parquet {what}"


def arrow_edit(target: Path, rng: random.Random) -> str:
    """``parquet_edit`` of an Arrow IPC file (an episode of Minari's arrow storage)."""
    import pyarrow as pa

    with pa.ipc.open_file(pa.OSFile(str(target))) as reader:
        table = reader.read_all()
    table, kv, what = _table_edit(table, dict(table.schema.metadata or {}), rng)
    table = table.replace_schema_metadata(kv)
    with pa.OSFile(str(target), "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
        out.write_table(table, max_chunksize=rng.choice([3, 1 << 20]))
    return f"arrow {what}"


def _table_edit(table: Any, kv: dict[bytes, bytes], rng: random.Random) -> tuple[Any, Any, str]:
    import pyarrow as pa

    names = [n for n in table.column_names if n not in ("index", "env", "row")]
    name = rng.choice(names)
    at = table.schema.get_field_index(name)
    count = table.num_rows
    how = rng.choice(["type", "nulls", "drop", "extra", "extension", "pandas", "image", "declared"])
    if how == "type":
        other = rng.choice(
            [
                pa.array(np.zeros(count)),
                pa.array(["x"] * count),
                pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(3 * count, np.float32)), 3),
                pa.array([b"1234567"] * count, pa.binary(7)),
                pa.array(np.zeros(count, np.int8)),
            ]
        )
        table = table.set_column(at, name, other)
    elif how == "nulls":
        column = table.column(at).to_pylist()
        column[rng.randrange(count)] = None
        table = table.set_column(at, name, pa.array(column, table.schema.field(at).type))
    elif how == "drop":
        table = table.remove_column(at)
    elif how == "extra":
        table = table.append_column("surprise", pa.array(range(count)))
    elif how == "extension":
        fields = list(table.schema)
        fields[at] = fields[at].with_metadata({b"ARROW:extension:name": b"ray.data.arrow_tensor"})
        table = table.cast(pa.schema(fields))
    elif how == "image" and "bytes" in str(table.schema.field(at).type):
        table = table.set_column(at, name, _hostile_images(table.column(at), rng))
    elif how == "declared":  # metadata declaring a hostile feature of the column
        feature = rng.choice(
            [
                {"_type": "Image"},
                {"_type": "Array2D", "shape": [1 << 20, 1 << 20], "dtype": "float32"},
                {"_type": "Array2D", "shape": [-1, 3], "dtype": "object"},
                {"_type": "Array3D", "shape": [None, 2, 2], "dtype": "uint8"},
                {"shape": [7], "dtype": "float64"},
            ]
        )
        kv[b"huggingface"] = json.dumps({"info": {"features": {name: feature}}}).encode()
    else:
        kv[b"pandas"] = b'{"columns": [{"name": "__import__(\'os\')", "pandas_type": "object"}]}'
    return table, kv, f"{how} {name}"


def _hostile_images(column: Any, rng: random.Random) -> Any:
    """An image column (struct of bytes and path) with one row made hostile: a bomb (PNG or
    JPEG header), no image, an image of another shape, or a path without bytes."""
    import pyarrow as pa

    rows = column.combine_chunks()
    blobs, paths = rows.field("bytes").to_pylist(), rows.field("path").to_pylist()
    at = rng.randrange(len(blobs))
    how = rng.choice(["bomb", "jpeg", "empty", "magic", "shape", "path"])
    if how == "path":
        blobs[at], paths[at] = None, "/etc/passwd"
    elif how == "shape":
        blobs[at] = png_bytes(np.zeros((3, 5), np.uint8))
    else:
        blobs[at] = {"bomb": bomb_png(), "jpeg": bomb_jpeg(), "empty": b"", "magic": b"\x89PNG"}[
            how
        ]
    data, named = pa.array(blobs, pa.binary()), pa.array(paths, pa.string())
    return pa.StructArray.from_arrays([data, named], ["bytes", "path"])


def png_bytes(frame: np.ndarray) -> bytes:
    """``frame`` as PNG bytes."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, "PNG")
    return buffer.getvalue()


def bomb_jpeg() -> bytes:
    """A JPEG whose frame header claims 60000 x 60000 pixels (an 8 x 8 image's data)."""
    import struct

    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(buffer, "JPEG")
    data = bytearray(buffer.getvalue())
    at = data.index(b"\xff\xc0") + 5  # marker, length, precision: then height, width
    data[at : at + 4] = struct.pack(">HH", 60000, 60000)
    return bytes(data)


def _h5_metadata(target: Path, rng: random.Random) -> str:
    import h5py

    with h5py.File(target, "r+") as h5:
        if "expcli" in h5.attrs:
            text, what = _json_text(json.loads(h5.attrs["expcli"]), rng)
            h5.attrs["expcli"] = text
            return f"h5 attribute {what}"
        if "maxsize" in h5.attrs:  # tianshou: its root attributes are its state
            key = rng.choice(sorted(h5.attrs))
            value = rng.choice(hostile.NUMBERS)
            h5.attrs[key] = value if isinstance(value, int | float) and abs(value) < 2**63 else -1
            return f"tianshou attribute {key} = {h5.attrs[key]!r}"
        before: Any = {}
        if "metadata/expcli" in h5:
            before = json.loads(h5["metadata/expcli"][()])
            del h5["metadata/expcli"]
        text, what = _json_text(before, rng)
        h5["metadata/expcli"] = text.encode("utf-8", "surrogatepass")
        return f"d4rl metadata/expcli {what}"


def minari_json(target: Path, rng: random.Random) -> str:
    """A hostile change to a Minari folder's ``metadata.json``."""
    path = target / "data" / "metadata.json"
    if rng.random() < 0.2:
        depth = rng.choice([900, 100_000])
        path.write_text(hostile.deep_json(depth))
        return f"metadata.json nested {depth} deep"
    text, what = _json_text(json.loads(path.read_text()), rng)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return f"metadata.json {what}"


def lerobot_json(target: Path, rng: random.Random) -> str:
    """A hostile change to a LeRobot folder's ``meta/info.json`` or ``meta/expcli.json``."""
    names = ["info.json", "info.json", "expcli.json", "stats.json"]
    path = target / "meta" / rng.choice(names)
    if not path.is_file():
        path = target / "meta" / "info.json"
    if rng.random() < 0.1:
        path.write_text(hostile.deep_json(rng.choice([900, 100_000])))
        return f"{path.name} nested deep"
    before = json.loads(path.read_text())
    if path.name == "info.json" and rng.random() < 0.5:  # one feature at a time
        name = rng.choice(sorted(before["features"]))
        text, what = _json_text(before["features"][name], rng)
        before["features"][name] = json.loads(text)
        path.write_text(json.dumps(before))
        return f"info.json feature {name}: {what}"
    text, what = _json_text(before, rng)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return f"{path.name} {what}"


def lerobot_parquet(target: Path, rng: random.Random) -> str:
    """A LeRobot folder's data or episodes file with hostile columns or rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted((target / "data").glob("*/*.parquet"))
    files += sorted((target / "meta" / "episodes").glob("*/*.parquet"))
    path = rng.choice(files)
    table = pq.read_table(path)
    how = rng.choice(["drop", "retype", "null", "huge", "rows", "image", "time"])
    column = rng.randrange(table.num_columns)
    name = table.column_names[column]
    if how == "drop":
        table = table.remove_column(column)
    elif how == "retype":
        table = table.set_column(column, name, pa.array([1.5] * table.num_rows))
    elif how == "null":
        table = table.set_column(column, name, pa.nulls(table.num_rows, table.schema[column].type))
    elif how == "huge" and pa.types.is_integer(table.schema[column].type):
        value = rng.choice([-1, 2**62, -(2**63)])
        table = table.set_column(column, name, pa.array([value] * table.num_rows, pa.int64()))
    elif how == "time" and pa.types.is_floating(table.schema[column].type):  # video times
        value = rng.choice([float("nan"), -1.0, 1e300, 0.05, 2.0**62])
        table = table.set_column(column, name, pa.array([value] * table.num_rows))
    elif how == "rows":
        table = table.slice(0, rng.randrange(table.num_rows + 1))
    elif how == "image" and "bytes" in str(table.schema[column].type):
        blob = rng.choice([b"", b"\x89PNG\r\n\x1a\n", bomb_png()])
        paths = pa.nulls(table.num_rows, pa.string())
        data = pa.array([blob] * table.num_rows, pa.binary())
        table = table.set_column(
            column, name, pa.StructArray.from_arrays([data, paths], ["bytes", "path"])
        )
    pq.write_table(table, path)
    return f"{path.relative_to(target)} {how} {name}"


def bomb_png() -> bytes:
    """A PNG that claims 60000 x 60000 pixels in a few hundred bytes."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 60000, 60000, 8, 0, 0, 0, 0)
    rows = zlib.compress(b"\x00" * 60001 * 4)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")
    )


# ------------------------------------------------------------------------------ npz


def _npz_members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def _write_npz(path: Path, members: dict[str, bytes], deflate: bool = False) -> None:
    method = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def _npy(array: np.ndarray, header: dict[str, Any] | None = None) -> bytes:
    out = io.BytesIO()
    if header is None:
        np.save(out, array, allow_pickle=array.dtype.hasobject)
        return out.getvalue()
    np.lib.format.write_array_header_1_0(out, header)
    out.write(np.ascontiguousarray(array).tobytes())
    return out.getvalue()


def npz_edit(target: Path, rng: random.Random) -> str:
    """Members with hostile headers, other byte orders, compression, bombs or objects."""
    if rng.random() < 0.04:
        target.write_bytes(bomb_npz(rng.choice([False, True])))
        return "deflate bomb"
    members = _npz_members(target)
    names = sorted(n for n in members if n != f"{_KEY}.npy") or sorted(members)
    name = rng.choice(names)
    array = np.load(io.BytesIO(members[name]))
    how = rng.choice(["shape", "shape", "descr", "big-endian", "fortran", "deflate", "object"])
    if how == "shape":
        shape = tuple(rng.choice([[-1, 2], [2**40], [100_000] * 3, [0, 2], [2**31, 2**31, 4]]))
        header = {"descr": array.dtype.str, "fortran_order": rng.random() < 0.3, "shape": shape}
        members[name] = _npy(array, header)
        deflate = rng.random() < 0.5
        _write_npz(target, members, deflate)
        return f"{name} header shape {shape}" + (", deflated" if deflate else "")
    if how == "descr":
        descr = rng.choice([">f4", "<U8", "<c16", "|V4", "<M8[s]", "<f2", "|b1", "<u8", "|O"])
        header = {"descr": descr, "fortran_order": False, "shape": array.shape}
        members[name] = _npy(array, header)
        what = f"{name} header descr {descr}"
    elif how == "big-endian":
        members[name] = _npy(array.astype(array.dtype.newbyteorder(">")))
        what = f"{name} big-endian"
    elif how == "fortran":
        members[name] = _npy(np.asfortranarray(array))
        what = f"{name} Fortran order"
    elif how == "object":
        members[name] = _npy(np.array([{"a": 1}, None], dtype=object))
        what = f"{name} object array"
    else:
        what = "every member deflated"
    _write_npz(target, members, deflate=how == "deflate" or rng.random() < 0.2)
    return what


# ------------------------------------------------------------------------------- pt


def pt_edit(target: Path, rng: random.Random) -> str:
    """A tensor replaced by one that is hostile to a reader (or not a tensor at all)."""
    import torch

    obj = torch.load(target, weights_only=True)
    names = sorted(k for k, v in obj.items() if isinstance(v, torch.Tensor))
    name = rng.choice(names)
    old: Any = obj[name]
    shape = tuple(old.shape)
    replacements: dict[str, Any] = {
        "meta": lambda: torch.empty(shape, device="meta"),
        "expanded": lambda: torch.zeros(1, 1, 1).expand(10**6, 10**5, 4),
        "overlapping": lambda: torch.zeros(16).as_strided((10**6, *shape[1:]), (1,) * len(shape)),
        "bfloat16": lambda: old.to(torch.bfloat16) if old.is_floating_point() else old.bool(),
        "complex": lambda: torch.zeros(shape, dtype=torch.complex64),
        "uint16": lambda: torch.zeros(shape, dtype=torch.uint16),
        "sparse": lambda: torch.zeros(shape).to_sparse(),
        "transposed": lambda: old.transpose(0, 1).contiguous().transpose(0, 1),
        "scalar": lambda: torch.tensor(3.0),
        "flat": lambda: old.reshape(-1),
        "short": lambda: old[:1],
        "nan tail": lambda: (
            torch.cat([old[:2], torch.full_like(old[2:], float("nan"))])
            if old.is_floating_point()
            else old
        ),
        "int": lambda: 7,
        "list": lambda: [1, 2, 3],
        "nested": lambda: {"a": old},
        "none": lambda: None,
    }
    how = rng.choice(sorted(replacements))
    obj[name] = replacements[how]()
    if rng.random() < 0.1:
        obj[rng.choice([5, ("a",), "x" * 300])] = old
        how += " and an odd key"
    torch.save(obj, target)
    return f"{name} {how}"


# ------------------------------------------------------------------------------ csv


def csv_edit(target: Path, rng: random.Random) -> str:
    """Hostile cells, a damaged header, rows and columns removed or repeated."""
    lines = target.read_text(encoding="utf-8").split("\n")
    header = lines[0].split(",")
    rows = [line for line in lines[1:] if line]
    how = rng.choice(["cells", "cells", "header", "drop column", "rows", "encoding", "sidecar"])
    if how == "cells" and rows:
        for _ in range(rng.choice([1, 3, 20])):
            i = rng.randrange(len(rows))
            cells = rows[i].split(",")
            cells[rng.randrange(len(cells))] = rng.choice(hostile.CELLS)
            rows[i] = ",".join(cells)
    elif how == "header":
        i = rng.randrange(len(header))
        header[i] = rng.choice(["x.0", header[i] + "x", "", "a.b.c", header[0], '"q', "obs.7"])
    elif how == "drop column":
        i = rng.randrange(len(header))
        del header[i]
        rows = [",".join(c for j, c in enumerate(r.split(",")) if j != i) for r in rows]
    elif how == "rows" and rows:
        i = rng.randrange(len(rows))
        choice = rng.choice(["delete", "repeat", "blank", "extra cell", "long"])
        if choice == "delete":
            del rows[i]
        elif choice == "repeat":
            rows[i:i] = [rows[i]] * 1000
        elif choice == "blank":
            rows.insert(i, "")
        elif choice == "extra cell":
            rows[i] += ",1"
        else:
            rows[i] = rows[i] + "1" * 200_000
        how += f" ({choice})"
    elif how == "sidecar":
        target.with_name(target.name + ".meta.json").unlink(missing_ok=True)
        return "sidecar removed"
    text = "\n".join([",".join(header), *rows, ""])
    data = text.encode("utf-8", "surrogatepass")
    if how == "encoding":
        at = rng.randrange(len(data))
        data = data[:at] + rng.choice([b"\xff\xfe", b"\x00", b"\r", b"\xef\xbb\xbf"]) + data[at:]
    target.write_bytes(data)
    return f"csv {how}"


# ------------------------------------------------------------------------------- h5


def h5_edit(target: Path, rng: random.Random) -> str:
    """Hostile attributes, datasets of odd types or declared sizes, swapped groups, links."""
    import h5py

    path = target / "data" / "main_data.hdf5" if target.is_dir() else target
    with h5py.File(path, "r+") as h5:
        objects: list[str] = []
        h5.visit(objects.append)
        datasets = [n for n in objects if isinstance(h5[n], h5py.Dataset)]
        groups = [n for n in objects if isinstance(h5[n], h5py.Group)]
        how = rng.choice(["attribute", "dataset", "dataset", "swap", "link"])
        if how == "attribute":
            where = rng.choice(["/", *objects])
            value = rng.choice(
                [
                    "x" * 60_000,
                    np.arange(10_000),
                    np.array([b"\xff\xfe"]),
                    rng.choice(hostile.SPACES).__repr__(),
                    -1,
                    2**62,
                ]
            )
            key = rng.choice([*h5[where].attrs.keys(), "expcli", "maxsize", "__data_type__"])
            h5[where].attrs[key] = value
            return f"attribute {where}@{key}"
        if how == "dataset" and datasets:
            name = rng.choice(datasets)
            old = h5[name]
            shape = old.shape or (1,)
            data = old[()]
            del h5[name]
            kind = _new_dataset(h5, name, shape, data, rng)
            return f"dataset {name} {kind}"
        if how == "swap" and groups:
            name = rng.choice(groups)
            del h5[name]
            h5[name] = np.arange(3)
            return f"group {name} now a dataset"
        parent = rng.choice(["/", *groups])
        link = rng.choice(["soft", "cycle", "external", "bytes name"])
        if link == "soft":
            h5[parent]["dangling"] = h5py.SoftLink("/nowhere")
        elif link == "cycle":
            h5[parent]["loop"] = h5[parent]
        elif link == "external":
            h5[parent]["outside"] = h5py.ExternalLink("/etc/hostname", "/")
        else:
            h5[parent].create_dataset(b"\xff\xfe", data=np.arange(3))
        return f"{link} link in {parent}"


def _new_dataset(h5: Any, name: str, shape: tuple[int, ...], data: Any, rng: random.Random) -> str:
    import h5py

    kind = rng.choice(
        [
            "strings",
            "compound",
            "big-endian",
            "huge sparse",
            "scalar",
            "longer",
            "empty",
            "uint64",
            "float16",
            "flag 2",
            "null",
            "array dtype",
        ]
    )
    if kind == "strings":
        h5.create_dataset(
            name, data=np.array(["a", "\u00e9"] * shape[0], dtype=h5py.string_dtype())
        )
    elif kind == "compound":
        h5.create_dataset(name, shape=shape[:1], dtype=[("a", "<f4"), ("b", "<i8")])
    elif kind == "big-endian":
        values = np.asarray(data)
        if values.dtype.kind in "fiu":
            values = values.astype(values.dtype.newbyteorder(">"))
        h5.create_dataset(name, data=values)
    elif kind == "huge sparse":
        h5.create_dataset(name, shape=(10**9, *shape[1:]), dtype="f4", chunks=True)
    elif kind == "scalar":
        h5.create_dataset(name, data=3)
    elif kind == "longer":
        h5.create_dataset(name, data=np.zeros((shape[0] + 3, *shape[1:])))
    elif kind == "empty":
        h5.create_dataset(name, shape=(0, *shape[1:]), dtype="f4")
    elif kind == "uint64":
        h5.create_dataset(name, data=np.full(shape, 2**64 - 1, dtype=np.uint64))
    elif kind == "float16":
        h5.create_dataset(name, data=np.zeros(shape, dtype=np.float16))
    elif kind == "flag 2":
        h5.create_dataset(name, data=np.full(shape, 2, dtype=np.int8))
    elif kind == "null":
        h5.create_dataset(name, data=h5py.Empty("f4"))
    else:
        h5.create_dataset(name, shape=shape[:1], dtype=np.dtype(("<f4", (100_000, 100))))
    return kind
