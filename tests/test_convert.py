"""load/save/convert and `expcli convert`: formats, atomicity, overwrite, verify, errors."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli import ConfigError, ExpcliError, FormatError, OutputExistsError, RandomMemory
from expcli.cli import app
from expcli.conversion import convert, load, save
from expcli.formats.dataset import Dataset
from expcli.spec import CircularState
from tests.format_catalogue import FILE_FORMATS, suffix_of


def sample_dataset() -> Dataset:
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(6, 2, 3)).astype(np.float32)
    obs[0, 0, 0], obs[1, 1, 1], obs[2, 0, 2] = np.nan, -0.0, np.inf
    return Dataset(
        {
            "observations": obs,
            "actions": rng.integers(0, 4, (6, 2, 1)),
            "terminated": rng.random((6, 2, 1)) < 0.3,
        },
        CircularState(2, 1, True),
        {"env_id": "Toy-v0"},
    )


def same(a: Dataset, b: Dataset) -> None:
    assert a.state == b.state and sorted(a.tensors) == sorted(b.tensors)
    for name, x in a.tensors.items():
        y = b.tensors[name]
        assert x.dtype == y.dtype and x.shape == y.shape
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
    assert b.metadata["env_id"] == a.metadata["env_id"]


@pytest.mark.parametrize("src", FILE_FORMATS)
@pytest.mark.parametrize("dst", FILE_FORMATS)
def test_every_pair_converts_without_loss(tmp_path: Path, src: str, dst: str) -> None:
    original = sample_dataset()
    source = save(original, tmp_path / f"a{suffix_of(src)}")
    result = convert(source, tmp_path / f"b{suffix_of(dst)}", verify=True)
    assert (result.src_format, result.dst_format, result.transitions) == (src, dst, 12)
    same(original, load(tmp_path / f"b{suffix_of(dst)}"))
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


def test_refuses_to_overwrite_when_told_not_to(tmp_path: Path) -> None:
    save(sample_dataset(), tmp_path / "a.npz")
    (tmp_path / "b.pt").write_bytes(b"precious")
    with pytest.raises(OutputExistsError, match=r"overwrite=True"):
        convert(tmp_path / "a.npz", tmp_path / "b.pt", overwrite=False)
    assert (tmp_path / "b.pt").read_bytes() == b"precious"
    convert(tmp_path / "a.npz", tmp_path / "b.pt", overwrite=True)
    same(sample_dataset(), load(tmp_path / "b.pt"))


def test_save_and_convert_agree_on_overwriting(tmp_path: Path) -> None:
    """Both replace an existing target by default and both refuse it with overwrite=False.

    The refusal tells a Python caller the keyword (and a command-line user the flag).
    """
    save(sample_dataset(), tmp_path / "a.npz")
    for target in (tmp_path / "b.pt", tmp_path / "c.h5"):
        target.write_bytes(b"old")
        convert(tmp_path / "a.npz", target)
        same(sample_dataset(), load(target))
        target.write_bytes(b"old")
        save(sample_dataset(), target)
        same(sample_dataset(), load(target))
    for write in (
        lambda: save(sample_dataset(), tmp_path / "b.pt", overwrite=False),
        lambda: convert(tmp_path / "a.npz", tmp_path / "b.pt", overwrite=False),
    ):
        with pytest.raises(OutputExistsError) as refused:
            write()
        assert "overwrite=True" in str(refused.value) and "--overwrite" in str(refused.value)
    assert inspect.signature(save).parameters["overwrite"].default is True
    assert inspect.signature(convert).parameters["overwrite"].default is True
    (tmp_path / "b.pt").write_bytes(b"precious")  # the command line still asks for --overwrite
    refused_cli = CliRunner().invoke(
        app, ["convert", str(tmp_path / "a.npz"), str(tmp_path / "b.pt")]
    )
    assert refused_cli.exit_code == 1 and "--overwrite" in refused_cli.stderr
    assert (tmp_path / "b.pt").read_bytes() == b"precious"


def test_a_failed_conversion_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save(sample_dataset(), tmp_path / "a.npz")
    (tmp_path / "b.csv").write_text("old")

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("expcli.formats.checked_write.write_planned", broken)
    for target in ("c.csv", "b.csv"):
        with pytest.raises(OSError):
            convert(tmp_path / "a.npz", tmp_path / target, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["a.npz", "b.csv"]
    assert (tmp_path / "b.csv").read_text() == "old"


def test_verify_catches_a_writer_that_changes_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save(sample_dataset(), tmp_path / "a.npz")
    import expcli.conversion as module
    import expcli.formats.checked_write as writing

    real = module.open_lazy
    calls = []

    def corrupting(path: object, *args: object, **kwargs: object) -> object:
        dataset, close = real(path, *args, **kwargs)  # type: ignore[arg-type]
        calls.append(path)
        if len(calls) == 2:  # the read-back of the written file
            dataset.tensors["actions"] = np.asarray(dataset.tensors["actions"]) + 1
        return dataset, close

    monkeypatch.setattr(module, "open_lazy", corrupting)  # reads the source
    monkeypatch.setattr(writing, "open_lazy", corrupting)  # reads the written file back
    with pytest.raises(FormatError, match="verification failed") as caught:
        convert(tmp_path / "a.npz", tmp_path / "b.pt", verify=True)
    assert caught.value.key == "actions"
    assert not (tmp_path / "b.pt").exists()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"layout": "parquet"}, "unknown layout"),
        ({"compression": "xz"}, "unknown compression"),
        ({"to": None}, "cannot tell"),
    ],
)
def test_bad_options(tmp_path: Path, kwargs: dict[str, object], match: str) -> None:
    save(sample_dataset(), tmp_path / "a.npz")
    with pytest.raises(ConfigError, match=match):
        convert(tmp_path / "a.npz", tmp_path / "b.unknown", **kwargs)  # type: ignore[arg-type]


def test_memory_saves_through_save(tmp_path: Path) -> None:
    from expcli import Memory

    memory = Memory(3, 2, "cpu")
    memory.create_tensor("x", 2)
    memory.add_samples(x=np.ones((2, 2)))
    path = save(memory, tmp_path / "m.npz")
    assert load(path).tensors["x"].shape == (3, 2, 2) and len(load(path)) == 2


def test_cli_convert_prints_one_summary_line(tmp_path: Path) -> None:
    save(sample_dataset(), tmp_path / "a.npz")
    result = CliRunner().invoke(
        app, ["convert", str(tmp_path / "a.npz"), str(tmp_path / "b.csv"), "--verify"]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.count("\n") == 1 and "3 tensors, 12 transitions" in result.stdout
    assert "verified" in result.stdout
    same(sample_dataset(), load(tmp_path / "b.csv"))


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        (b"", [], "empty"),
        (b"\x00garbage\xff" * 10, [], "b.pt"),
        (None, ["--compression", "xz"], "unknown compression"),
    ],
)
def test_cli_errors_are_one_line_and_exit_nonzero(
    tmp_path: Path, content: bytes | None, args: list[str], message: str
) -> None:
    src = tmp_path / "b.pt"
    if content is None:
        save(sample_dataset(), src)
    else:
        src.write_bytes(content)
    result = CliRunner().invoke(app, ["convert", str(src), str(tmp_path / "c.npz"), *args])
    assert result.exit_code in (1, 2)
    assert message in result.stderr and result.stderr.strip().count("\n") == 0
    assert "Traceback" not in result.output
    assert not (tmp_path / "c.npz").exists()


def test_cli_missing_source(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["convert", str(tmp_path / "none.pt"), str(tmp_path / "x.npz")]
    )
    assert result.exit_code == 1 and "no such file" in result.stderr


def test_memory_from_dataset(tmp_path: Path) -> None:
    memory = RandomMemory.from_dataset(load(save(sample_dataset(), tmp_path / "a.npz")), "cpu")
    assert isinstance(memory, RandomMemory)
    assert (memory.memory_index, memory.env_index, memory.filled) == (2, 1, True)
    assert memory.tensors["actions"].shape == (6, 2, 1) and len(memory) == 12


@pytest.mark.parametrize("layout", ["d4rl", "tianshou", "minari", "skrl"])
def test_cli_writes_foreign_layouts_that_read_back(tmp_path: Path, layout: str) -> None:
    dataset = sample_dataset()
    dataset.tensors["terminated"][:] = False
    dataset.tensors["terminated"][2, :, 0] = True
    dataset.tensors["observations"] = np.nan_to_num(dataset.tensors["observations"])
    dataset.tensors["rewards"] = np.ones((6, 2, 1), np.float32)
    save(dataset, tmp_path / "a.npz")
    target = (
        tmp_path / {"d4rl": "b.hdf5", "tianshou": "b.h5", "minari": "b-v0", "skrl": "b.pt"}[layout]
    )
    result = CliRunner().invoke(
        app, ["convert", str(tmp_path / "a.npz"), str(target), "--layout", layout]
    )
    assert result.exit_code == 0, result.output
    again = load(target)
    assert again.tensors["actions"].size == dataset.tensors["actions"].size
    assert sorted(again.tensors["actions"].ravel().tolist()) == sorted(
        dataset.tensors["actions"].ravel().tolist()
    )


def test_layout_errors_name_the_users_file(tmp_path: Path) -> None:
    save(sample_dataset(), tmp_path / "a.npz")  # no rewards: D4RL needs them
    with pytest.raises(ExpcliError) as caught:
        convert(tmp_path / "a.npz", tmp_path / "b.hdf5", layout="d4rl")
    assert "rewards" in str(caught.value) and ".partial" not in str(caught.value)
    assert os.listdir(tmp_path) == ["a.npz"]
