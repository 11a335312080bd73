"""A collect run into a foreign layout from Python: staged in a folder, converted, read back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import expcli.conversion
from expcli import load
from expcli.collect.layout_output import collect_in_layout, layout_run
from expcli.collect.settings import CollectSettings
from expcli.errors import ConfigError, FormatError, OutputExistsError
from expcli.formats.authorship import Authorship
from expcli.formats.rows import Layout
from tests.collect.test_write_plan import collect


def _settings(output: Path | None) -> CollectSettings:
    return CollectSettings("CartPole-v1", envs=2, steps=60, seed=4, mode="dummy", output=output)


def test_a_run_in_the_lerobot_layout_reads_back_as_the_same_run_in_a_file(
    tmp_path: Path,
) -> None:
    target, plain = tmp_path / "cartpole-lr", tmp_path / "cartpole.npz"
    result = collect_in_layout(_settings(target), Layout.LEROBOT)
    assert result is not None and result.dst == target and result.layout is Layout.LEROBOT
    assert result.transitions == 60 and (target / "meta" / "info.json").is_file()
    assert not (tmp_path / "cartpole-lr-collecting").exists()  # removed once converted
    collect(_settings(plain))
    got, want = load(target), load(plain)
    assert sorted(got.tensors) == sorted(want.tensors) and got.state == want.state
    for name, array in want.tensors.items():
        assert np.array_equal(np.asarray(got.tensors[name]), np.asarray(array)), name


def test_the_target_and_an_earlier_staging_folder_are_refused_before_any_env(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match="needs --output"):
        layout_run(_settings(None), Layout.MINARI)
    (tmp_path / "taken.h5").write_bytes(b"")
    with pytest.raises(OutputExistsError):
        layout_run(_settings(tmp_path / "taken.h5"), Layout.D4RL)
    (tmp_path / "run-v0-collecting").mkdir()
    with pytest.raises(ConfigError, match=r"holds an earlier run: `expcli collect --resume"):
        layout_run(_settings(tmp_path / "run-v0"), Layout.MINARI)


def test_a_failed_conversion_keeps_the_rows_and_says_how_to_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise FormatError("the disk said no")

    monkeypatch.setattr(expcli.conversion, "convert_planned", refuse)
    target = tmp_path / "cartpole-minari-v0"
    with pytest.raises(FormatError) as caught:
        who = Authorship(("Ada L.",), algorithm_name="ppo")
        collect_in_layout(_settings(target), Layout.MINARI, to="arrow", authorship=who)
    staging = tmp_path / "cartpole-minari-v0-collecting"
    [note] = caught.value.__notes__
    assert note.startswith(f"the rows collected are in {staging}: ")
    finish = f"expcli convert {staging} {target} --layout minari --storage arrow"
    assert f"{finish} --author 'Ada L.' --algorithm-name ppo`" in note
    assert len(load(staging)) == 60 and not target.exists()  # a folder run, kept whole


def test_a_run_stopped_before_its_first_row_leaves_no_staging_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing collected, nothing kept: the next run is not refused for an empty folder."""
    from expcli.collect.job import CollectJob

    def stopped(self: CollectJob) -> None:
        raise KeyboardInterrupt

    target = tmp_path / "run-v0"
    with monkeypatch.context() as patch:
        patch.setattr(CollectJob, "run", stopped)
        with pytest.raises(KeyboardInterrupt) as caught:
            collect_in_layout(_settings(target), Layout.MINARI)
    assert not getattr(caught.value, "__notes__", None)  # no "rows are in ..." for no rows
    assert list(tmp_path.iterdir()) == []
    with pytest.warns(UserWarning, match="does not keep"):
        result = collect_in_layout(_settings(target), Layout.MINARI)
    assert result is not None and result.transitions == 60
