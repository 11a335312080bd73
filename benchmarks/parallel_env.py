"""Benchmark env-steps/s of expcli's ParallelEnv modes against gymnasium, tianshou and EnvPool.

What it measures
    For each ``--env`` (default CartPole-v1 and Acrobot-v1), ``--envs`` copies (default 16) are
    stepped with the same pre-generated random actions by every contender, in this one run:

    * a raw single env (``gym.make`` stepped in a Python loop, reset when done),
    * gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv`` (default context and autoreset mode),
      and ``gym.make_vec(vectorization_mode="vector_entry_point")`` where the env has a batched
      implementation (informational),
    * expcli's ``ParallelEnv`` in every mode (``asynchronous="restart"``): dummy, subproc (its
      default ``num_cpus``, and 2 and 1 workers), ray, ray-subproc,
    * tianshou's ``ShmemVectorEnv`` and ``SubprocVectorEnv`` (done envs reset by id, as its
      Collector does) and EnvPool, where installed.

How it times
    Each contender is built and reset once per env id (that wall time is the "startup" column;
    the local Ray the ray modes share is started just before them, its start-up reported apart).
    After an untimed warm-up, the steps per repeat are calibrated to ``--seconds``; every figure
    is the median of ``--repeats`` repeats, run round-robin across the contenders (reversed every
    other repeat) so that load on the machine hits all of them alike. The garbage collector is
    paused inside timed loops. Env-steps = steps x envs (the raw row: its one env's steps).

Run it
    python benchmarks/parallel_env.py            # ~3-4 min on 2 cores
    python benchmarks/parallel_env.py --quick    # fast check
    python benchmarks/parallel_env.py --env Acrobot-v1 --seconds 3 --repeats 7 --no-ray
"""

from __future__ import annotations

import argparse
import datetime
import faulthandler
import gc
import importlib
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from _report import fmt_rate, fmt_ratio, load_average, ratio, version

# Benchmark the checkout this script lives in, not some installed copy.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ENV_IDS = ("CartPole-v1", "Acrobot-v1")
ACTION_STEPS = 2048  # pre-generated steps of actions, cycled
WARMUP_STEPS, CALIBRATION_STEPS, MIN_STEPS = 20, 50, 20
WATCHDOG_S = 60.0  # a measurement taking longer dumps every thread's stack to stderr

Step = Callable[[int], object]
"""Step ``t`` of the pre-generated actions (the index wraps around)."""

# --------------------------------------------------------------------------------------------
# Contenders
# --------------------------------------------------------------------------------------------


def maker(kind: str, name: str = "", num_cpus: int | None = None) -> Callable[[str, int], Any]:
    """(env_id, num_envs) -> an env of the given kind, not yet reset."""

    def make(env_id: str, n: int) -> Any:
        import gymnasium as gym

        fns = [partial(gym.make, env_id)] * n
        if kind == "raw":
            return gym.make(env_id)
        if kind == "gym" and name == "make_vec":
            if gym.spec(env_id).vector_entry_point is None:
                raise LookupError(f"{env_id} has no vector entry point")
            return gym.make_vec(env_id, num_envs=n, vectorization_mode="vector_entry_point")
        if kind == "gym":
            return getattr(gym.vector, name)(fns)
        if kind == "tianshou":
            from tianshou.env import venvs

            return getattr(venvs, name)(fns)
        if kind == "envpool":
            import envpool

            return envpool.make(env_id, env_type="gymnasium", num_envs=n, seed=0)
        from expcli import ParallelEnv

        return ParallelEnv.from_id(
            env_id, num_envs=n, para_mode=name, asynchronous="restart", seed=0, num_cpus=num_cpus
        )

    return make


@dataclass
class Spec:
    label: str
    role: str  # "raw" (one env, reset when done) | "gym" | "expcli" | "peer"
    make: Callable[[str, int], Any]
    needs: str | None = None  # a module that must be importable
    reset_done: bool = False  # no autoreset: the harness resets done envs by id
    ray: bool = False

    def stepper(self, env: Any, actions: np.ndarray) -> Step:
        step, reset = env.step, env.reset
        flat = actions.reshape(-1) if self.role == "raw" else actions
        size = len(flat)

        def step_one(t: int) -> None:
            _, _, terminated, truncated, _ = step(flat[t % size])
            if terminated or truncated:
                reset()

        def step_and_reset_done(t: int) -> None:
            _, _, terminated, truncated, _ = step(flat[t % size])
            done = np.flatnonzero(terminated | truncated)
            if done.size:
                reset(done)

        if self.role == "raw":
            return step_one
        return step_and_reset_done if self.reset_done else lambda t: step(flat[t % size])


def specs(with_ray: bool) -> list[Spec]:
    cores = os.cpu_count() or 1
    subproc = [  # the default first: the targets read the first subproc row
        Spec(
            f"expcli subproc (num_cpus={c}{', default' if c == cores else ''})",
            "expcli",
            maker("expcli", "subproc", None if c == cores else c),
        )
        for c in dict.fromkeys([cores, 2, 1])
    ]
    tianshou = [
        Spec(f"tianshou {c}", "peer", maker("tianshou", c), "tianshou.env", reset_done=True)
        for c in ("ShmemVectorEnv", "SubprocVectorEnv")
    ]
    ray_modes = ("ray", "ray-subproc") if with_ray else ()
    return [
        Spec("raw single env", "raw", maker("raw")),
        *(Spec(f"gym {c}", "gym", maker("gym", c)) for c in ("SyncVectorEnv", "AsyncVectorEnv")),
        Spec("gym make_vec vector_entry_point", "gym", maker("gym", "make_vec")),
        *tianshou,
        Spec("envpool", "peer", maker("envpool"), "envpool"),
        Spec("expcli dummy", "expcli", maker("expcli", "dummy")),
        *subproc,
        # Last: see build_runners.
        *(Spec(f"expcli {m}", "expcli", maker("expcli", m), "ray", ray=True) for m in ray_modes),
    ]


def ray_running() -> bool:
    return "ray" in sys.modules and sys.modules["ray"].is_initialized()


# --------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------


@dataclass
class Runner:
    label: str
    role: str
    width: int  # env-steps per step call
    step: Step
    close: Callable[[], None]
    startup: float
    steps: int = 0  # per repeat, calibrated
    position: int = 0  # next action index
    runs: list[float] = field(default_factory=list)
    error: str | None = None

    def run(self, steps: int) -> float:
        """Seconds taken by ``steps`` steps, with the garbage collector paused."""
        step, start = self.step, self.position
        self.position += steps
        gc.disable()
        try:
            t0 = time.perf_counter()
            for t in range(start, start + steps):
                step(t)
            return time.perf_counter() - t0
        finally:
            gc.enable()

    @property
    def median(self) -> float | None:
        return statistics.median(self.runs) if self.runs and self.error is None else None

    @property
    def spread(self) -> float | None:
        mid = self.median
        return (max(self.runs) - min(self.runs)) / mid if mid else None


def build_runners(
    spec_list: Sequence[Spec], env_id: str, n: int, runners: list[Runner], notes: list[str]
) -> None:
    """Build and reset every contender into ``runners``. The ray modes come last, after a Ray
    started here: no process is forked while Ray's threads run (a child could inherit a held
    lock), and Ray's start-up stays out of their 'startup'."""
    import gymnasium as gym

    with gym.make(env_id) as probe:
        space: Any = probe.action_space  # Discrete
        high = int(space.n)
    actions = np.random.default_rng(0).integers(0, high, (ACTION_STEPS, n), dtype=np.int64)
    for s in spec_list:
        t0, env = time.perf_counter(), None
        if s.ray and not ray_running():  # the ray modes leave a Ray they did not start running
            try:
                import ray

                ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
            except Exception as exc:
                notes.append(f"skipped: ray modes on {env_id} (ray.init: {exc!r})")
                break
            notes.append(f"ray.init on {env_id}: {time.perf_counter() - t0:.1f} s, not in startup")
            t0 = time.perf_counter()
        try:
            env = s.make(env_id, n)
            env.reset() if s.role == "peer" else env.reset(seed=0)
        except Exception as exc:  # report any failure and go on
            notes.append(f"skipped: {s.label} on {env_id} ({type(exc).__name__}: {exc})")
            if env is not None:
                env.close()
            continue
        startup, width = time.perf_counter() - t0, 1 if s.role == "raw" else n
        runners.append(Runner(s.label, s.role, width, s.stepper(env, actions), env.close, startup))


def measure(
    runners: Sequence[Runner], seconds: float, repeats: int, notes: list[str], env_id: str
) -> None:
    def calibrate(r: Runner) -> None:
        r.run(WARMUP_STEPS)
        r.steps = max(MIN_STEPS, int(seconds * CALIBRATION_STEPS / r.run(CALIBRATION_STEPS)))

    def once(r: Runner) -> None:
        r.runs.append(r.steps * r.width / r.run(r.steps))

    def attempt(r: Runner, fn: Callable[[Runner], None]) -> None:
        if r.error is not None:
            return
        faulthandler.dump_traceback_later(WATCHDOG_S)  # a hang shows where it is
        try:
            fn(r)
        except Exception as exc:  # a failing contender drops out
            r.error = f"{type(exc).__name__}: {exc}"
            notes.append(f"failed: {r.label} on {env_id} while stepping ({r.error})")
        finally:
            faulthandler.cancel_dump_traceback_later()

    for r in runners:
        attempt(r, calibrate)
    for k in range(repeats):
        for r in runners if k % 2 == 0 else runners[::-1]:
            attempt(r, once)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def rate(runners: Sequence[Runner], label: str) -> float | None:
    """The median of the first row whose label starts with ``label``."""
    return next((r.median for r in runners if r.label.startswith(label)), None)


def print_table(env_id: str, runners: Sequence[Runner]) -> None:
    sync, asyn = rate(runners, "gym SyncVectorEnv"), rate(runners, "gym AsyncVectorEnv")
    header = ["contender", "startup s", "env-steps/s", "spread", "steps/rep", "vs Sync", "vs Async"]
    rows = [header]
    for r in runners:
        spread = "-" if r.spread is None else f"{r.spread:.0%}"
        rows.append([r.label, f"{r.startup:.2f}", fmt_rate(r.median), spread, f"{r.steps:,}"])
        rows[-1] += [fmt_ratio(ratio(r.median, ref)) for ref in (sync, asyn)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]

    def line(row: list[str]) -> str:
        cells = zip(row, widths, strict=True)
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(cells))

    print(f"{env_id}:")
    print(line(header))
    print("-" * len(line(header)))
    for row in rows[1:]:
        print(line(row))


def print_targets(results: dict[str, list[Runner]]) -> None:
    acrobot, cartpole = results.get("Acrobot-v1", []), results.get("CartPole-v1", [])
    subproc = rate(acrobot, "expcli subproc")  # the first subproc row: default num_cpus
    rated = [r for r in cartpole if r.role == "expcli" and r.median is not None]
    best = max(rated, key=lambda r: r.median or 0.0) if rated else None
    targets = [  # (text, expcli's median, reference row, threshold)
        ("Acrobot: expcli subproc >= 1.5x SyncVectorEnv", subproc, "gym Sync", 1.5),
        ("Acrobot: expcli subproc >= 4x AsyncVectorEnv", subproc, "gym Async", 4.0),
        (
            "CartPole: best expcli mode >= SyncVectorEnv",
            best.median if best else None,
            "gym Sync",
            1.0,
        ),
    ]
    print("targets (ratios of medians):")
    width = max(len(t[0]) for t in targets)
    for text, value, ref, threshold in targets:
        env_rows = acrobot if text.startswith("Acrobot") else cartpole
        measured = ratio(value, rate(env_rows, ref))
        verdict = "N/A " if measured is None else "PASS" if measured >= threshold else "FAIL"
        best_label = f"best: {best.label}" if best else "no expcli row"
        comment = "default num_cpus" if "subproc" in text else best_label
        print(f"  {verdict}  {text:<{width}}  measured {fmt_ratio(measured):>6}  ({comment})")


def child_processes() -> list[str]:
    """Live (non-zombie) child processes of this one, as 'pid command' (Linux only)."""
    me, found = str(os.getpid()), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid = stat.read_text().rpartition(")")[2].split()[:2]
            if ppid == me and state != "Z":
                cmd = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                found.append(f"{stat.parent.name} {cmd.strip()[:80]}")
        except OSError:
            continue
    return found


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", type=int, default=16, help="envs per contender (default 16)")
    p.add_argument("--env", action="append", help=f"env id, repeatable (default {ENV_IDS})")
    p.add_argument("--seconds", type=float, help="per measurement (default 1.5; quick 0.3)")
    p.add_argument("--repeats", type=int, help="repeats per contender (default 5; quick 3)")
    p.add_argument("--quick", action="store_true", help="short measurements, fewer repeats")
    p.add_argument("--no-ray", action="store_true", help="skip the ray modes")
    args = p.parse_args(argv)
    args.env = args.env or list(ENV_IDS)
    args.seconds = args.seconds or (0.3 if args.quick else 1.5)
    args.repeats = args.repeats or (3 if args.quick else 5)
    if args.envs < 1 or args.repeats < 1 or args.seconds <= 0:
        p.error("--envs, --repeats and --seconds must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    libs = ("expcli", "gymnasium", "numpy", "tianshou", "torch", "ray", "envpool")
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    cores = f"{os.cpu_count()} cores (nproc {len(os.sched_getaffinity(0))}), {platform.machine()}"
    print(f"machine: {cores}; {load_average()}; python {platform.python_version()}; {now}")
    print(", ".join(f"{d} {version(d)}" for d in libs))
    print(
        f"{args.envs} envs; medians of {args.repeats} repeats of ~{args.seconds:g} s; "
        "expcli asynchronous='restart'; gym's default autoreset"
    )
    spec_list: list[Spec] = []
    missing: set[str | None] = set()
    for s in specs(with_ray=not args.no_ray):
        try:  # import now, so that no startup pays for importing torch (tianshou) or ray
            if s.needs is not None:
                importlib.import_module(s.needs)
        except ImportError:
            if s.needs not in missing:
                print(f"not installed: {str(s.needs).split('.')[0]}")
            missing.add(s.needs)
            continue
        spec_list.append(s)
    notes: list[str] = []
    results: dict[str, list[Runner]] = {}
    for env_id in args.env:
        print(f"{env_id}: building {len(spec_list)} contenders", flush=True)
        runners = results[env_id] = []
        try:
            build_runners(spec_list, env_id, args.envs, runners, notes)
            print(f"{env_id}: measuring", flush=True)
            measure(runners, args.seconds, args.repeats, notes, env_id)
        finally:
            for r in runners:
                try:
                    r.close()
                except Exception as exc:  # close the others regardless
                    notes.append(f"close failed: {r.label} on {env_id} ({exc!r})")
            if ray_running():
                sys.modules["ray"].shutdown()
    print()
    for env_id, runners in results.items():
        print_table(env_id, runners)
        print()
    for note in notes:
        print(f"  note - {note}")
    print("  note - startup = construction + first reset; spread = (max - min) / median")
    print(f"  note - {load_average()} at the end; total {time.perf_counter() - started:.0f} s")
    time.sleep(0.5)  # let closed workers exit
    left = [p for p in child_processes() if "resource_tracker" not in p]  # exits with us
    print(f"  note - child processes left: {', '.join(left) if left else 'none'}")
    print()
    print_targets(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
