"""Benchmark circular-memory fill and sample speed: expcli against skrl, tianshou and torchrl.

What it measures
    A memory of ``--transitions`` transitions (default 1,000,000 = 62,500 rows x 16 envs) holding
    five tensors per transition -- observations (4, float32), actions (1, int64), rewards
    (1, float32), terminated (1, bool), truncated (1, bool) -- is

    * filled step by step, one call per step with the 16 envs' rows (transitions/s), then
    * sampled in batches of ``--batch-size`` (default 256) of all five tensors (batches/s),
      with replacement and without.

    Contenders, all in this one process and on the same pre-generated data:

    * a bare preallocated-numpy bound (the fastest a Python loop can go),
    * expcli's ``RandomMemory`` fed numpy rows, and again fed torch tensors,
    * skrl's ``RandomMemory`` (torch-fed; ``replacement=True`` / ``replacement=False``),
    * tianshou's ``VectorReplayBuffer`` (numpy-fed; samples with replacement only),
    * torchrl's ``TensorDictReplayBuffer`` over a ``LazyTensorStorage`` (torch-fed; default
      ``RandomSampler``, and ``SamplerWithoutReplacement``).

    Libraries that are not installed are reported and skipped.

How it times
    Each step's input is ``array[t]`` (a view) for every tensor, so the harness's indexing cost is
    the same for every contender. Memories are built outside the timed region, on a fresh memory
    per repeat, and the first 64 steps are an untimed warm-up. Fills are timed over the whole
    memory for the bound and expcli; for the (slow) peers over a prefix that fits a time budget,
    the rest of the memory being filled untimed before sampling. The number of sampled batches is
    calibrated to a time budget (at least 20). Every figure is the median of ``--repeats`` runs
    (default: 3 for fills, 5 for sampling), and the repeats are interleaved round-robin across the
    contenders, so that other load on the machine hits all of them alike; the spread of the
    repeats and the load average are printed. The garbage collector is paused inside timed loops
    (as ``timeit`` does); torch keeps its default thread count.

Run it
    python benchmarks/memory.py                 # 1,000,000 transitions, ~1.5 min on 2 cores
    python benchmarks/memory.py --quick         # 100,000 transitions, fast check
    python benchmarks/memory.py --transitions 500000 --repeats 3 --batch-size 512
"""

from __future__ import annotations

import argparse
import datetime
import gc
import logging
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
import torch
from _report import fmt_rate, fmt_ratio, load_average, ratio, version

# Benchmark the checkout this script lives in, not some installed copy.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NUM_ENVS = 16
MIN_BATCHES = 20
WARMUP_STEPS = 64
WARMUP_BATCHES = 20

Step = Callable[[int], object]
"""One timed unit of work: add step ``t`` of the data, or draw one batch (argument ignored)."""


@dataclass(frozen=True)
class Field:
    name: str
    size: int
    np_dtype: type
    torch_dtype: torch.dtype


FIELDS = (
    Field("observations", 4, np.float32, torch.float32),
    Field("actions", 1, np.int64, torch.int64),
    Field("rewards", 1, np.float32, torch.float32),
    Field("terminated", 1, np.bool_, torch.bool),
    Field("truncated", 1, np.bool_, torch.bool),
)
NAMES = [f.name for f in FIELDS]


@dataclass(frozen=True)
class Config:
    memory_size: int  # rows; transitions = memory_size * NUM_ENVS
    batch_size: int
    fill_repeats: int
    sample_repeats: int
    peer_fill_budget_s: float  # per repeat, for contenders that are not timed over the full fill
    sample_budget_s: float  # per repeat

    @property
    def transitions(self) -> int:
        return self.memory_size * NUM_ENVS


@dataclass(frozen=True)
class Data:
    """Pre-generated inputs shaped (steps, NUM_ENVS, size); the torch tensors share their memory."""

    numpy: dict[str, np.ndarray]
    torch: dict[str, torch.Tensor]

    @property
    def steps(self) -> int:
        return len(self.numpy["observations"])


def make_data(steps: int, seed: int = 0) -> Data:
    rng = np.random.default_rng(seed)
    shape = (steps, NUM_ENVS)
    arrays: dict[str, np.ndarray] = {
        "observations": rng.standard_normal((*shape, 4), dtype=np.float32),
        "actions": rng.integers(0, 4, (*shape, 1), dtype=np.int64),
        "rewards": rng.standard_normal((*shape, 1), dtype=np.float32),
        "terminated": rng.random((*shape, 1)) < 0.01,
        "truncated": rng.random((*shape, 1)) < 0.001,
    }
    return Data(numpy=arrays, torch={k: torch.from_numpy(v) for k, v in arrays.items()})


# --------------------------------------------------------------------------------------------
# Timing (the one helper every measurement goes through)
# --------------------------------------------------------------------------------------------


def time_loop(fn: Step, start: int, stop: int) -> float:
    """Seconds taken by ``fn(i)`` for i in [start, stop), with the garbage collector paused."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for i in range(start, stop):
            fn(i)
        return time.perf_counter() - t0
    finally:
        if gc_was_enabled:
            gc.enable()


# --------------------------------------------------------------------------------------------
# Contenders
# --------------------------------------------------------------------------------------------


@dataclass
class Contender:
    """How to drive one memory implementation; the harness does the rest.

    new(replacement) builds an empty memory; stepper(memory) returns step(t) adding data step t;
    drawer(memory, replacement) returns draw(_) sampling one batch.
    """

    label: str
    role: str  # "bound" | "expcli" | "peer"
    new: Callable[[bool], Any]
    stepper: Callable[[Any], Step]
    drawer: Callable[[Any, bool], Step]
    modes: tuple[bool, ...] = (True, False)  # sampling modes supported (replacement flags)
    full_fill: bool = True  # time the whole fill; otherwise a prefix that fits the budget
    # False: replacement is fixed at construction, so each sampling mode needs its own memory.
    replacement_at_draw: bool = False
    # Optional bulk filler for the untimed rest of a memory: fill_rest(memory, first_step).
    fill_rest: Callable[[Any, int], None] | None = None
    notes: list[str] = field(default_factory=list)


class NumpyBound:
    """Preallocated numpy arrays (memory_size, NUM_ENVS, size) plus circular index bookkeeping."""

    def __init__(self, memory_size: int, seed: int = 1) -> None:
        self.memory_size = memory_size
        # np.full writes every page now, so the fill never pays first-touch page faults.
        self.arrays: list[np.ndarray] = [
            np.full((memory_size, NUM_ENVS, f.size), 0, dtype=f.np_dtype) for f in FIELDS
        ]
        self.flat = [a.reshape(memory_size * NUM_ENVS, -1) for a in self.arrays]
        self.memory_index = 0
        self.filled = False
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.memory_size * NUM_ENVS if self.filled else self.memory_index * NUM_ENVS


def bound_stepper(data: Data) -> Callable[[NumpyBound], Step]:
    inputs = [data.numpy[n] for n in NAMES]

    def stepper(mem: NumpyBound) -> Step:
        o, a, r, te, tr = mem.arrays
        io, ia, ir, ite, itr = inputs
        size = mem.memory_size
        index = 0

        def step(t: int) -> None:
            nonlocal index
            o[index] = io[t]
            a[index] = ia[t]
            r[index] = ir[t]
            te[index] = ite[t]
            tr[index] = itr[t]
            index += 1
            if index >= size:
                index = 0
                mem.filled = True
            mem.memory_index = index

        return step

    return stepper


def bound_drawer(batch_size: int) -> Callable[[NumpyBound, bool], Step]:
    def drawer(mem: NumpyBound, replacement: bool) -> Step:
        flat, rng, n = mem.flat, mem.rng, len(mem)
        draw_indexes: Callable[[], Any] = (
            partial(rng.integers, 0, n, batch_size)
            if replacement
            else partial(rng.choice, n, batch_size, replace=False)
        )

        def draw(_: int) -> list[np.ndarray]:
            idx = draw_indexes()
            return [np.take(x, idx, axis=0) for x in flat]

        return draw

    return drawer


def skrl_api_contender(
    label: str, role: str, cls: type, cfg: Config, inputs: dict[str, Any], full_fill: bool
) -> Contender:
    """A memory with skrl's API (skrl itself or expcli), fed ``inputs``."""

    def new(replacement: bool) -> Any:
        mem = cls(
            memory_size=cfg.memory_size, num_envs=NUM_ENVS, device="cpu", replacement=replacement
        )
        for f in FIELDS:
            mem.create_tensor(f.name, size=f.size, dtype=f.torch_dtype)
        return mem

    o, a, r, te, tr = (inputs[n] for n in NAMES)

    def stepper(mem: Any) -> Step:
        add = mem.add_samples
        return lambda t: add(
            observations=o[t], actions=a[t], rewards=r[t], terminated=te[t], truncated=tr[t]
        )

    def drawer(mem: Any, replacement: bool) -> Step:
        sample, bs = mem.sample, cfg.batch_size
        return lambda _: sample(NAMES, batch_size=bs)

    return Contender(label, role, new, stepper, drawer, full_fill=full_fill)


def tianshou_contender(cfg: Config, data: Data) -> Contender:
    from tianshou.data import Batch, VectorReplayBuffer

    # tianshou keeps scalars per env as shape (num_envs,): feed it (steps, num_envs) views.
    o, a, r, te, tr = (
        data.numpy[n] if n == "observations" else data.numpy[n][..., 0] for n in NAMES
    )

    def new(replacement: bool) -> Any:
        return VectorReplayBuffer(cfg.transitions, buffer_num=NUM_ENVS)

    def stepper(buf: Any) -> Step:
        add = buf.add
        return lambda t: add(Batch(obs=o[t], act=a[t], rew=r[t], terminated=te[t], truncated=tr[t]))

    def drawer(buf: Any, replacement: bool) -> Step:
        sample, bs = buf.sample, cfg.batch_size
        return lambda _: sample(bs)

    notes = [
        "tianshou: numpy-fed Batch(obs, act, rew, terminated, truncated), no obs_next; it also "
        "stores done and keeps rewards as float64; no without-replacement sampler"
    ]
    return Contender(
        "tianshou VectorReplayBuffer (numpy)",
        "peer",
        new,
        stepper,
        drawer,
        modes=(True,),  # VectorReplayBuffer.sample always draws with replacement
        full_fill=False,
        notes=notes,
    )


def torchrl_contender(cfg: Config, data: Data) -> Contender:
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
    from torchrl.data.replay_buffers import RandomSampler, SamplerWithoutReplacement

    logging.getLogger("torchrl").setLevel(logging.WARNING)
    o, a, r, te, tr = (data.torch[n] for n in NAMES)

    def new(replacement: bool) -> Any:
        return TensorDictReplayBuffer(
            storage=LazyTensorStorage(cfg.transitions),
            sampler=RandomSampler() if replacement else SamplerWithoutReplacement(),
            batch_size=cfg.batch_size,
        )

    def stepper(rb: Any) -> Step:
        extend = rb.extend
        batch = [NUM_ENVS]
        return lambda t: extend(
            TensorDict(
                {
                    "observations": o[t],
                    "actions": a[t],
                    "rewards": r[t],
                    "terminated": te[t],
                    "truncated": tr[t],
                },
                batch_size=batch,
            )
        )

    def fill_rest(rb: Any, first_step: int) -> None:
        rows = {n: data.torch[n][first_step:].reshape(-1, data.torch[n].shape[-1]) for n in NAMES}
        rb.extend(TensorDict(rows, batch_size=[len(rows["observations"])]))

    def drawer(rb: Any, replacement: bool) -> Step:
        sample = rb.sample
        return lambda _: sample()

    notes = [
        "torchrl: torch-fed, one TensorDict of 16 rows per extend; without replacement = "
        "SamplerWithoutReplacement (walks one permutation across batches, so its cost is amortised)"
    ]
    return Contender(
        "torchrl TensorDictReplayBuffer (torch)",
        "peer",
        new,
        stepper,
        drawer,
        full_fill=False,
        fill_rest=fill_rest,
        notes=notes,
    )


def build_contenders(cfg: Config, data: Data) -> list[Contender]:
    contenders = [
        Contender(
            "bound: preallocated numpy",
            "bound",
            lambda replacement: NumpyBound(cfg.memory_size),
            bound_stepper(data),
            bound_drawer(cfg.batch_size),
            replacement_at_draw=True,
            notes=["bound: numpy-fed; w/o replacement = Generator.choice(replace=False)"],
        )
    ]
    from expcli import RandomMemory

    for feed, inputs in (("numpy", data.numpy), ("torch", data.torch)):
        contenders.append(
            skrl_api_contender(
                f"expcli RandomMemory ({feed}-fed)", "expcli", RandomMemory, cfg, inputs, True
            )
        )
    try:
        from skrl.memories.torch import RandomMemory as SkrlRandomMemory

        skrl = skrl_api_contender(
            "skrl RandomMemory (torch)", "peer", SkrlRandomMemory, cfg, data.torch, False
        )
        skrl.notes.append("skrl: torch-fed; w/o replacement draws a full randperm per batch")
        contenders.append(skrl)
    except ImportError:
        print("not installed: skrl")
    for module, factory in (("tianshou", tianshou_contender), ("torchrl", torchrl_contender)):
        try:
            contenders.append(factory(cfg, data))
        except ImportError as exc:
            print(f"not installed: {module} ({exc})")
    return contenders


# --------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------


Metric = str | bool  # "fill", or the replacement flag of a sampling mode
METRICS: tuple[Metric, ...] = ("fill", True, False)


@dataclass
class Result:
    """Per metric: the rate of every repeat (transitions/s or batches/s) and the work timed."""

    label: str
    role: str
    runs: dict[Metric, list[float]] = field(default_factory=dict)
    work: dict[Metric, int] = field(default_factory=dict)  # steps or batches per repeat


def metric(r: Result | None, key: Metric) -> float | None:
    """Median rate, or None when the contender or the measurement is missing."""
    runs = None if r is None else r.runs.get(key)
    return statistics.median(runs) if runs else None


def spread(r: Result, key: Metric) -> float | None:
    """(max - min) / median over the repeats."""
    runs, mid = r.runs.get(key), metric(r, key)
    return (max(runs) - min(runs)) / mid if runs and mid else None


Once = Callable[[], float]
"""One repeat of one measurement, returning its rate."""


def run_round_robin(trials: Sequence[tuple[Result, Metric, Once]], repeats: int) -> None:
    """Repeat every trial, interleaving the contenders so that a change in the machine's load
    (other processes on the shared cores) hits all of them rather than whoever runs then."""
    for _ in range(repeats):
        for res, key, once in trials:
            res.runs.setdefault(key, []).append(once())


@dataclass
class FillTrial:
    """Fills a fresh memory per repeat; keeps the last one, to sample from once it is full."""

    contender: Contender
    result: Result
    cfg: Config
    steps: int
    memory: Any = None
    step: Step | None = None
    filled_to: int = 0

    def __call__(self) -> float:
        c = self.contender
        self.memory = None  # free the previous repeat's memory first
        gc.collect()
        self.memory = mem = c.new(True)
        step = c.stepper(mem)
        warm = min(WARMUP_STEPS, self.steps - 1)
        per_step = time_loop(step, 0, warm) / max(warm, 1)
        budgeted = warm + max(1, int(self.cfg.peer_fill_budget_s / per_step))
        stop = self.steps if c.full_fill else min(self.steps, budgeted)
        seconds = time_loop(step, warm, stop)
        self.result.work["fill"] = stop - warm
        self.step, self.filled_to = step, stop
        return (stop - warm) * NUM_ENVS / seconds

    def full_memory(self) -> Any:
        """The last repeat's memory, its untimed rest filled."""
        assert self.step is not None, "run the trial first"
        fill_untimed(self.contender, self.memory, self.step, self.filled_to, self.steps)
        self.filled_to = self.steps
        return self.memory


def fill_untimed(c: Contender, mem: Any, step: Step, first: int, steps: int) -> None:
    if first >= steps:
        return
    if c.fill_rest is not None:
        c.fill_rest(mem, first)
    else:
        time_loop(step, first, steps)


def filled_memory(c: Contender, replacement: bool, steps: int) -> Any:
    mem = c.new(replacement)
    fill_untimed(c, mem, c.stepper(mem), 0, steps)
    return mem


def sample_trial(draw: Step, cfg: Config) -> tuple[Once, int]:
    """A repeat of ``draw``, its batch count calibrated to the time budget; and that count."""
    per_batch = time_loop(draw, 0, WARMUP_BATCHES) / WARMUP_BATCHES
    n = max(MIN_BATCHES, int(cfg.sample_budget_s / per_batch))
    return (lambda: n / time_loop(draw, 0, n)), n


def measure(contenders: Sequence[Contender], cfg: Config, data: Data) -> list[Result]:
    results = [Result(c.label, c.role) for c in contenders]
    print("filling:", ", ".join(c.label for c in contenders), flush=True)
    fills = [FillTrial(c, r, cfg, data.steps) for c, r in zip(contenders, results, strict=True)]
    run_round_robin([(f.result, "fill", f) for f in fills], cfg.fill_repeats)

    print("preparing the memories for sampling", flush=True)
    trials: list[tuple[Result, Metric, Once]] = []
    for fill in fills:
        c, res = fill.contender, fill.result
        for replacement in c.modes:
            if replacement or c.replacement_at_draw:
                mem = fill.full_memory()
            else:
                mem = filled_memory(c, False, data.steps)
            once, res.work[replacement] = sample_trial(c.drawer(mem, replacement), cfg)
            trials.append((res, replacement, once))
    print("sampling", flush=True)
    run_round_robin(trials, cfg.sample_repeats)
    return results


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def fmt_spread(x: float | None) -> str:
    return "" if x is None else f"(spread {x:.0%})"


def find(results: Sequence[Result], prefix: str) -> Result | None:
    return next((r for r in results if r.label.startswith(prefix)), None)


def print_table(results: Sequence[Result]) -> None:
    bound, skrl = find(results, "bound"), find(results, "skrl")
    header = [
        "contender",
        "fill transitions/s",
        "vs bound",
        "vs skrl",
        "||",
        "sample w/ repl batches/s",
        "vs skrl",
        "||",
        "sample w/o repl batches/s",
        "vs skrl",
    ]
    rows = [header]
    for r in results:
        row = [r.label]
        for key in METRICS:
            references = (bound, skrl) if key == "fill" else (skrl,)
            row += [fmt_rate(metric(r, key))]
            row += [fmt_ratio(ratio(metric(r, key), metric(ref, key))) for ref in references]
            row += ["||"] if key is not False else []
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]

    def line(row: list[str]) -> str:
        cells = zip(row, widths, strict=True)
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(cells))

    print(line(header))
    print("-" * len(line(header)))
    for row in rows[1:]:
        print(line(row))


def print_timing_details(results: Sequence[Result], cfg: Config) -> None:
    print("timed per repeat, and the spread of the repeats ((max - min) / median):")
    for r in results:
        fill_steps = r.work.get("fill", 0)
        prefix = "" if fill_steps >= cfg.memory_size - WARMUP_STEPS else " (prefix, rest untimed)"
        parts = [f"fill {fill_steps:,} steps{prefix} {fmt_spread(spread(r, 'fill'))}"]
        for key, name in ((True, "w/"), (False, "w/o")):
            if key in r.runs:
                parts.append(f"{name} {r.work[key]:,} batches {fmt_spread(spread(r, key))}")
        print(f"  {r.label}: {'; '.join(parts)}")


@dataclass(frozen=True)
class Target:
    text: str
    value: float | None  # measured ratio (worst expcli row)
    threshold: float
    comment: str = ""  # shown beside the measurement (or why there is none)
    strict: bool = False  # "faster than": the ratio must exceed the threshold

    @property
    def verdict(self) -> str:
        if self.value is None:
            return "N/A "
        met = self.value > self.threshold if self.strict else self.value >= self.threshold
        return "PASS" if met else "FAIL"


def worst(values: Sequence[float | None]) -> float | None:
    """The smallest value; None when there is none or any is missing."""
    present = [v for v in values if v is not None]
    return min(present) if present and len(present) == len(values) else None


def compute_targets(results: Sequence[Result]) -> list[Target]:
    bound, skrl = find(results, "bound"), find(results, "skrl")
    expcli = [r for r in results if r.role == "expcli"]
    numpy_fed = [r for r in expcli if "numpy-fed" in r.label]
    torch_fed = [r for r in expcli if "torch-fed" in r.label]
    peers = [r for r in results if r.role == "peer" and metric(r, True) is not None]
    no_skrl = "" if skrl else "skrl not installed"

    def vs(rows: Sequence[Result], key: Metric, other: Result | None) -> float | None:
        if other is None or not rows:
            return None
        return worst([ratio(metric(r, key), metric(other, key)) for r in rows])

    best_peer = max(peers, key=lambda r: metric(r, True) or 0.0) if peers else None
    return [
        Target("numpy-fed adds >= 50% of the bound", vs(numpy_fed, "fill", bound), 0.5),
        Target("numpy-fed adds >= 4x skrl", vs(numpy_fed, "fill", skrl), 4.0, no_skrl),
        Target("torch-fed adds >= 1.3x skrl", vs(torch_fed, "fill", skrl), 1.3, no_skrl),
        Target("samples w/ replacement >= 1.3x skrl", vs(expcli, True, skrl), 1.3, no_skrl),
        Target(
            "samples w/ replacement faster than every other peer",
            vs(expcli, True, best_peer),
            1.0,
            f"fastest peer: {best_peer.label}" if best_peer else "no peer installed",
            strict=True,
        ),
        Target("samples w/o replacement >= 20x skrl", vs(expcli, False, skrl), 20.0, no_skrl),
    ]


def print_targets(results: Sequence[Result]) -> None:
    print("targets (ratio of expcli's worst row to the reference):")
    targets = compute_targets(results)
    width = max(len(t.text) for t in targets)
    for t in targets:
        measured = "n/a" if t.value is None else f"{t.value:.2f}x"
        extra = f"  ({t.comment})" if t.comment else ""
        print(f"  {t.verdict}  {t.text:<{width}}  measured {measured:>6}{extra}")


def print_environment(cfg: Config) -> None:
    libs = ", ".join(f"{d} {version(d)}" for d in ("skrl", "tianshou", "torchrl", "tensordict"))
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    cores = f"{os.cpu_count()} cores (nproc {len(os.sched_getaffinity(0))}), {platform.machine()}"
    threads = f"{torch.get_num_threads()} threads, default, not pinned"
    tensors = ", ".join(f"{f.name} {f.size} {np.dtype(f.np_dtype).name}" for f in FIELDS)
    print(f"machine: {cores}; {load_average()}; python {platform.python_version()}; {now}")
    print(f"torch {torch.__version__} ({threads}), numpy {np.__version__}; {libs}")
    print(
        f"memory: {cfg.transitions:,} transitions = {cfg.memory_size:,} rows x {NUM_ENVS} envs; "
        f"tensors {tensors}; batch {cfg.batch_size}; "
        f"medians of {cfg.fill_repeats} fills / {cfg.sample_repeats} sampling runs"
    )


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> Config:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--transitions", type=int, default=None, help="memory capacity (default 1,000,000)"
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="repeats per measurement (default: fill 3, sample 5)",
    )
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument(
        "--quick", action="store_true", help="100,000 transitions and shorter time budgets"
    )
    args = p.parse_args(argv)
    transitions = args.transitions or (100_000 if args.quick else 1_000_000)
    if transitions < NUM_ENVS * (WARMUP_STEPS + 1) or transitions % NUM_ENVS:
        p.error(
            f"--transitions must be a multiple of {NUM_ENVS} and >= {NUM_ENVS * (WARMUP_STEPS + 1)}"
        )
    if args.batch_size < 1 or args.batch_size > transitions:
        p.error("--batch-size must be in 1..transitions")
    if args.repeats is not None and args.repeats < 1:
        p.error("--repeats must be >= 1")
    return Config(
        memory_size=transitions // NUM_ENVS,
        batch_size=args.batch_size,
        fill_repeats=args.repeats or 3,
        sample_repeats=args.repeats or 5,
        peer_fill_budget_s=0.5 if args.quick else 2.0,
        sample_budget_s=0.2 if args.quick else 0.5,
    )


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    print_environment(cfg)
    data = make_data(cfg.memory_size)
    contenders = build_contenders(cfg, data)
    results = measure(contenders, cfg, data)
    print()
    print_table(results)
    print()
    print_timing_details(results, cfg)
    for c in contenders:
        for note in c.notes:
            print(f"  note - {note}")
    print(f"  note - {load_average()} at the end (the run is only as quiet as the machine)")
    print()
    print_targets(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
