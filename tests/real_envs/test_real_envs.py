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

from tests.real_envs import cases
from tests.real_envs.cases import CASES, CHECKS, Check
from tests.real_envs.needs import require


@pytest.fixture(scope="session")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("real-envs")


@pytest.mark.slow
@pytest.mark.parametrize("check", CHECKS, ids=[check.name for check in CHECKS])
def test_real_env(check: Check, folder: Path) -> None:
    require(check.needs)
    check.run(folder)


def test_the_oracle_catches_one_changed_bit_in_a_collected_file(folder: Path) -> None:
    """A file that replays stops replaying when one bit of a final observation changes."""
    import numpy as np

    from expcli import Dataset, load, save
    from tests.real_envs.oracle import replay

    case = next(c for c in CASES if c.label == "CartPole-v1" and c.asynchronous == "none")
    dataset = load(cases.collect(case, folder))
    assert replay(cases.collect(case, folder)).ok
    tensors = {name: np.array(array) for name, array in dataset.tensors.items()}
    t, i = np.argwhere(tensors["terminated"][..., 0])[0]
    cell = tensors["next_observations"][t, i]
    cell[2:3] = (cell[2:3].view(np.uint32) ^ 1).view(np.float32)
    changed = save(Dataset(tensors, dataset.state, dataset.metadata), folder / "one-bit.npz")
    report = replay(changed)
    first = report.mismatches[0]
    assert (first.field, first.row, first.env) == ("next_observations", t, i)
    assert "[2]" in first.detail
