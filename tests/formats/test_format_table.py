"""A format defined outside expcli is one object: registered, it converts, is told and listed.

``tiny`` lives in ``tests/formats/tiny_plugin.py`` only: a JSON text holding expcli's
metadata and each tensor's bytes. Registering its ``Format`` is all it takes for
``expcli.conversion.convert``, ``expcli convert``, the suffix dispatch and the help texts to
know it; no file of ``expcli/`` names it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli.cli import app
from expcli.conversion import convert
from expcli.errors import ConfigError
from expcli.formats import Dataset, detect_format, format_from_suffix, read_dataset
from expcli.formats.rows import Format, SpaceEstimate
from expcli.formats.table import file_formats, format_named, register_format
from tests.formats.tiny_plugin import MAGIC as _MAGIC
from tests.formats.tiny_plugin import TINY, Tiny

GOLDEN = Path(__file__).parents[1] / "data" / "golden.npz"


def _taken(name: str, suffix: str) -> Format:
    """A format called ``name`` with the one ``suffix``."""
    kind: type[Format] = type("Taken", (Tiny,), {"name": name, "suffixes": (suffix,)})
    return kind()


class AlwaysPacked(Tiny):
    """A format whose size cannot be told up front."""

    space = SpaceEstimate.UNKNOWN


@pytest.fixture
def tiny() -> Iterator[Format]:
    unregister = register_format(TINY)
    try:
        yield TINY
    finally:
        unregister()
    assert format_named("tiny") is None and "tiny" not in file_formats()


def _same(a: Dataset, b: Dataset) -> None:
    assert a.tensors.keys() == b.tensors.keys()
    for name, array in a.tensors.items():
        other = np.asarray(b.tensors[name])
        mine = np.asarray(array)
        assert (other.dtype, other.shape) == (mine.dtype, mine.shape), name
        assert other.tobytes() == mine.tobytes(), name  # bit for bit: NaN and -0.0 too
    assert a.state == b.state
    assert a.header() == b.header()


def test_a_registered_format_converts_both_ways(tiny: Format, tmp_path: Path) -> None:
    original = read_dataset(GOLDEN)
    there = convert(GOLDEN, tmp_path / "d.tiny")
    assert there.dst_format == "tiny" and (tmp_path / "d.tiny").read_text().startswith(_MAGIC)
    back = convert(tmp_path / "d.tiny", tmp_path / "back.npz")
    assert back.src_format == "tiny"
    _same(original, read_dataset(tmp_path / "back.npz"))
    convert(GOLDEN, tmp_path / "named.json", to="tiny")  # --to names it whatever the suffix
    _same(original, read_dataset(tmp_path / "named.json", "tiny"))


def test_a_registered_format_is_told_by_suffix_and_by_content(tiny: Format, tmp_path: Path) -> None:
    assert format_from_suffix("run.TINY") == "tiny" and "tiny" in file_formats()
    convert(GOLDEN, tmp_path / "d.tiny")
    os.replace(tmp_path / "d.tiny", tmp_path / "d.dat")
    assert detect_format(tmp_path / "d.dat") == "tiny"  # its sniffer, not the suffix


def test_the_cli_converts_to_and_from_a_registered_format(tiny: Format, tmp_path: Path) -> None:
    runner = CliRunner()
    out, back = tmp_path / "d.tiny", tmp_path / "back.npz"
    result = runner.invoke(app, ["convert", str(GOLDEN), str(out)])
    assert result.exit_code == 0, result.output
    assert "npz) -> " in result.output and "tiny): " in result.output
    result = runner.invoke(app, ["convert", str(out), str(back)])
    assert result.exit_code == 0, result.output
    _same(read_dataset(GOLDEN), read_dataset(back))


def test_help_lists_a_registered_format_and_forgets_it_after(tmp_path: Path) -> None:
    def help_text() -> str:
        result = CliRunner().invoke(app, ["convert", "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        return " ".join(result.output.replace("│", " ").split())

    assert "--to [pt|npz|csv|hdf5|parquet|folder]" in help_text()
    unregister = register_format(TINY)
    try:
        text = help_text()
        assert "--to [pt|npz|csv|hdf5|parquet|tiny|folder]" in text
        assert (
            "(.pt, .npz, .csv, .h5, .parquet, .arrow, .tiny, or a Minari or LeRobot folder)" in text
        )
        assert "between pt, npz, csv, HDF5, Parquet and tiny" in text
    finally:
        unregister()
    assert "--to [pt|npz|csv|hdf5|parquet|folder]" in help_text()


def test_a_row_may_not_take_a_name_or_suffix_that_is_taken() -> None:
    with pytest.raises(ConfigError, match="named 'npz' is registered already"):
        register_format(_taken("npz", ".x"))
    with pytest.raises(ConfigError, match="suffix '.h5' is hdf5's already"):
        register_format(_taken("mine", ".h5"))
    assert format_named("mine") is None


def test_the_free_space_estimate_asks_the_row() -> None:
    """Compression and text size come from the row: no format name is compared."""
    tensors = {"x": np.zeros((4, 2, 3), np.float32)}
    rows = {name: format_named(name) for name in ("npz", "csv", "hdf5")}
    assert all(row is not None for row in rows.values())
    npz, csv, hdf5 = (row for row in rows.values() if row is not None)
    assert npz.estimated_size(tensors) == 96  # every byte
    assert csv.estimated_size(tensors) == 24 * 4  # "0.0," per cell
    assert hdf5.estimated_size(tensors, "none") == 96
    assert hdf5.estimated_size(tensors, "GZIP") is None  # compressed: cannot be told
    assert AlwaysPacked().estimated_size(tensors) is None
