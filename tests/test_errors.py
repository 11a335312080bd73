"""The exception hierarchy: attributes, messages and exit codes."""

from __future__ import annotations

import pytest

from expcli import errors


def test_every_error_is_an_expcli_error() -> None:
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.ExpcliError)


def test_messages_name_the_file_and_the_key() -> None:
    e = errors.SchemaError("expected float32, got int8", path="runs/a.npz", key="rewards")
    assert str(e) == "runs/a.npz: 'rewards': expected float32, got int8"
    assert (e.path, e.key, e.exit_code) == ("runs/a.npz", "rewards", 1)


def test_exit_codes() -> None:
    assert errors.ConfigError("bad").exit_code == 2
    assert errors.FormatError("bad").exit_code == 1


def test_env_error_keeps_index_and_remote_traceback() -> None:
    e = errors.EnvError("worker died", index=3, remote_traceback="Traceback ...\nBoom")
    assert str(e) == "env 3: worker died" and e.index == 3 and e.detail == "worker died"
    assert e.__notes__ == ["Traceback ...\nBoom"]


def test_dual_inheritance_for_stdlib_handlers() -> None:
    with pytest.raises(ImportError):
        raise errors.MissingDependencyError("ray", "ray", "the ray modes")
    with pytest.raises(FileExistsError):
        raise errors.OutputExistsError("out.pt")
    assert 'pip install "expcli[ray]"' in str(errors.MissingDependencyError("ray", "ray", "x"))
