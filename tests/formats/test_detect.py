"""Format names, suffixes and sniffing: a file is read by what it holds, not what it is called."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from expcli.errors import FormatError
from expcli.formats import (
    FORMATS,
    Dataset,
    detect_format,
    format_from_suffix,
    read_dataset,
    write_dataset,
)
from expcli.formats.table import format_named
from expcli.spec import CircularState
from tests.format_catalogue import (
    BINARY_FORMATS,
    FILE_FORMATS,
    NAMED_FILES,
    SUFFIXES,
    companion_names,
    suffix_of,
)

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


def sample() -> Dataset:
    return Dataset(
        {
            "observations": np.arange(12, dtype=np.float32).reshape(3, 2, 2),
            "terminated": np.zeros((3, 2), bool),
        },
        CircularState(1, 1, False),
        {"env_id": "CartPole-v1"},
    )


def test_formats() -> None:
    # FORMATS names those expcli reads too (ipc); the catalogue those it writes
    assert FILE_FORMATS == tuple(f for f in FORMATS if getattr(format_named(f), "writes", False))
    assert set(FORMATS) - set(FILE_FORMATS) == {"ipc"}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        *((f"a{suffix}", fmt) for suffix, fmt in NAMED_FILES),
        *((f"a{suffix.upper()}", fmt) for suffix, fmt in NAMED_FILES),
        *((f"dir.v2/a{suffix_of(fmt)}", fmt) for fmt in FILE_FORMATS),
        *((name, None) for name in companion_names()),  # a CSV's sidecar
        ("a.txt", None),
        ("a", None),
    ],
)
def test_format_from_suffix(name: str, expected: str | None) -> None:
    assert format_from_suffix(name) == expected
    assert format_from_suffix(Path(name)) == expected


@pytest.mark.parametrize("fmt", FILE_FORMATS)
@pytest.mark.parametrize("suffix", [*SUFFIXES, ".bin", ""])
def test_content_wins_over_the_suffix(tmp_path: Path, fmt: str, suffix: str) -> None:
    written = write_dataset(sample(), tmp_path / "data", format=fmt)  # expcli names it right
    for made in sorted(tmp_path.iterdir()):  # then misnamed elsewhere, with its sidecar
        made.rename(tmp_path / made.name.replace("data", f"data{suffix}", 1))
    path = tmp_path / f"data{suffix}"
    assert written.name == "data"
    assert detect_format(path) == fmt
    back = read_dataset(path)
    np.testing.assert_array_equal(back.tensors["observations"], sample().tensors["observations"])
    assert back.state == sample().state and back.metadata["env_id"] == "CartPole-v1"


@pytest.mark.parametrize("fmt", BINARY_FORMATS)  # text cut between rows is a shorter table
def test_a_truncated_binary_file_is_still_recognised(tmp_path: Path, fmt: str) -> None:
    path = write_dataset(sample(), tmp_path / "whole", format=fmt)
    cut = tmp_path / "cut.bin"
    cut.write_bytes(path.read_bytes()[: min(200, path.stat().st_size // 2)])
    assert detect_format(cut) == fmt
    with pytest.raises(FormatError):
        read_dataset(cut)


def test_single_column_csv_without_commas_is_csv(tmp_path: Path) -> None:
    path = tmp_path / "one"
    path.write_text("rewards.0\n1.5\n-2.0\n")
    assert detect_format(path) == "csv"
    assert read_dataset(path).tensors["rewards"].tolist() == [[[1.5]], [[-2.0]]]


def test_torch_legacy_format_is_read_without_mmap(tmp_path: Path) -> None:
    path = tmp_path / "legacy.bin"
    torch.save(
        {"x": torch.arange(6.0).reshape(3, 2, 1)}, path, _use_new_zipfile_serialization=False
    )
    assert detect_format(path) == "pt"
    assert read_dataset(path).tensors["x"].ravel().tolist() == [0, 1, 2, 3, 4, 5]


def test_hdf5_is_told_by_its_signature(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(HDF5_MAGIC + bytes(100))
    assert detect_format(path) == "hdf5"
    with pytest.raises(FormatError, match="corrupt or truncated HDF5 file") as info:
        read_dataset(path)
    assert info.value.path == str(path)


def test_unknown_format_name_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="unknown format 'zarr'; expected one of pt, npz, csv"):
        write_dataset(sample(), tmp_path / "x.pt", format="zarr")
    (tmp_path / "x.pt").write_bytes(b"x")
    with pytest.raises(FormatError, match="expected one of pt, npz, csv"):
        read_dataset(tmp_path / "x.pt", format="json")


def test_format_names_are_case_insensitive(tmp_path: Path) -> None:
    path = write_dataset(sample(), tmp_path / "x.data", format="NPZ")
    assert detect_format(path) == "npz"
    assert read_dataset(path, format=".npz").num_envs == 2


def test_writing_needs_a_format_or_a_known_suffix(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match=r"cannot tell the format from the suffix '\.dat'") as e:
        write_dataset(sample(), tmp_path / "x.dat")
    assert e.value.path == str(tmp_path / "x.dat")
    assert list(tmp_path.iterdir()) == []


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.npz"
    path.touch()
    with pytest.raises(FormatError, match="empty") as info:
        detect_format(path)
    assert info.value.path == str(path)


def test_garbage_without_a_known_suffix(tmp_path: Path) -> None:
    path = tmp_path / "noise.bin"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(FormatError, match="unrecognised content; expected a dataset: pt") as info:
        read_dataset(path)
    assert str(path) in str(info.value)


def test_garbage_with_a_known_suffix_is_left_to_that_reader(tmp_path: Path) -> None:
    path = tmp_path / "noise.pt"
    path.write_bytes(bytes(range(256)) * 4)
    assert detect_format(path) == "pt"
    with pytest.raises(FormatError, match="not a PyTorch file"):
        read_dataset(path)


def test_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_dataset(tmp_path / "missing.pt")


def test_importing_and_using_numpy_formats_never_loads_torch(tmp_path: Path) -> None:
    """Nor h5py: every file format reads and writes without them but those that are theirs."""
    heavy_own = {"pt": "torch", "hdf5": "h5py"}  # torch.save archives, HDF5 files
    names = [f"a{suffix_of(fmt)}" for fmt in FILE_FORMATS if fmt not in heavy_own]
    script = textwrap.dedent(
        f"""
        import sys
        import numpy as np
        import expcli.formats as f
        heavy = ("torch", "h5py", "gymnasium", "ray")
        assert not [m for m in heavy if m in sys.modules], sys.modules.keys()
        d = f.Dataset({{"x": np.zeros((2, 1, 3), np.float32)}})
        for name in {names!r}:
            f.read_dataset(f.write_dataset(d, {str(tmp_path)!r} + "/" + name))
        assert not [m for m in heavy if m in sys.modules], sys.modules.keys()
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", ["some.py", "config.toml", "notes.txt", "plain"])
def test_text_that_is_not_a_csv_dataset_is_refused_in_one_line(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text("import os, sys\n\ndef f(a, b):\n    return a, b\n")
    with pytest.raises(FormatError) as info:
        detect_format(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    assert "text that is not a CSV dataset" in message
    assert "pt (a torch.save zip archive)" in message and "hdf5 (an HDF5 file)" in message


def test_a_csv_suffix_still_names_the_format_of_text_with_a_bad_header(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    path.write_text("a,b\n1,2\n")
    assert detect_format(path) == "csv"
    with pytest.raises(FormatError, match="expected NAME.INDEX columns"):
        read_dataset(path)


def test_a_header_longer_than_the_sniffed_bytes_is_csv(tmp_path: Path) -> None:
    path = tmp_path / "wide"
    columns = [f"observations.{i}" for i in range(8000)]  # about 130 kB of header
    path.write_text(",".join(columns) + "\n" + ",".join("0" for _ in columns) + "\n")
    assert detect_format(path) == "csv"
