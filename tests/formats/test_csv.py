"""CSV specifics: errors name the file, line and column; files without sidecar are inferred."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from expcli.errors import ConfigError, FormatError, SchemaError
from expcli.formats import Dataset, read_dataset, write_dataset
from expcli.spec import CircularState

HEADER = "actions.0,observations.0,observations.1,terminated.0"


def written(tmp_path: Path) -> Path:
    """A 3x1 dataset: actions uint8, observations float32 (2), terminated bool."""
    dataset = Dataset(
        {
            "actions": np.array([[[1]], [[2]], [[3]]], np.uint8),
            "observations": np.arange(6, dtype=np.float32).reshape(3, 1, 2),
            "terminated": np.array([[False], [False], [True]]),
        },
        CircularState(0, 0, True),
    )
    return write_dataset(dataset, tmp_path / "run.csv")


def edit(path: Path, line: int, text: str | None) -> None:
    """Replace (or with None delete) 1-based ``line`` of a file."""
    lines = path.read_text().splitlines()
    if text is None:
        del lines[line - 1]
    else:
        lines[line - 1] = text
    path.write_text("\n".join(lines) + "\n")


OBS0, OBS, ACT, TERM = ("observations.0", "observations", "actions.0", "terminated.0")
BAD_LINES = [
    (3, "2,2.0,3.0", r"line 3: 3 columns; expected 4", None),
    (3, "2,2.0,3.0,False,1", r"line 3: 5 columns; expected 4", None),
    (3, "2,abc,3.0,False", rf"line 3, column 2 \('{OBS0}'\): expected a number", OBS),
    (4, "3,4.0,5.0,maybe", rf"line 4, column 4 \('{TERM}'\): expected True or False", "terminated"),
    (
        2,
        "300,0.0,1.0,False",
        rf"line 2, column 1 \('{ACT}'\): expected an integer in 0..255",
        "actions",
    ),
    (2, "1.5,0.0,1.0,False", rf"line 2, column 1 \('{ACT}'\): expected an integer", "actions"),
    (2, "1,1e39,1.0,False", rf"line 2, column 2 \('{OBS0}'\): expected a number within", OBS),
    (1, HEADER.replace(OBS0, "obs.0"), r"line 1, column 2: header 'obs.0'", "obs.0"),
    (
        1,
        HEADER[: -len(",terminated.0")],
        r"line 1: header has 3 columns; the sidecar expects 4",
        None,
    ),
    (4, None, r"has 2 data rows; the sidecar run.csv.meta.json says 3", None),
]


@pytest.mark.parametrize(("line", "text", "match", "key"), BAD_LINES)
def test_errors_name_line_and_column(
    tmp_path: Path, line: int, text: str | None, match: str, key: str | None
) -> None:
    path = written(tmp_path)
    edit(path, line, text)
    with pytest.raises(FormatError, match=match) as info:
        read_dataset(path)
    assert info.value.path == str(path)
    assert info.value.key == key


def test_extra_rows(tmp_path: Path) -> None:
    path = written(tmp_path)
    with open(path, "a") as f:
        f.write("4,6.0,7.0,False\n")
    with pytest.raises(FormatError, match="line 5: more rows than the 3 the sidecar lists"):
        read_dataset(path)


def test_quoted_fields_spanning_lines_keep_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text('a.0,b.0\n1,"2"\n3,"x\ny"\n')
    with pytest.raises(FormatError, match=r"line 4, column 2 \('b.0'\)"):
        read_dataset(path)


@pytest.mark.parametrize(
    ("sidecar", "error", "match"),
    [
        ("{oops", FormatError, "not valid JSON"),
        ("[]", FormatError, "expected an object"),
        ('{"schema": "expcli/1"}', SchemaError, "malformed circular state"),
    ],
)
def test_bad_sidecar_is_named(tmp_path: Path, sidecar: str, error: type, match: str) -> None:
    path = written(tmp_path)
    (tmp_path / "run.csv.meta.json").write_text(sidecar)
    with pytest.raises(error, match=match) as info:
        read_dataset(path)
    assert info.value.path == str(tmp_path / "run.csv.meta.json")


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"rows": 4}, "rows is 4; expected memory_size \\* num_envs = 3"),
        ({"rows": -1}, "'rows': is -1; expected a non-negative integer"),
        ({"num_envs": "1"}, "'num_envs': is '1'; expected a non-negative integer"),
        ({"tensors": {"actions": {"dtype": "uint8", "shape": [1]}}}, "line 1"),
    ],
)
def test_sidecar_that_disagrees(tmp_path: Path, change: dict[str, object], match: str) -> None:
    path = written(tmp_path)
    sidecar = tmp_path / "run.csv.meta.json"
    sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), **change}))
    with pytest.raises((FormatError, SchemaError), match=match):
        read_dataset(path)


def test_not_utf8_and_nul_bytes(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_bytes(b"a.0\n\xff\xfe\n")
    with pytest.raises(FormatError, match="not UTF-8"):
        read_dataset(path)
    path.write_bytes(b"a.0\n1\x002\n")
    with pytest.raises(FormatError):
        read_dataset(path)


def test_header_only_and_bom(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_bytes(b"\xef\xbb\xbfx.0,x.1\n")
    dataset = read_dataset(path)
    assert dataset.tensors["x"].shape == (0, 1, 2) and dataset.tensors["x"].dtype == np.float32


@pytest.mark.parametrize(
    ("header", "match"),
    [
        ("a.0,a.2", r"line 1, column 2: header 'a.2'"),
        ("a.1", r"line 1, column 1: header 'a.1'"),
        ("a.0,b.0,a.1", r"line 1, column 3: header 'a.1'"),
        ("a,b", r"line 1, column 1: header 'a'"),
        ("a.x", r"line 1, column 1"),
        (".0", r"line 1, column 1"),
    ],
)
def test_headers_without_sidecar_must_be_skrl_style(
    tmp_path: Path, header: str, match: str
) -> None:
    path = tmp_path / "h.csv"
    path.write_text(header + "\n")
    with pytest.raises(FormatError, match=match):
        read_dataset(path)


def test_inference_without_sidecar(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text(
        "b.0,i.0,i.1,f.0,d.0,x.y.0\n"
        "True,1,-2,0.5,0.1,nan\n"
        "False,3,4,-0.0,1e300,inf\n"
        "True,5,6,1.0,2.0,-inf\n"
    )
    dataset = read_dataset(path)
    assert {k: v.dtype.name for k, v in dataset.tensors.items()} == {
        "b": "bool",
        "i": "int64",
        "f": "float32",
        "d": "float64",
        "x.y": "float32",
    }
    assert dataset.tensors["i"].shape == (3, 1, 2)
    assert np.signbit(dataset.tensors["f"][1, 0, 0])
    assert dataset.state == CircularState(0, 0, True) and dataset.metadata == {}


def test_rows_that_do_not_fill_the_last_row_of_envs(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("t.0,k.0\n" + "".join(f"{i},{i % 2 == 0}\n" for i in range(5)))
    dataset = read_dataset(path, num_envs=2)
    assert dataset.state == CircularState(2, 1, False) and len(dataset) == 5
    assert dataset.tensors["t"].reshape(-1).tolist() == [0, 1, 2, 3, 4, 0]
    assert dataset.tensors["k"].reshape(-1).tolist() == [True, False, True, False, True, False]


def test_num_envs_must_be_positive_and_is_ignored_when_recorded(tmp_path: Path) -> None:
    path = written(tmp_path)
    with pytest.raises(ConfigError):
        read_dataset(path, num_envs=0)
    assert read_dataset(path, num_envs=4).num_envs == 1


def test_many_rows(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    dataset = Dataset(
        {
            "observations": rng.standard_normal((2000, 8, 6)).astype(np.float32),
            "actions": rng.integers(0, 4, (2000, 8, 1)),
            "terminated": rng.random((2000, 8)) < 0.1,
        },
        CircularState(123, 5, True),
    )
    back = read_dataset(write_dataset(dataset, tmp_path / "big.csv"))
    for name, array in dataset.tensors.items():
        assert np.array_equal(back.tensors[name], array) and back.tensors[name].dtype == array.dtype
    assert back.state == dataset.state
