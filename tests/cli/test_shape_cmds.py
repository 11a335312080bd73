"""`expcli merge`, `split`, `filter`: results in one line per output, errors in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli import load
from expcli.cli import app
from tests.replay.episode_data import make_memory


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("shape")
    a = make_memory(30, 4, [4] * 40, seed=0, p_done=0.1)
    b = make_memory(30, 4, [4] * 20, seed=1, p_done=0.1)
    return Path(a.save(folder / "a.npz")), Path(b.save(folder / "b.h5"))


def run(*args: str | Path):
    return CliRunner().invoke(app, [str(a) for a in args], env={"NO_COLOR": "1", "COLUMNS": "200"})


def test_merge_split_filter_and_inspect_shows_the_lineage(runs, tmp_path: Path) -> None:
    a, b = runs
    merged = tmp_path / "merged.npz"
    result = run("merge", a, b, "-o", merged)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"merged -> {merged} (npz): ")
    result = run("split", merged, "--fractions", "0.75,0.25", "-o", tmp_path / "train.npz",
                 "-o", tmp_path / "val.h5", "--seed", "7")  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert [line.split(" -> ")[0] for line in lines[:2]] == ["split", "split"]
    assert lines[2:] == [] or lines[2].startswith("dropped ")  # merge kept incomplete ones
    train, val = load(tmp_path / "train.npz"), load(tmp_path / "val.h5")
    assert len(train) + len(val) <= len(load(merged))
    result = run("filter", tmp_path / "train.npz", "-o", tmp_path / "best.npz", "--top", "10%")
    assert result.exit_code == 0, result.output
    shown = run("inspect", tmp_path / "best.npz")
    assert shown.exit_code == 0
    text = " ".join(shown.stdout.split())
    assert "made by merge of" in text and "made by split of" in text
    assert "made by filter of" in text and "top=10%" in text
    lineage = load(tmp_path / "best.npz").metadata["lineage"]
    assert [e["verb"] for e in lineage] == ["filter"]
    earlier = lineage[0]["sources"][0]["lineage"]
    assert [e["verb"] for e in earlier] == ["split"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["filter", "{a}", "-o", "{out}", "--where", "return >= "], 2, "expected a value"),
        (["filter", "{a}", "-o", "{out}", "--where", "retrun > 1"], 2, "unknown field 'retrun'"),
        (["filter", "{a}", "-o", "{out}"], 2, "give a selector"),
        (["filter", "{a}", "-o", "{out}", "--top", "ten"], 2, "--top"),
        (["filter", "{a}", "-o", "{out}", "--keep", "nope"], 1, "no tensor 'nope'"),
        (["split", "{a}", "-o", "{out}"], 2, "at least two outputs"),
        (
            ["split", "{a}", "-o", "{out}", "-o", "{b}.npz", "--fractions", "0.5,0.6"],
            2,
            "fractions",
        ),
        (["merge", "{a}", "-o", "{out}"], 2, "at least two datasets"),
        (["merge", "{a}", "{missing}", "-o", "{out}"], 1, "no such file"),
    ],
)
def test_errors_are_one_line_and_write_nothing(
    runs, tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    a, _ = runs
    out = tmp_path / "out.npz"
    given = [
        x.format(a=a, b=tmp_path / "b", out=out, missing=tmp_path / "missing.npz") for x in args
    ]
    result = run(*given)
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0]
    assert not out.exists()
    assert not list(tmp_path.glob("*.npz"))


def test_merge_refuses_different_tensors(runs, tmp_path: Path) -> None:
    a, _ = runs
    small = tmp_path / "small.npz"
    assert run("filter", a, "-o", small, "--drop", "rewards", "--incomplete", "keep").exit_code == 0
    result = run("merge", a, small, "-o", tmp_path / "m.npz")
    assert result.exit_code == 2
    assert "tensor 'rewards' is only in" in result.stderr
    assert np.asarray(load(small).tensors["clock"]).shape[1] == 1


def test_an_output_that_is_a_source_is_refused(runs) -> None:
    a, b = runs
    before = a.read_bytes()
    result = run("filter", a, "-o", a, "--top", "1", "--overwrite")
    assert result.exit_code == 2 and "the output is also a source" in result.stderr
    result = run("merge", a, b, "-o", b, "--overwrite")
    assert result.exit_code == 2 and "the output is also a source" in result.stderr
    assert a.read_bytes() == before


def test_compression_reaches_the_output(runs, tmp_path: Path) -> None:
    import h5py

    a, _ = runs
    result = run("filter", a, "-o", tmp_path / "top.h5", "--top", "3", "--compression", "lzf")
    assert result.exit_code == 0, result.output
    with h5py.File(tmp_path / "top.h5") as f:
        assert {f[name].compression for name in f} == {"lzf"}
    result = run("split", a, "-o", tmp_path / "x.npz", "-o", tmp_path / "y.npz",
                 "--compression", "gzip")  # fmt: skip
    assert result.exit_code == 2 and "npz files cannot be compressed" in result.stderr
    assert not list(tmp_path.glob("*.npz"))
