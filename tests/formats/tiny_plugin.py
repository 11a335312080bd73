"""``tiny``: a format kept outside expcli, the one module a plugin package ships.

A JSON text holding expcli's metadata and each tensor's bytes (base64). Registered with
``formats.table.register_format`` (``tests/formats/test_format_table.py``), or named in the
``expcli.formats`` entry-point group of an installed distribution
(``tests/formats/test_format_plugin.py``): either way no file of ``expcli/`` names it.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np

from expcli.files.atomic import atomic_path
from expcli.formats import Dataset
from expcli.formats.header import dataset_from_header, encode_header, parse_header
from expcli.formats.rows import Format, WritePlan

MAGIC = '{"tiny": 1'


class Tiny(Format):
    """A JSON text: the metadata and each tensor's bytes in base64."""

    name = "tiny"
    suffixes = (".tiny",)
    holds = "a JSON text"

    def read(self, path: Path, *, num_envs: int | None = None) -> Dataset:
        stored = json.loads(path.read_text(encoding="utf-8"))
        arrays = {
            name: np.frombuffer(base64.b64decode(t["bytes"]), dtype=t["dtype"]).reshape(t["shape"])
            for name, t in stored["tensors"].items()
        }
        return dataset_from_header(arrays, parse_header(stored["header"], path, "header"), path)

    def write(self, dataset: Dataset, plan: WritePlan) -> None:
        tensors = {
            name: {
                "dtype": np.asarray(a).dtype.str,
                "shape": list(a.shape),
                "bytes": base64.b64encode(np.ascontiguousarray(a).tobytes()).decode(),
            }
            for name, a in dataset.tensors.items()
        }
        header = encode_header(dataset.header(), plan.target)
        text = json.dumps({"tiny": 1, "header": header, "tensors": tensors})
        with atomic_path(plan.target, overwrite=plan.overwrite) as tmp:
            Path(tmp).write_text(text, encoding="utf-8")

    def sniff(self, path: Path, head: bytes) -> bool:
        return head.startswith(MAGIC.encode())


TINY = Tiny()
