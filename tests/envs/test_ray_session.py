"""What ``connect`` asks of Ray, and tells a user whose cluster wants Ray's auth token."""

from __future__ import annotations

from pathlib import Path

import pytest

from expcli.envs.ray_session import auth_hint


def test_without_any_token_the_hint_says_none_is_given_and_how_to_give_one(
    tmp_path: Path,
) -> None:
    hint = auth_hint({}, home=tmp_path)
    assert "has none" in hint
    for how in (
        "RAY_AUTH_MODE=token",
        "RAY_AUTH_TOKEN=",
        "RAY_AUTH_TOKEN_PATH=",
        "~/.ray/auth_token",
    ):
        assert how in hint
    assert "ray get-auth-token" in hint


def test_a_token_given_is_named_so_that_the_user_checks_it(tmp_path: Path) -> None:
    assert "from RAY_AUTH_TOKEN " in auth_hint({"RAY_AUTH_TOKEN": "abc"}, home=tmp_path)
    path_hint = auth_hint({"RAY_AUTH_TOKEN_PATH": "/etc/token"}, home=tmp_path)
    assert "RAY_AUTH_TOKEN_PATH=/etc/token" in path_hint
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("abc")
    assert str(tmp_path / ".ray" / "auth_token") in auth_hint({}, home=tmp_path)


def test_a_local_ray_is_started_afresh_whatever_ray_start_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `ray start --head` killed without `ray stop` leaves /tmp/ray/ray_current_cluster, which a
    # bare ray.init() tries to join (and fails: "num_cpus ... must not be provided")
    ray = pytest.importorskip("ray")
    from expcli.envs import ray_session

    seen: dict[str, object] = {}
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: seen.update(kwargs))
    ray_session.connect(None, 2, 0)
    ray_session._owned, ray_session._users = False, 0
    assert seen["address"] == "local" and seen["num_cpus"] == 2
