"""Benchmark end-to-end collection (env + random policy + memory writes) against bare stepping.

What it measures
    For CartPole-v1 and Acrobot-v1 with ``--envs`` (default 16) envs, in this one run:

    * gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv`` stepped with random actions and
      *no storage at all* (the bound a collector is held to),
    * expcli's ``Collector`` filling a ``RandomMemory`` with observations, next observations,
      actions, rewards and flags, in each mode: ``dummy``, ``subproc``, ``vector`` (Gymnasium's
      batched env, where one is registered) and ``auto`` (the mode ``expcli collect`` picks).

    The figure is stored transitions per second (env steps for the bare contenders), the median
    of ``--repeats`` repeats run round-robin so that load on the machine hits all alike. Env
    start-up (and auto's probe) is outside the timing and reported apart. Targets (issue 5):
    CartPole dummy >= 0.9x and auto >= 2x bare SyncVectorEnv; Acrobot >= 1.4x.

Run it
    python benchmarks/collect.py                 # ~2 min on 2 cores
    python benchmarks/collect.py --quick
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _report import load_average, version

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ENV_IDS = ("CartPole-v1", "Acrobot-v1")


def bare(vector_cls: Any, env_id: str, n: int) -> tuple[Callable[[int], int], Callable[[], None]]:
    """Step a gymnasium vector env with random actions, storing nothing."""
    import gymnasium as gym
    from gymnasium.vector.utils import batch_space

    env = vector_cls([lambda: gym.make(env_id)] * n)
    env.reset(seed=0)
    actions = batch_space(env.single_action_space, n)
    actions.seed(0)

    def run(steps: int) -> int:
        rows = -(-steps // n)
        for _ in range(rows):
            env.step(actions.sample())
        return rows * n

    return run, env.close


def collector(
    mode: str, env_id: str, n: int
) -> tuple[Callable[[int], int], Callable[[], None], str]:
    """Collect into a fresh memory each repeat with expcli's Collector in ``mode``."""
    from expcli.collect import Collector
    from expcli.collect.env_modes import build_env, choose_mode
    from expcli.memory import RandomMemory

    picked = choose_mode(env_id, n, "restart", {})[0] if mode == "auto" else mode
    env = build_env(picked, env_id, n, "restart", {})  # afresh after probing, as collect does
    holder: dict[str, Any] = {}

    def run(steps: int) -> int:
        memory = RandomMemory(-(-steps // n), n, device="cpu")
        c = holder.get("collector")
        if c is None:
            c = holder["collector"] = Collector(env, memory, seed=0)
        else:  # the same envs, a new memory
            c.memory = memory
            c._create_tensors()
        return c.collect(steps=steps).steps

    return run, env.close, picked


def measure(run: Callable[[int], int], seconds: float) -> Callable[[], float]:
    run(1000)  # warm-up
    t = time.perf_counter()
    done = run(4000)
    per_step = (time.perf_counter() - t) / done
    steps = max(2000, int(seconds / per_step))

    def once() -> float:
        gc.disable()
        try:
            start = time.perf_counter()
            stored = run(steps)
            return stored / (time.perf_counter() - start)
        finally:
            gc.enable()

    return once


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", action="append", help="env id (repeatable)")
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.repeats = 0.4, 3
    warnings.simplefilter("ignore")
    import gymnasium as gym

    from expcli.collect.env_modes import has_vector_entry_point

    print(
        f"expcli collect benchmark: {args.envs} envs, median of {args.repeats} repeats, "
        f"gymnasium {version('gymnasium')}, numpy {version('numpy')}, {load_average()}"
    )
    for env_id in args.env or ENV_IDS:
        contenders: dict[str, tuple[Callable[[], float], Callable[[], None], float]] = {}
        for name, cls in (
            ("SyncVectorEnv (no storage)", gym.vector.SyncVectorEnv),
            ("AsyncVectorEnv (no storage)", gym.vector.AsyncVectorEnv),
        ):
            t = time.perf_counter()
            run, close = bare(cls, env_id, args.envs)
            contenders[name] = (measure(run, args.seconds), close, time.perf_counter() - t)
        modes = ["dummy", "subproc"] + (["vector"] if has_vector_entry_point(env_id) else [])
        for mode in [*modes, "auto"]:
            t = time.perf_counter()
            run, close, picked = collector(mode, env_id, args.envs)
            label = f"expcli {mode}" + (f" (picked {picked})" if mode == "auto" else "")
            contenders[label] = (measure(run, args.seconds), close, time.perf_counter() - t)
        results: dict[str, list[float]] = {name: [] for name in contenders}
        names = list(contenders)
        for r in range(args.repeats):
            for name in names if r % 2 == 0 else names[::-1]:
                results[name].append(contenders[name][0]())
        for _, close, _ in contenders.values():
            close()
        sync = statistics.median(results["SyncVectorEnv (no storage)"])
        print(f"\n{env_id}")
        print(f"{'contender':40} {'steps/s':>10} {'vs Sync':>8} {'startup s':>10}")
        for name, values in results.items():
            median = statistics.median(values)
            print(f"{name:40} {median:10,.0f} {median / sync:7.2f}x {contenders[name][2]:10.2f}")


if __name__ == "__main__":
    main()
