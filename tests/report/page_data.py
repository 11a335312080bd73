"""Reading a report back: the JSON it carries, its frames as arrays."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np


def carried(page: Path | str, key: str) -> Any:
    """The JSON of the page's ``<script type="application/json" id=KEY>``."""
    text = page.read_text(encoding="utf-8") if isinstance(page, Path) else page
    found = re.search(rf'<script type="application/json" id="{key}">(.*?)</script>', text, re.S)
    assert found is not None, key
    return json.loads(found.group(1))


def png(uri: str) -> np.ndarray:
    """A ``data:image/png;base64,...`` URI as the array it holds."""
    from PIL import Image

    assert uri.startswith("data:image/png;base64,")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))))


def same_json(a: Any, b: Any) -> bool:
    """Equal once both went through JSON (tuples and lists alike)."""
    return bool(json.loads(json.dumps(a)) == json.loads(json.dumps(b)))
