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

    EnvPool (issue 17; when the ``envpool`` extra is installed), end to end through the
    command line: ``expcli collect Acrobot-v1 --envs 16 --mode envpool`` (file written
    included) beside bare ``SyncVectorEnv`` and bare EnvPool stepping with pre-drawn actions
    and no storage; ``expcli collect Pong-v5 --envs 8 --mode envpool`` (one 84x84 frame per
    observation, ``stack_num=1``) beside bare EnvPool stepping of the same envs. Every
    contender runs a small and a large number of steps: the marginal rate (steps between
    the two over the time between them) cancels start-up, which is reported apart (the
    small run's time less its steps at that rate); medians of ``--repeats``. Targets:
    Acrobot >= 4x Sync and >= 0.6x EnvPool; Pong >= 0.8x EnvPool.

Run it
    python benchmarks/collect.py                 # ~2 min on 2 cores, ~3 more with EnvPool
    python benchmarks/collect.py --quick
    python benchmarks/collect.py --envpool-only  # only the EnvPool section
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
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
    from expcli.collect.collector import create_tensors
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
            create_tensors(
                memory, c.stepper.observation_space, c.stepper.action_space, c.rewards_note
            )
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


ROOT = Path(__file__).resolve().parents[1]
BARE, SYNC = "EnvPool (no storage)", "SyncVectorEnv (no storage)"
# (env id, envs, small run, large run, targets: contender -> least ratio) of the EnvPool section
ENVPOOL_RUNS = (
    ("Acrobot-v1", 16, 80_000, 800_000, {SYNC: 4.0, BARE: 0.6}),
    ("Pong-v5", 8, 1_600, 12_000, {BARE: 0.8}),
)


def cli_collect(env_id: str, n: int, folder: str) -> Callable[[int], float]:
    """``expcli collect ENV --mode envpool`` in a fresh process; its wall time."""

    def run(steps: int) -> float:
        args = ["collect", env_id, "--envs", str(n), "--mode", "envpool", "--steps", str(steps)]
        args += ["--seed", "0", "-q", "--overwrite", "-o", os.path.join(folder, "run.pt")]
        code = "import sys; from expcli.cli import main; sys.argv[0] = 'expcli'; main()"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, *args], check=True, env=env,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        return time.perf_counter() - start

    return run


def bare_envpool(env_id: str, n: int, **kwargs: Any) -> Callable[[int], float]:
    """Build an EnvPool pool and step it with pre-drawn random actions; no storage."""
    import envpool
    import numpy as np

    def run(steps: int) -> float:
        start = time.perf_counter()
        pool = envpool.make(env_id, "gymnasium", num_envs=n, seed=0, **kwargs)
        pool.reset()
        space = pool.action_space
        actions = np.random.default_rng(0).integers(0, space.n, (256, n), dtype=np.int32)
        for t in range(-(-steps // n)):
            pool.step(actions[t % 256])
        pool.close()
        return time.perf_counter() - start

    return run


def bare_sync(env_id: str, n: int) -> Callable[[int], float]:
    """Build a gymnasium ``SyncVectorEnv`` and step it with pre-drawn random actions."""
    import gymnasium as gym
    import numpy as np

    def run(steps: int) -> float:
        start = time.perf_counter()
        env = gym.vector.SyncVectorEnv([lambda: gym.make(env_id)] * n)
        env.reset(seed=0)
        space = env.single_action_space
        actions = np.random.default_rng(0).integers(0, space.n, (256, n))
        for t in range(-(-steps // n)):
            env.step(actions[t % 256])
        env.close()
        return time.perf_counter() - start

    return run


def bytes_per_transition(env_id: str, n: int, folder: str, stack_num: int) -> float:
    """Bytes of the stored tensors per transition of a short ``--mode envpool`` run."""
    import json

    from expcli import load

    path = os.path.join(folder, f"stack{stack_num}.pt")
    args = ["collect", env_id, "--envs", str(n), "--mode", "envpool", "--steps", str(8 * n)]
    args += ["--env-kwargs", json.dumps({"stack_num": stack_num}), "-q", "-o", path]
    code = "import sys; from expcli.cli import main; sys.argv[0] = 'expcli'; main()"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code, *args], check=True, env=env,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    tensors = load(path).tensors
    return sum(t.nbytes for t in tensors.values()) / tensors["rewards"].shape[0] / n


def marginal_rates(
    contenders: dict[str, Callable[[int], float]], small: int, large: int, repeats: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Each contender's marginal steps/s between a small and a large run, and its start-up
    (the small run's time less its steps at that rate); medians of ``repeats``, the order
    of contenders alternating between repeats."""
    times: dict[str, dict[int, list[float]]] = {c: {small: [], large: []} for c in contenders}
    names = list(contenders)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            for steps in (small, large):
                gc.collect()
                times[name][steps].append(contenders[name](steps))
    rates, startups = {}, {}
    for name, by_steps in times.items():
        t_small, t_large = (statistics.median(by_steps[k]) for k in (small, large))
        rates[name] = (large - small) / (t_large - t_small)
        startups[name] = t_small - small / rates[name]
    return rates, startups


def envpool_section(repeats: int, scale: float) -> None:
    """Marginal rates and start-up of the EnvPool contenders (see the module's docstring)."""
    import envpool

    print(f"\nEnvPool {envpool.__version__}: marginal steps/s (start-up cancelled), "
          f"median of {repeats}; {load_average()}")  # fmt: skip
    for env_id, n, small, large, targets in ENVPOOL_RUNS:
        small, large = max(n, int(small * scale)), max(2 * n, int(large * scale))
        with tempfile.TemporaryDirectory() as folder:
            ours = f"expcli collect --mode envpool ({n} envs)"
            contenders = {ours: cli_collect(env_id, n, folder)}
            if env_id.startswith("Pong"):
                contenders[BARE] = bare_envpool(env_id, n, stack_num=1)
                contenders["EnvPool stack_num=4 (no storage)"] = bare_envpool(env_id, n)
            else:
                contenders[BARE] = bare_envpool(env_id, n)
                contenders[SYNC] = bare_sync(env_id, n)
            rates, startups = marginal_rates(contenders, small, large, repeats)
            mine = rates[ours]
            print(f"\n{env_id}, {n} envs: runs of {small:,} and {large:,} steps")
            print(f"{'contender':40} {'steps/s':>10} {'start-up s':>11} {'expcli / it':>12}")
            for name in contenders:
                ratio = f"{mine / rates[name]:11.2f}x" if name != ours else ""
                print(f"{name:40} {rates[name]:10,.0f} {startups[name]:11.2f} {ratio:>12}")
            for name, least in targets.items():
                verdict = "met" if mine / rates[name] >= least else "MISSED"
                print(f"target: expcli >= {least}x {name}: {mine / rates[name]:.2f}x, {verdict}")
            if env_id.startswith("Pong"):
                per = {k: bytes_per_transition(env_id, n, folder, k) for k in (1, 4)}
                print(f"storage per transition (tensors of the file): {per[1]:,.0f} bytes "
                      f"with stack_num=1, {per[4]:,.0f} with EnvPool's stacks of 4 "
                      f"({per[1] / per[4]:.2f}x)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", action="append", help="env id (repeatable)")
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--envpool-only", action="store_true", help="only the EnvPool section")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.repeats = 0.4, 3
    warnings.simplefilter("ignore")
    if args.envpool_only:
        envpool_section(args.repeats, 0.25 if args.quick else 1.0)
        return
    import gymnasium as gym

    from expcli.collect.vector_engine import has_vector_entry_point

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
    if importlib.util.find_spec("envpool") is not None:
        envpool_section(args.repeats, 0.25 if args.quick else 1.0)
    else:
        print('\nEnvPool section skipped: pip install "expcli[envpool]"')


if __name__ == "__main__":
    main()
