"""Rollout actors on a real two-node Ray cluster: bytes equal to dummy mode, lost actors.

One ``ray.cluster_utils.Cluster`` (two nodes of one CPU each, started by this module)
serves every test; each collect joins it by address, as ``--ray-address`` does, and
leaves it when done. At the end the cluster is shut down and no process it started may
be left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from expcli import load
from expcli.collect.job import CollectJob
from expcli.collect.settings import CollectSettings
from expcli.errors import EnvError
from tests.envs.misbehaving_ids import MISBEHAVING_ID

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = pytest.mark.ray

ENV = "CartPole-v1"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    if ray.is_initialized():
        pytest.skip("a Ray is already initialized in this process")
    before = _descendants()
    nodes = cluster_utils.Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    try:
        nodes.add_node(num_cpus=1)
        nodes.wait_for_nodes()
        started = _descendants() - before
        yield nodes
    finally:
        if ray.is_initialized():
            ray.shutdown()
        nodes.shutdown()
    assert started  # the nodes' processes were seen
    deadline = time.monotonic() + 30
    while (alive := started & _live()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive, f"Ray processes left after the cluster was shut down: {alive}"


def _live() -> set[int]:
    """Processes alive now (zombies are dead)."""
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                pids.add(int(entry))
    return pids


def _descendants() -> set[int]:
    """This process's descendants (from /proc: each process's parent)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)] = int(fields[1])
    found: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _collect(tmp: Path, name: str, **settings: Any) -> tuple[CollectJob, Any]:
    """Run a collect job to ``tmp/name.npz`` (EnvError re-raised after the save)."""
    job = CollectJob(
        CollectSettings(env_id=ENV, output=tmp / f"{name}.npz", quiet=True, **settings)
    )
    job.start()
    try:
        job.run()
    finally:
        job.close()
        job.save()
    return job, load(tmp / f"{name}.npz")


def _arrays(dataset: Any) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in dataset.tensors.items()}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ray", "ray-subproc"])
def test_a_collect_spread_over_two_nodes_gives_the_bytes_of_dummy_mode(
    cluster: Any, tmp_path: Path, mode: str
) -> None:
    common = {"envs": 4, "steps": 4 * 300, "seed": 11}
    _, dummy = _collect(tmp_path, "dummy", mode="dummy", **common)
    job, spread = _collect(
        tmp_path, "spread", mode=mode, ray_address=cluster.address, chunk_steps=37, **common
    )
    rollout = spread.metadata["collector"]["rollout"]
    assert len({actor["node"] for actor in rollout["actors"]}) == 2  # both nodes ran envs
    assert spread.metadata["collector"]["mode"] == mode
    expected, got = _arrays(dummy), _arrays(spread)
    assert expected.keys() == got.keys()
    for name in expected:
        assert got[name].tobytes() == expected[name].tobytes(), name
    assert not ray.is_initialized()  # the job left the cluster


def test_an_episode_target_stops_at_the_row_dummy_mode_stops_at(
    cluster: Any, tmp_path: Path
) -> None:
    common = {"envs": 3, "episodes": 25, "seed": 2}
    _, dummy = _collect(tmp_path, "dummy", mode="dummy", **common)
    _, spread = _collect(tmp_path, "spread", mode="ray", ray_address=cluster.address, **common)
    for name, array in _arrays(dummy).items():
        assert _arrays(spread)[name].tobytes() == array.tobytes(), name


class _KillActor:
    """A progress callback that kills actor 0 once some rows are stored."""

    def __init__(self, job: CollectJob) -> None:
        self.job, self.killed_at = job, None

    def __call__(self, progress: Any) -> None:
        if self.killed_at is None and progress.steps > 0:
            self.killed_at = time.monotonic()
            ray.kill(self.job.env.actors[0], no_restart=True)


def _killed_run(tmp: Path, name: str, cluster: Any, **extra: Any) -> tuple[CollectJob, Any, float]:
    settings = CollectSettings(
        env_id=ENV,
        envs=4,
        steps=4 * 15_000,
        seed=4,
        mode="ray",
        ray_address=cluster.address,
        chunk_steps=50,
        output=tmp / f"{name}.npz",
        quiet=True,
        **extra,
    )
    job = CollectJob(settings)
    job.start()
    killer = _KillActor(job)
    error: EnvError | None = None
    try:
        job.run(killer)
    except EnvError as e:
        error = e
    finally:
        job.close()
    took = time.monotonic() - (killer.killed_at or 0)
    job.save()
    return job, (error, load(tmp / f"{name}.npz")), took


def test_a_killed_actor_is_an_env_error_within_seconds_and_the_rows_are_saved(
    cluster: Any, tmp_path: Path
) -> None:
    job, (error, saved), took = _killed_run(tmp_path, "killed", cluster)
    assert error is not None and "Ray actor of envs 0..1" in str(error) and "died" in str(error)
    assert took < 10
    assert 0 < len(saved) < 4 * 15_000
    assert job.stats is not None and len(saved) == job.stats.steps


@pytest.mark.slow
def test_a_killed_actor_is_replaced_and_reseeded_with_restart_on_error(
    cluster: Any, tmp_path: Path
) -> None:
    job, (error, saved), _ = _killed_run(tmp_path, "restarted", cluster, restart_on_error=True)
    assert error is None and len(saved) == 4 * 15_000
    restarts = saved.metadata["collector"]["rollout"]["restarts"]
    assert len(restarts) == 1 and restarts[0]["envs"] == [0, 1]
    row, seed = restarts[0]["row"], restarts[0]["seed"]
    got = _arrays(saved)
    obs = got["observations"]
    flags = got["truncated"][..., 0] | got["terminated"][..., 0]
    # The lost actor's episodes in flight end (truncated) on its last row ...
    assert flags[row - 1, :2].all()
    # ... and its envs start afresh from resets with the recorded seed.
    for j in range(2):
        start, _ = gym.make(ENV).reset(seed=seed + j)
        np.testing.assert_array_equal(obs[row, j], start)
    # The other actor's envs never noticed: their columns are a dummy run's.
    _, dummy = _collect(tmp_path, "dummy", mode="dummy", envs=4, steps=4 * 15_000, seed=4)
    reference = _arrays(dummy)
    for name, a in reference.items():  # (rows, envs, ...)
        b = got[name]
        np.testing.assert_array_equal(b[:, 2:], a[:, 2:], name)
        np.testing.assert_array_equal(b[: row - 1, :2], a[: row - 1, :2], name)
    # No completed episode was lost: every end in the file is counted.
    assert job.stats is not None and job.stats.episodes.complete == int(flags.sum())


def test_an_actor_that_sends_nothing_is_reported_after_the_chunk_timeout(
    cluster: Any, tmp_path: Path
) -> None:
    settings = CollectSettings(
        env_id=MISBEHAVING_ID,
        env_kwargs={"how": "sleep", "at": 30},
        envs=2,
        steps=2 * 10_000,
        seed=0,
        mode="ray",
        ray_address=cluster.address,
        step_timeout="none",
        chunk_timeout=2,
        chunk_steps=5,
        output=tmp_path / "hung.npz",
        quiet=True,
    )
    job = CollectJob(settings)
    job.start()
    began = time.monotonic()
    with pytest.raises(EnvError, match=r"sent nothing within 2 s \(--chunk-timeout\)"):
        job.run()
    assert time.monotonic() - began < 15
    job.close()
    saved = job.save()
    assert saved is not None and 0 < saved.transitions < 2 * 30


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    code = "import sys; from expcli.cli import main; sys.argv[0] = 'expcli'; main()"
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def test_ctrl_c_saves_the_rows_and_leaves_no_actor(cluster: Any, tmp_path: Path) -> None:
    out = tmp_path / "stopped.npz"
    args = ["collect", ENV, "-n", "4", "--steps", "40000000", "--mode", "ray", "--seed", "1"]
    process = _cli(*args, "--ray-address", cluster.address, "-o", str(out))
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
        if "collecting" in _read_stderr_so_far(process):
            break
    time.sleep(1.5)  # collecting
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    saved = load(out)
    assert len(saved) > 0
    pids = {actor["pid"] for actor in saved.metadata["collector"]["rollout"]["actors"]}
    deadline = time.monotonic() + 15
    while (left := pids & _live()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"actor processes still alive after Ctrl-C: {left}"


def _read_stderr_so_far(process: subprocess.Popen[str]) -> str:
    """What the process printed to stderr so far (without blocking)."""
    import fcntl

    assert process.stderr is not None
    fd = process.stderr.fileno()
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    try:
        chunk = process.stderr.read() or ""
    except (BlockingIOError, TypeError):
        chunk = ""
    process.__dict__["seen"] = process.__dict__.get("seen", "") + chunk
    return str(process.__dict__["seen"])


def test_a_policy_file_is_shipped_to_the_actors_and_gives_dummy_modes_bytes(
    cluster: Any, tmp_path: Path
) -> None:
    policy = tmp_path / "lean_policy.py"
    policy.write_text(
        "import numpy as np\n\n\n"
        "def policy(obs):\n"
        "    return (obs[:, 2] + 0.1 * obs[:, 3] > 0).astype(np.int64)\n"
    )
    common = {"envs": 4, "steps": 4 * 200, "seed": 8, "policy": f"{policy}:policy"}
    _, dummy = _collect(tmp_path, "dummy", mode="dummy", **common)
    _, spread = _collect(tmp_path, "spread", mode="ray", ray_address=cluster.address, **common)
    assert spread.metadata["collector"]["policy"] == dummy.metadata["collector"]["policy"]
    for name, array in _arrays(dummy).items():
        assert _arrays(spread)[name].tobytes() == array.tobytes(), name
