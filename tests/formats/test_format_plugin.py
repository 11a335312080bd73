"""A format from outside expcli is one module: named in the ``expcli.formats`` entry-point
group of an installed distribution, convert (both ways), inspect, merge and sample take it.

The distribution is a ``.dist-info`` folder, made here, on the path of a fresh interpreter
(the table reads the group once, on first use); its one entry point names
``tests/formats/tiny_plugin.py``. No file of ``expcli/`` names ``tiny``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from expcli.formats import read_dataset
from tests.formats.tiny_plugin import MAGIC, TINY

ROOT = Path(__file__).parents[2]
GOLDEN = ROOT / "tests" / "data" / "golden.npz"

CHILD = textwrap.dedent(
    """
    import json, sys
    from typer.testing import CliRunner
    from expcli.cli.app import app

    runner = CliRunner()
    results = []
    for args in json.loads(sys.argv[1]):
        result = runner.invoke(app, args, env={"COLUMNS": "200"})
        results.append([result.exit_code, result.output])
    print(json.dumps(results))
    """
)


def _run(commands: list[list[str]], path: list[Path]) -> list[tuple[int, str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in [*path, ROOT])}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(commands)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr
    return [(code, output) for code, output in json.loads(child.stdout)]


def _installed(where: Path) -> Path:
    """A distribution whose one entry point in ``expcli.formats`` is the tiny format."""
    info = where / "tiny_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[expcli.formats]\ntiny = tests.formats.tiny_plugin:TINY\n"
    )
    return where


def _same_bytes(path: Path) -> None:
    original, back = read_dataset(GOLDEN), read_dataset(path)
    assert original.tensors.keys() == back.tensors.keys()
    for name, array in original.tensors.items():
        assert np.asarray(back.tensors[name]).tobytes() == np.asarray(array).tobytes(), name
    assert (original.state, original.header()) == (back.state, back.header())


def test_a_format_from_an_entry_point_is_converted_inspected_merged_and_sampled(
    tmp_path: Path,
) -> None:
    site = _installed(tmp_path / "site")
    there, back, merged = tmp_path / "d.tiny", tmp_path / "back.npz", tmp_path / "m.tiny"
    results = _run(
        [
            ["convert", str(GOLDEN), str(there)],
            ["convert", str(there), str(back)],
            ["inspect", str(there), "--json"],
            ["merge", str(there), str(GOLDEN), "-o", str(merged)],
            ["sample", str(there), "-b", "4", "--seed", "0", "--json"],
            ["convert", "--help"],
        ],
        [site],
    )
    assert [code for code, _ in results] == [0] * 6, results
    (_, to_tiny), _, (_, inspected), _, (_, sampled), (_, shown) = results
    assert "npz) -> " in to_tiny and "tiny): " in to_tiny
    assert there.read_text().startswith(MAGIC)
    _same_bytes(back)
    facts = json.loads(inspected)
    assert facts["format"] == "tiny" and facts["transitions"] == len(read_dataset(GOLDEN))
    assert len(TINY.read(merged)) == 2 * len(read_dataset(GOLDEN))
    batch = json.loads(sampled)
    assert batch["batch_shape"] == [4] and batch["transitions"] == len(read_dataset(GOLDEN))
    assert "tiny" in " ".join(shown.replace("│", " ").split())


def test_without_the_distribution_the_format_is_unknown(tmp_path: Path) -> None:
    [(code, output)] = _run([["convert", str(GOLDEN), str(tmp_path / "d.tiny")]], [])
    assert code == 2 and "cannot tell the output format" in output
