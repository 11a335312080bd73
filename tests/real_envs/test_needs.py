"""A missing env package skips the real-env tests on a workstation and fails them in CI."""

from __future__ import annotations

import pytest

from tests.real_envs.needs import missing_packages, require

ABSENT = "expcli_no_such_env_package"


def test_missing_packages_names_only_the_absent_ones() -> None:
    assert missing_packages(("numpy", ABSENT, "gymnasium")) == [ABSENT]


@pytest.mark.parametrize("ci", ["true", "1"])
def test_ci_fails_on_a_missing_package(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match=f"needs {ABSENT}.*CI runs every real env"):
        require((ABSENT,))


@pytest.mark.parametrize("ci", [None, "false", ""])
def test_elsewhere_skips_with_the_reason(monkeypatch: pytest.MonkeyPatch, ci: str | None) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match=f"needs {ABSENT}: pip install"):
        require((ABSENT,))


def test_present_packages_neither_skip_nor_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    require(("numpy", "gymnasium"))
