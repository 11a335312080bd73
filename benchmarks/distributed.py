"""Benchmark ``expcli collect`` with rollout actors on a local Ray against one process.

What it measures (all in one run, ratios printed in a table)
    1. Acrobot-v1, 16 envs, ``expcli collect --mode ray --num-cpus 2`` (two rollout actors)
       against ``--mode dummy``, end to end through the command line (file written
       included): marginal steps/s from a small and a large run (start-up cancelled; shown
       apart). Target: ray >= 1.5x dummy.
    2. Scaling: a registered synthetic env burning 1 ms of CPU per step (``burn_env``), 4
       envs over 2 actors; efficiency = steps/s / (2 x one in-process env's steps/s).
       Target >= 0.8.
    3. The driver alone: ``RolloutCollector`` merging fake CartPole-size chunks from 2
       "actors" (no envs, no Ray) into a memory. Target >= 2 M transitions/s.

    From the measured figures it prints how many actors one driver can feed: each actor
    delivers ``chunk rows x its envs`` per call; the driver's rate over an actor's rate.

Run it (heavy: under the shared lock)
    flock /tmp/expcli-cpu.lock python benchmarks/distributed.py          # ~3 min
    flock /tmp/expcli-cpu.lock python benchmarks/distributed.py --quick
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _report import fmt_rate, fmt_ratio, load_average, version
from collect import marginal_rates

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BURN = "benchmarks.burn_env:ExpcliBench/Burn-v0"


def cli_collect(env_id: str, n: int, mode: str, folder: str) -> Callable[[int], float]:
    """``expcli collect ENV --mode MODE`` in a fresh process; its wall time."""

    def run(steps: int) -> float:
        args = ["collect", env_id, "--envs", str(n), "--mode", mode, "--steps", str(steps)]
        args += ["--seed", "0", "-q", "--overwrite", "-o", os.path.join(folder, f"{mode}.npz")]
        if mode.startswith("ray"):
            args += ["--num-cpus", "2"]
        code = "import sys; from expcli.cli import main; sys.argv[0] = 'expcli'; main()"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": ""}
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, *args], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        return time.perf_counter() - start

    return run


def one_env_rate(seconds: float = 2.0) -> float:
    """Steps/s of one in-process burn env with random actions (no storage)."""
    import gymnasium as gym

    import benchmarks.burn_env  # noqa: F401 (registers the env)

    env = gym.make("ExpcliBench/Burn-v0")
    env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, terminated, truncated, _ = env.step(steps % 2)
        if terminated or truncated:
            env.reset()
        steps += 1
    return steps / (time.perf_counter() - start)


class FakeFleet:
    """Stands for ``RolloutFleet``: two actors answering at once with ready-made chunks."""

    def __init__(self, num_envs: int, actors: int, chunk_rows: int) -> None:
        import gymnasium as gym
        import numpy as np

        from expcli.collect.rollout.actor import SliceSpec

        self.num_envs = num_envs
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        bounds = np.linspace(0, num_envs, actors + 1).astype(int)
        base = SliceSpec("CartPole-v1", {}, (), 0, 0, False, None, None, 0, "random", 0, "float32")
        from dataclasses import replace

        pairs = zip(bounds[:-1], bounds[1:], strict=True)
        self.specs = [replace(base, lo=int(lo), hi=int(hi)) for lo, hi in pairs]
        rng = np.random.default_rng(0)
        self.chunks = []
        for spec in self.specs:
            n = spec.hi - spec.lo
            done = rng.random((chunk_rows, n, 1)) < 0.05
            self.chunks.append({
                "observations": rng.random((chunk_rows, n, 4), dtype=np.float32),
                "next_observations": rng.random((chunk_rows, n, 4), dtype=np.float32),
                "actions": rng.integers(0, 2, (chunk_rows, n, 1)),
                "rewards": np.ones((chunk_rows, n, 1), np.float32),
                "terminated": done,
                "truncated": np.zeros((chunk_rows, n, 1), bool),
            })  # fmt: skip
        self.restarts: list[dict[str, Any]] = []

    def request(self, a: int, seq: int, steps: int) -> Any:
        from expcli.collect.rollout.fleet import Request

        return Request(a, seq, steps, None, time.monotonic())

    def wait(self, requests: list[Any], timeout: float) -> list[Any]:
        return list(requests)

    def result(self, request: Any) -> dict[str, Any]:
        chunk = self.chunks[request.actor]
        rows = request.steps
        columns = (
            chunk if rows == len(chunk["rewards"]) else {k: v[:rows] for k, v in chunk.items()}
        )
        return {"columns": columns, "env_steps": rows * len(chunk["rewards"][0]),
                "seconds": 0.05, "rewards_changed": 0, "rewards_env_dtype": "float64"}  # fmt: skip

    def metadata(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


def driver_rate(transitions: int, num_envs: int = 64, chunk_rows: int = 1024) -> float:
    """Transitions/s the driver merges from fake chunks into a preallocated memory."""
    from expcli.collect.rollout.collector import RolloutCollector
    from expcli.memory import RandomMemory

    fleet = FakeFleet(num_envs, 2, chunk_rows)
    rows = -(-transitions // num_envs)
    memory = RandomMemory(rows, num_envs, device="cpu")
    collector = RolloutCollector(fleet, memory, seed=0, chunk_steps=chunk_rows)  # type: ignore[arg-type]
    start = time.perf_counter()
    stats = collector.collect(steps=rows * num_envs)
    return stats.steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs, 1 repeat")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    scale = 0.25 if args.quick else 1.0
    print(f"expcli collect on a local Ray: ray {version('ray')}, gymnasium "
          f"{version('gymnasium')}, {os.cpu_count()} CPUs; {load_average()}")  # fmt: skip
    rows: list[tuple[str, str, str, str, str]] = []
    with tempfile.TemporaryDirectory() as folder:
        n = 16
        small, large = int(32_000 * scale), int(320_000 * scale)
        contenders = {m: cli_collect("Acrobot-v1", n, m, folder) for m in ("dummy", "ray")}
        rates, startups = marginal_rates(contenders, small, large, repeats)
        ratio = rates["ray"] / rates["dummy"]
        rows.append(("Acrobot-v1 x16 --mode dummy", fmt_rate(rates["dummy"]),
                     f"{startups['dummy']:.1f}", "1.00x", ""))  # fmt: skip
        rows.append(("Acrobot-v1 x16 --mode ray (2 actors)", fmt_rate(rates["ray"]),
                     f"{startups['ray']:.1f}", fmt_ratio(ratio), ">= 1.5x"))  # fmt: skip
        one = one_env_rate()
        burn_small, burn_large = int(4_000 * scale), int(24_000 * scale)
        burn = {"ray": cli_collect(BURN, 4, "ray", folder)}
        burn_rates, burn_startups = marginal_rates(burn, burn_small, burn_large, repeats)
        efficiency = burn_rates["ray"] / (2 * one)
        rows.append(("burn 1 ms/step, one env in process", fmt_rate(one), "-", "-", ""))
        burned = fmt_rate(burn_rates["ray"])
        startup = f"{burn_startups['ray']:.1f}"
        name = "burn 1 ms/step x4 --mode ray (2 actors)"
        rows.append((name, burned, startup, f"{efficiency:.2f} eff.", ">= 0.8"))
    driver = driver_rate(int(8_000_000 * scale))
    rows.append(("driver alone, fake CartPole chunks", fmt_rate(driver), "-",
                 f"{driver / 2e6:.2f}x of 2 M", ">= 2 M/s"))  # fmt: skip
    print(f"\n{'contender':42} {'steps/s':>9} {'start-up s':>11} {'ratio':>14} {'target':>9}")
    for name, rate, startup, r, target in rows:
        print(f"{name:42} {rate:>9} {startup:>11} {r:>14} {target:>9}")
    per_actor = rates["ray"] / 2
    print(
        f"\nOne driver feeds about {driver / per_actor:.0f} actors like these "
        f"({fmt_rate(per_actor)} Acrobot transitions/s each) before merging is its limit."
    )


if __name__ == "__main__":
    main()
