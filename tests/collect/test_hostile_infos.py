"""``collect --infos`` with infos an env may well send: a huge int, an int key, an empty key,
a key that is None, text or an array before it is a number. The run is never lost to one:
every key is stored or named once as skipped, in the run's output and its metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import expcli
from expcli.cli import app
from expcli.collect.info_columns import InfoColumns
from tests.envs.misbehaving_ids import MISBEHAVING_ID

RUN = [MISBEHAVING_ID, "--envs", "2", "--steps", "40", "--mode", "dummy", "--infos"]


def _collect(how: str, out: Path) -> str:
    kwargs = json.dumps({"how": how, "at": 4})
    args = ["collect", *RUN, "--env-kwargs", kwargs, "-q", "-o", str(out)]
    if out.suffix == "":
        args += ["--shard-size", "3"]  # several shards, written before and after the key
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stderr and result.exception is None
    assert result.stdout.strip() == str(out)
    return result.stderr.strip()


@pytest.mark.parametrize("suffix", [".h5", ""])
@pytest.mark.parametrize(
    ("how", "key", "why"),
    [
        ("huge_info", "'huge'", "stored, as +-inf where a value was too large for a float64"),
        ("int_key_info", "7", "not stored: a key of type int, not text"),
        ("empty_key_info", "''", "not stored: not a tensor name (empty, a '.' or empty part"),
    ],
    ids=["huge", "int_key", "empty_key"],
)
def test_a_hostile_info_is_stored_or_named_once(
    tmp_path: Path, how: str, key: str, why: str, suffix: str
) -> None:
    out = tmp_path / f"run{suffix}"
    stderr = _collect(how, out)
    assert stderr.startswith(f"--infos: {key} {why}") and len(stderr.splitlines()) == 1, stderr
    dataset = expcli.load(out)
    assert len(dataset) == 40  # no row lost
    notes = dataset.metadata["collector"]["info_notes"]
    assert list(notes) == [key] and notes[key].startswith(why)
    infos = [name for name in dataset.tensors if name.startswith("infos/")]
    if how == "huge_info":
        assert infos == ["infos/huge", "infos/t"]
        huge = dataset.tensors["infos/huge"][..., 0]
        # the env says it from its 4th step on: NaN in each env's first 3 rows, then inf
        assert np.isnan(huge[:3]).all() and np.isposinf(huge[3:]).all()
    else:
        assert infos == ["infos/t"]


@pytest.mark.parametrize("suffix", [".npz", ""])
def test_a_key_stored_from_the_step_it_first_holds_a_number(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"run{suffix}"
    assert _collect("late_info", out) == ""  # stored: nothing to say
    late = expcli.load(out).tensors["infos/late"][..., 0]
    # None, "n/a", an array, then the env's step count from its 4th step on
    assert np.isnan(late[:3]).all()
    assert np.array_equal(late[3:8], np.repeat(np.arange(4.0, 9.0)[:, None], 2, axis=1))


_KEYS = st.one_of(
    st.text(max_size=4, alphabet="ab/.\x00"), st.integers(-3, 3), st.none(), st.just("reset")
)
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(10**300, 10**400).map(lambda i: i * 10**20),  # beyond any float
    st.floats(),
    st.text(max_size=3),
    st.just(np.zeros(2)),
    st.just(np.array(3, dtype=np.uint8)),
    st.just(np.complex64(1j)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.dictionaries(_KEYS, _VALUES, max_size=4), min_size=2, max_size=2)))
def test_every_info_key_is_stored_or_named(steps: list[list[dict[Any, Any]]]) -> None:
    """Whatever the infos, no step raises; every key met is stored or noted, and each
    stored name is a tensor name every format takes."""
    columns, met = InfoColumns(), set()
    for infos in steps:
        columns.new_keys(infos)
        values = columns.columns(infos)
        assert all(v.shape == (2, 1) and v.dtype == np.float64 for v in values.values())
        met |= {key for info in infos for key in info}
    notes = columns.notes()
    for key in met - {"reset"}:
        assert key in columns.keys or repr(key) in notes, key
    names = columns.keys
    for name in names:
        assert name and "\x00" not in name
        assert all(part not in ("", ".") for part in name.split("/"))
        assert not any(other.startswith(name + "/") for other in names)
