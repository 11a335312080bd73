"""CSV specifics: errors name the file, line and column; files without sidecar are inferred."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expcli.errors import ConfigError, ExpcliError, FormatError, SchemaError
from expcli.formats import Dataset, _csv_rows, open_lazy, read_dataset, write_dataset
from expcli.spec import CircularState
from tests.formats.conftest import assert_expcli_error_or_valid

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


# Reading block by block: numpy's C parser where it can, the careful parser where it cannot.

TOKENS = [
    "0", "1", "-1", "+1", "007", " 2", "3 ", "1.5", "-0.0", ".5", "1.", "1e5", "1E-3", "1e39",
    "1e400", "-1e400", "nan", "NaN", "-nan", "inf", "-Infinity", "nan:0x7fc00001",
    "nan:0xffc00000", "nan:0x7ff8000000000001", "nan:0x1", "nan:zz", "1_000", "0x10", "",
    "True", "False", "true", "0.0", "1e", "abc", "255", "256", "-129", "32768",
    "9223372036854775807", "9223372036854775808", "16777217", "0.1", '"4"', "٣",
]  # fmt: skip
DTYPES = ["bool", "uint8", "int8", "int16", "int64", "float16", "float32", "float64"]


PLAIN = {
    "b": st.sampled_from(["True", "False"]),
    "i": st.integers(-128, 255).map(str),
    "u": st.integers(0, 255).map(str),
    "f": st.floats(width=32).map(lambda v: str(np.float32(v))),
}


@st.composite
def csv_files(draw: st.DrawFn) -> tuple[str, dict[str, object] | None]:
    """A CSV text (header and rows) and a sidecar for it, or None. Cells are mostly valid
    for their column's dtype, some are odd; a line may be ragged or blank."""
    widths = draw(st.lists(st.integers(0, 2), min_size=1, max_size=3))
    dtypes = [draw(st.sampled_from(DTYPES)) for _ in widths]
    names = [f"t{index}" for index in range(len(widths))]
    header = ",".join(f"{n}.{i}" for n, w in zip(names, widths, strict=True) for i in range(w))
    cells = [
        st.one_of(*[PLAIN[np.dtype(dtype).kind]] * 20, st.sampled_from(TOKENS))
        for dtype, width in zip(dtypes, widths, strict=True)
        for _ in range(width)
    ]
    line = st.tuples(*cells).map(",".join)
    odd = st.sampled_from(["", ",".join(["1"] * (sum(widths) + 1)), "1"])
    lines = draw(st.lists(st.one_of(*[line] * 30, odd), max_size=12))
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    text = ending.join([header, *lines]) + ending * draw(st.booleans())
    if not draw(st.booleans()):
        return text, None
    sidecar = {
        "schema": "expcli/1",
        "memory_size": len(lines),
        "num_envs": 1,
        "memory_index": 0,
        "env_index": 0,
        "filled": True,
        "rows": len(lines),
        "tensors": {
            n: {"dtype": d, "shape": [w]} for n, d, w in zip(names, dtypes, widths, strict=True)
        },
    }
    return text, sidecar


def outcome(path: Path) -> tuple[str, object]:
    """What reading gives: the error's text, or each tensor's dtype, shape and bits."""
    try:
        dataset = read_dataset(path)
    except ExpcliError as e:
        return "error", str(e)
    return "data", {
        n: (a.dtype.name, a.shape, a.tobytes()) for n, a in sorted(dataset.tensors.items())
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=csv_files(), block=st.sampled_from([1, 7, 64, 1 << 20]))
def test_numpys_parser_and_the_careful_one_agree(
    tmp_path_factory: pytest.TempPathFactory,
    case: tuple[str, dict[str, object] | None],
    block: int,
) -> None:
    """Any text: the same data or the same error, whether blocks go to numpy's C parser
    first (as they do) or straight to the careful parser; only expcli errors escape."""
    text, sidecar = case
    folder = tmp_path_factory.mktemp("csv")
    path = folder / "f.csv"
    path.write_bytes(text.encode())
    if sidecar is not None:
        (folder / "f.csv.meta.json").write_text(json.dumps(sidecar))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_csv_rows, "_BLOCK_CHARS", block)
        patch.setattr(_csv_rows, "_CAREFUL_ROWS", 3)
        fast = outcome(path)
        patch.setattr(_csv_rows, "_fast", lambda *args: None)
        careful = outcome(path)
    assert fast == careful


def test_a_quote_sends_the_rest_of_the_file_to_the_careful_parser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_csv_rows, "_BLOCK_CHARS", 10)
    path = tmp_path / "q.csv"
    rows = [f"{i},{i / 2}" for i in range(40)]
    rows[30] = '30,"1\n5"'  # a cell across lines 32 and 33; errors name a row's last line
    path.write_text("a.0,b.0\n" + "\n".join(rows) + "\n")
    with pytest.raises(FormatError, match=r"line 33, column 2 \('b.0'\): .* got '1\\n5'"):
        read_dataset(path)
    rows[30] = '30,"15"'
    path.write_text("a.0,b.0\n" + "\n".join(rows) + "\n")
    assert read_dataset(path).tensors["b"][30, 0, 0] == 15


def one_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cells: list[str]) -> Path:
    """A CSV of one column ``x.0`` without sidecar, parsed in blocks of a few lines."""
    monkeypatch.setattr(_csv_rows, "_BLOCK_CHARS", 20)
    path = tmp_path / "s.csv"
    path.write_text("x.0\n" + "\n".join(cells) + "\n")
    return path


@pytest.mark.parametrize(
    ("cells", "dtype"),
    [
        (["1"] * 30 + ["2.5"] * 30, "float32"),
        (["1"] * 30 + ["0.1"] * 30, "float64"),
        (["16777217"] * 30 + ["0.5"] * 30, "float64"),
        (["-3"] * 60, "int64"),
        (["True", "False"] * 30, "bool"),
    ],
)
def test_inferred_dtypes_span_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cells: list[str], dtype: str
) -> None:
    array = read_dataset(one_column(tmp_path, monkeypatch, cells)).tensors["x"]
    assert array.dtype == dtype and array.shape == (60, 1, 1)
    if dtype == "bool":
        expected = np.array(cells) == "True"
    else:
        expected = np.array(cells).astype(np.float64 if dtype.startswith("float") else dtype)
    np.testing.assert_array_equal(array.reshape(-1), expected.astype(dtype))


@pytest.mark.parametrize(
    ("cells", "line"),
    [(["True"] * 30 + ["1"] * 30, 2), (["1"] * 30 + ["False"] * 30, 32)],
)
def test_bools_and_numbers_in_one_tensor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cells: list[str], line: int
) -> None:
    path = one_column(tmp_path, monkeypatch, cells)
    with pytest.raises(FormatError, match=rf"line {line}, column 1 \('x.0'\): expected a number"):
        read_dataset(path)


def test_open_lazy_serves_slices_from_a_scratch_file(tmp_path: Path) -> None:
    path = written(tmp_path)
    before = sorted(os.listdir(tmp_path))
    dataset, close = open_lazy(path)
    assert sorted(os.listdir(tmp_path)) == before  # the scratch file has no name
    whole = read_dataset(path)
    for name, array in whole.tensors.items():
        lazy = dataset.tensors[name]
        assert (lazy.shape, lazy.dtype) == (array.shape, array.dtype)
        np.testing.assert_array_equal(lazy[1:3], array[1:3])
    close()
    with pytest.raises(ValueError):
        dataset.tensors["actions"][0:1]


def test_crlf_line_endings(tmp_path: Path) -> None:
    path = written(tmp_path)
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert read_dataset(path).tensors["observations"].tolist() == [[[0, 1]], [[2, 3]], [[4, 5]]]


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(max_size=200)
    | st.text(alphabet='0123456789.,-+eE\n\r"TrueFalsnaix: \0', max_size=300).map(str.encode),
    sidecar=st.booleans(),
    block=st.sampled_from([1, 16, 1 << 20]),
)
def test_fuzzed_bytes_raise_only_expcli_errors(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, sidecar: bool, block: int
) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "f.csv"
    path.write_bytes(b"a.0,b.0,b.1\n" + data)
    if sidecar:
        rows = data.count(b"\n")
        tensors = {"a": {"dtype": "bool", "shape": []}, "b": {"dtype": "float16", "shape": [2]}}
        header = {"schema": "expcli/1", "memory_size": rows, "num_envs": 1, "rows": rows}
        header |= {"memory_index": 0, "env_index": 0, "filled": True, "tensors": tensors}
        (folder / "f.csv.meta.json").write_text(json.dumps(header))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_csv_rows, "_BLOCK_CHARS", block)
        assert_expcli_error_or_valid(path)


def test_a_nan_payload_beside_an_out_of_range_number_names_the_number(tmp_path: Path) -> None:
    """The range error looks for its culprit past NaN payload cells (it raised ValueError on
    ``nan:0x7fc00001``, a traceback instead of one line; found by the property test above)."""
    path = tmp_path / "run.csv"
    path.write_text("t1.0,t2.0,t2.1\nTrue,0.0,0.0\nTrue,nan:0x7fc00001,65520.0\n")
    sidecar = {
        "schema": "expcli/1",
        "memory_size": 2,
        "num_envs": 1,
        "memory_index": 0,
        "env_index": 0,
        "filled": True,
        "rows": 2,
        "tensors": {
            "t1": {"dtype": "bool", "shape": [1]},
            "t2": {"dtype": "float16", "shape": [2]},
        },
    }
    (tmp_path / "run.csv.meta.json").write_text(json.dumps(sidecar))
    with pytest.raises(FormatError, match=r"line 3, column 3 \('t2.1'\).*float16's range.*65520"):
        read_dataset(path)
