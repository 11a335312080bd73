"""Bounded: a report's frames stay within their budget whatever they hold (noise does not
compress), and its memory does not grow with the dataset (a small and a 5x larger one, each
in a fresh child); the progress callback walks both phases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from expcli.formats import Dataset, write_dataset
from expcli.report import player, write_report
from expcli.spec import CircularState
from tests.memory_probe import MIB, Run, assert_flat, run_child
from tests.report.page_data import carried


def noise_run(rows: int, envs: int, side: int, episode: int, seed: int = 0) -> Dataset:
    """Frames of noise, episodes of ``episode`` steps (offset per env column)."""
    rng = np.random.default_rng(seed)
    frames = np.frombuffer(rng.bytes(rows * envs * side * side * 3), np.uint8)
    terminated = np.zeros((rows, envs, 1), bool)
    for env in range(envs):
        terminated[episode - 1 - env :: episode, env] = True
    tensors = {
        "observations": frames.reshape(rows, envs, side, side, 3),
        "actions": rng.integers(0, 4, (rows, envs, 1)),
        "rewards": rng.normal(size=(rows, envs, 1)).astype(np.float32),
        "terminated": terminated,
        "truncated": np.zeros((rows, envs, 1), bool),
    }
    return Dataset(tensors, CircularState(0, 0, True), {"env_id": "Noise-v0"})


def test_frames_stay_within_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    budget = 1_500_000
    monkeypatch.setattr(player, "FRAME_BUDGET", budget)
    source = write_dataset(noise_run(1200, 1, 48, 300), tmp_path / "noise.npz")
    page = tmp_path / "r.html"
    seen: list[tuple[str, float]] = []
    write_report(source, html=page, random_episodes=1, progress=lambda p, d: seen.append((p, d)))
    episodes = carried(page, "player-data")["episodes"]
    images = [u for e in episodes for u in e["frames"]["observations"]["images"]]
    assert sum(map(len, images)) <= budget
    assert all(e["frames"]["observations"]["stride"] > 1 for e in episodes)  # thinned
    assert all(len(e["frames"]["observations"]["images"]) >= 16 for e in episodes)
    assert page.stat().st_size < budget + 1_500_000  # the charts and the rest: small
    phases = [p for p, _ in seen]
    assert phases[0] == "read" and phases[-1] == "render" and seen[-1][1] == 1.0
    assert phases == sorted(phases, key=["read", "render"].index)
    for phase in ("read", "render"):
        done = [d for p, d in seen if p == phase]
        assert done == sorted(done) and done[-1] == 1.0


_REPORT = """
import sys
from expcli.report import write_report
write_report(sys.argv[1], html=sys.argv[2], plot=sys.argv[3])
"""


@pytest.mark.slow
def test_the_memory_of_a_report_does_not_grow_with_the_dataset(tmp_path: Path) -> None:
    def report(mib: float) -> Run:
        rows = int(mib * MIB) // (4 * 64 * 64 * 3)
        source = write_dataset(noise_run(rows, 4, 64, 150, seed=int(mib)),
                               tmp_path / f"{mib:.0f}.npz")  # fmt: skip
        run = run_child(["-c", _REPORT, str(source), str(tmp_path / f"{mib:.0f}.html"),
                         str(tmp_path / f"{mib:.0f}.png")], 600,
                        imports=("expcli.report.build", "matplotlib.figure", "PIL.Image",
                                 "expcli.formats.npz_format"))  # fmt: skip
        source.unlink()
        return run

    assert_flat(report)
