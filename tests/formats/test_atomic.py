"""Writes are atomic: the target is the complete new file or untouched, and no temp file stays."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import numpy as np
import pytest

from expcli.errors import OutputExistsError
from expcli.files import atomic as _atomic
from expcli.files.atomic import atomic_write
from expcli.formats import Dataset, read_dataset, write_dataset
from expcli.spec import CircularState
from tests.format_catalogue import FILE_FORMATS

TEMP_NAME = re.compile(r"^\.(?P<target>.+)\.[^.]+\.tmp$")


def sample(value: float = 1.0) -> Dataset:
    return Dataset(
        {"observations": np.full((50, 2, 3), value, np.float32), "actions": np.zeros((50, 2))},
        CircularState(0, 0, True),
    )


def names(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


class Boom(Exception):
    pass


def fail_midway(monkeypatch: pytest.MonkeyPatch, fmt: str, error: BaseException) -> None:
    """Make the writer of ``fmt`` write part of its output, then raise ``error``."""

    if fmt == "pt":
        from expcli.formats._pt_archive import Record

        original_record_write = Record.write
        written: list[int] = []

        def record_then_raise(self: Record, data: bytes | bytearray | memoryview) -> None:
            original_record_write(self, data)
            written.append(1)
            if len(written) > 5:  # the pickle, its companions and a storage, then the error
                raise error

        monkeypatch.setattr(Record, "write", record_then_raise)
    elif fmt == "npz":
        import expcli.formats.npz_format as npz_format

        original_member = npz_format._write_member

        def member_then_raise(*args: object, **kwargs: object) -> None:
            original_member(*args, **kwargs)  # type: ignore[arg-type]
            raise error

        monkeypatch.setattr(npz_format, "_write_member", member_then_raise)
    elif fmt == "hdf5":
        import h5py

        original_write = h5py.Dataset.write_direct

        def write_then_raise(self: h5py.Dataset, *args: object, **kwargs: object) -> None:
            original_write(self, *args, **kwargs)  # type: ignore[arg-type]
            raise error

        monkeypatch.setattr(h5py.Dataset, "write_direct", write_then_raise)
    elif fmt == "parquet":
        import expcli.formats.parquet_format as parquet_format

        original_to_arrow = parquet_format.to_arrow
        converted: list[int] = []

        def arrow_then_raise(*args: object, **kwargs: object) -> object:
            converted.append(1)
            if len(converted) > 1:  # a column converted, then the error
                raise error
            return original_to_arrow(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(parquet_format, "to_arrow", arrow_then_raise)
    else:
        import expcli.formats.csv_format as csv_format

        original_rows = csv_format.encode_rows
        calls: list[int] = []

        def rows_then_raise(*args: object, **kwargs: object) -> bytes:
            calls.append(1)
            if len(calls) > 2:  # two chunks of rows written, then the error
                raise error
            return original_rows(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(csv_format, "_CHUNK_CELLS", 20)
        monkeypatch.setattr(csv_format, "encode_rows", rows_then_raise)


@pytest.mark.parametrize("fmt", FILE_FORMATS)
@pytest.mark.parametrize("error", [Boom("disk full"), KeyboardInterrupt()])
def test_failed_write_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, error: BaseException
) -> None:
    fail_midway(monkeypatch, fmt, error)
    with pytest.raises(type(error)):
        write_dataset(sample(), tmp_path / f"out.{fmt}")
    assert names(tmp_path) == []


@pytest.mark.parametrize("fmt", FILE_FORMATS)
@pytest.mark.parametrize("error", [Boom("disk full"), KeyboardInterrupt()])
def test_failed_overwrite_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, error: BaseException
) -> None:
    path = write_dataset(sample(1.0), tmp_path / f"out.{fmt}")
    before = {name: (tmp_path / name).read_bytes() for name in names(tmp_path)}
    fail_midway(monkeypatch, fmt, error)
    with pytest.raises(type(error)):
        write_dataset(sample(2.0), path)
    assert {name: (tmp_path / name).read_bytes() for name in names(tmp_path)} == before
    monkeypatch.undo()
    assert read_dataset(path).tensors["observations"][0, 0, 0] == 1.0


@pytest.mark.parametrize("fmt", FILE_FORMATS)
def test_the_temporary_file_is_hidden_beside_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    seen: list[list[str]] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        seen.append(names(tmp_path))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    write_dataset(sample(), tmp_path / f"out.{fmt}")
    temps = [name for listing in seen for name in listing if name.endswith(".tmp")]
    assert temps
    for name in temps:
        match = TEMP_NAME.match(name)
        assert match and match["target"] in (f"out.{fmt}", f"out.{fmt}.meta.json")
    assert [name for name in names(tmp_path) if name.endswith(".tmp")] == []


@pytest.mark.parametrize("fmt", FILE_FORMATS)
def test_no_overwrite(tmp_path: Path, fmt: str) -> None:
    path = write_dataset(sample(1.0), tmp_path / f"out.{fmt}", overwrite=False)
    before = path.read_bytes()
    with pytest.raises(OutputExistsError) as info:
        write_dataset(sample(2.0), path, overwrite=False)
    assert isinstance(info.value, FileExistsError) and info.value.path == str(path)
    assert path.read_bytes() == before
    assert not [n for n in names(tmp_path) if n.endswith(".tmp")]
    write_dataset(sample(2.0), path)
    assert read_dataset(path).tensors["observations"][0, 0, 0] == 2.0


def test_no_overwrite_of_a_csv_sidecar(tmp_path: Path) -> None:
    (tmp_path / "out.csv.meta.json").write_text("{}")
    with pytest.raises(OutputExistsError) as info:
        write_dataset(sample(), tmp_path / "out.csv", overwrite=False)
    assert info.value.path == str(tmp_path / "out.csv.meta.json")
    assert names(tmp_path) == ["out.csv.meta.json"]


def test_csv_sidecar_is_renamed_before_the_csv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    real_replace = os.replace

    def spy(src: str, dst: str | Path) -> None:
        order.append(Path(dst).name)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    write_dataset(sample(), tmp_path / "out.csv")
    assert order == ["out.csv.meta.json", "out.csv"]


def test_atomic_write_text_and_binary(tmp_path: Path) -> None:
    with atomic_write(tmp_path / "a.bin") as f:
        f.write(b"\x00\x01")
    with atomic_write(tmp_path / "a.txt", "w") as t:
        t.write("x\r\ny\n")
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "a.txt").read_bytes() == b"x\r\ny\n"


def test_atomic_write_without_overwrite_loses_a_race(tmp_path: Path) -> None:
    target = tmp_path / "race.bin"
    with pytest.raises(OutputExistsError):
        with atomic_write(target, overwrite=False) as f:
            f.write(b"mine")
            target.write_bytes(b"theirs")  # another process got there first
    assert target.read_bytes() == b"theirs"
    assert names(tmp_path) == ["race.bin"]


def test_atomic_write_permissions(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        with atomic_write(tmp_path / "new.bin") as f:
            f.write(b"1")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.bin").stat().st_mode) == 0o644
    os.chmod(tmp_path / "new.bin", 0o600)
    with atomic_write(tmp_path / "new.bin") as f:
        f.write(b"2")
    assert stat.S_IMODE((tmp_path / "new.bin").stat().st_mode) == 0o600


def test_atomic_write_without_hard_links_still_refuses_to_clobber(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(src: object, dst: object) -> None:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    with atomic_write(tmp_path / "x.bin", overwrite=False) as f:
        f.write(b"1")
    assert (tmp_path / "x.bin").read_bytes() == b"1"
    with pytest.raises(OutputExistsError):
        with atomic_write(tmp_path / "x.bin", overwrite=False) as f:
            f.write(b"2")
    assert names(tmp_path) == ["x.bin"]
    assert _atomic.__name__ == "expcli.files.atomic"
