"""Every extra a message names exists, and the lerobot extra installs what its layout imports.

An error that says ``pip install "expcli[NAME]"`` must name an extra of ``pyproject.toml``
(issue 39: ``expcli[lerobot]`` was named and did not exist, so nothing installed Pillow).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "expcli"
LEROBOT = PACKAGE / "formats" / "layouts" / "lerobot"
NAMED = re.compile(r"expcli\[([a-z0-9,-]+)\]")
# the import name of each optional package the lerobot layout imports, and its distribution
DISTRIBUTIONS = {"pyarrow": "pyarrow", "PIL": "pillow", "av": "av"}


def _extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return dict(project["optional-dependencies"])


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def _named_extras() -> dict[str, set[str]]:
    """Each extra the package names, and where: ``expcli[NAME]`` in its text, and the
    ``extra`` argument of each ``MissingDependencyError(module, extra, purpose)``."""
    named: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(ROOT))
        for group in NAMED.findall(text):
            for extra in group.split(","):
                named.setdefault(extra, set()).add(where)
        calls = ast.walk(ast.parse(text)) if "MissingDependencyError(" in text else ()
        for node in calls:
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None))
                == "MissingDependencyError"
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
            ):
                named.setdefault(str(node.args[1].value), set()).add(where)
    return named


def test_every_extra_a_message_names_exists() -> None:
    named, extras = _named_extras(), _extras()
    assert {"lerobot", "parquet", "video", "ray"} <= set(named)  # the scan finds them
    missing = {extra: sorted(where) for extra, where in named.items() if extra not in extras}
    assert missing == {}


def test_the_lerobot_extra_installs_what_the_layout_imports() -> None:
    """Pillow (image features), PyAV (video features), pyarrow (every file of the folder)."""
    imported = set()
    for path in sorted(LEROBOT.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    optional = {DISTRIBUTIONS[name] for name in imported if name in DISTRIBUTIONS}
    assert optional == {"pyarrow", "pillow", "av"}
    extras = _extras()
    assert optional <= _names(extras["lerobot"])
    assert _names(extras["lerobot"]) <= _names(extras["dev"])  # the test suite has them


def test_without_pillow_a_lerobot_folder_of_images_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one line a user sees names an extra that installs Pillow."""
    from typer.testing import CliRunner

    from expcli.cli import app
    from expcli.formats import Dataset
    from expcli.formats.registry import write_dataset
    from expcli.spec import CircularState

    tensors = {
        "observations": np.zeros((4, 1, 6, 6, 3), np.uint8),
        "actions": np.zeros((4, 1, 1), np.int64),
        "rewards": np.zeros((4, 1, 1), np.float32),
        "terminated": np.zeros((4, 1, 1), bool),
        "truncated": np.zeros((4, 1, 1), bool),
    }
    write_dataset(Dataset(tensors, CircularState(0, 0, True), {}), tmp_path / "frames.npz")
    monkeypatch.setitem(sys.modules, "PIL", None)  # `from PIL import Image` fails
    args = ["convert", str(tmp_path / "frames.npz"), str(tmp_path / "lr"), "--layout", "lerobot"]
    done = CliRunner().invoke(app, args)
    message = " ".join(done.output.split())
    assert done.exit_code == 1, message
    assert message.startswith("error: Pillow is required for images of the lerobot layout")
    assert message.endswith('install it with: pip install "expcli[lerobot]"')
    assert "Traceback" not in done.output and not (tmp_path / "lr").exists()
    assert "pillow" in _names(_extras()["lerobot"])
