"""Real envs through the real command line, every stored transition replayed bit for bit.

Each check of ``cases.CHECKS`` runs ``python -m expcli collect ... --seed`` in a subprocess
(Atari in every mode, MuJoCo, Box2D, MiniGrid, gymnasium's toy-text envs, a Dict env of
our own, and the ``none``/``idle`` async modes), and the oracle steps fresh envs through
the file; a few checks look at refusals and at byte-identical reruns instead. Files are
collected once per session. ``python -m tests.real_envs.report`` prints the same verdicts
as a table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.real_envs.cases import CHECKS, Check
from tests.real_envs.needs import require


@pytest.fixture(scope="session")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("real-envs")


@pytest.mark.parametrize("check", CHECKS, ids=[check.name for check in CHECKS])
def test_real_env(check: Check, folder: Path) -> None:
    require(check.needs)
    check.run(folder)
