"""``ReplayDataset`` under torch's ``DataLoader``, its two forms, for ``benchmarks/sampling.py``.

* batch sampler (the fast path): ``DataLoader(data, sampler=data.sampler, batch_size=None)``,
  each item a whole batch gathered at once (``ReplayBuffer.batch``), no collate;
* map-style: ``DataLoader(data, batch_size=256, shuffle=True)``, torch's own sampler and the
  default collate: the dataset's ``__getitems__`` gathers the batch's indexes at once and
  cuts it into 256 transitions, which the collate stacks again.

Both over the benchmark's data as an ``.npz`` (mapped), batches of 256, with 0 and 2
workers (persistent, started before timing). Small vectors, so the per-transition cost of the
map-style form shows at its largest. Batches per second, medians of round-robin repeats; the
ratio is the map-style rate over the batch sampler's.
"""

from __future__ import annotations

import gc
import itertools
import statistics
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader

BATCH = 256
WORKERS = (0, 2)


def _loaders(path: Path, workers: int) -> dict[str, DataLoader]:  # type: ignore[type-arg]
    from expcli import ReplayDataset

    persistent = workers > 0
    batches = ReplayDataset(path, BATCH, replacement=True, num_batches=10**6, seed=0)
    transitions = ReplayDataset(path)
    return {
        "batch sampler": DataLoader(
            batches,
            sampler=batches.sampler,
            batch_size=None,
            num_workers=workers,
            persistent_workers=persistent,
        ),
        "map-style, shuffle=True": DataLoader(
            transitions,
            batch_size=BATCH,
            shuffle=True,
            num_workers=workers,
            persistent_workers=persistent,
        ),
    }


def _rate(loader: DataLoader, count: int) -> float:  # type: ignore[type-arg]
    """Batches per second over ``count`` batches of a fresh epoch (a few first ones skipped)."""
    batches = iter(loader)
    for _ in itertools.islice(batches, 3):  # the workers' first batches: files opened
        pass
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in itertools.islice(batches, count):
            pass
        return count / (time.perf_counter() - start)
    finally:
        gc.enable()


def loader_table(path: Path, repeats: int, budget: float) -> list[tuple[str, float, bool]]:
    """Print both forms' rates and their ratio; return the verdicts."""
    print(f"\nDataLoader over ReplayDataset: batches of {BATCH} from {path.name} (mapped)")
    print(
        f"{'workers':>7} {'form':<26} {'batches/s':>10} {'transitions/s':>14} {'spread':>7} "
        f"{'vs batch sampler':>17}"
    )
    verdicts = []
    torch.set_num_threads(1)
    for workers in WORKERS:
        loaders = _loaders(path, workers)
        counts = {
            form: max(20, int(budget * _rate(loader, 10))) for form, loader in loaders.items()
        }
        rates: dict[str, list[float]] = {form: [] for form in loaders}
        for _ in range(repeats):
            for form, loader in loaders.items():
                rates[form].append(_rate(loader, counts[form]))
        fast = statistics.median(rates["batch sampler"])
        for form, runs in rates.items():
            rate = statistics.median(runs)
            spread = (max(runs) - min(runs)) / rate
            print(
                f"{workers:>7} {form:<26} {rate:>10,.0f} {rate * BATCH:>14,.0f} {spread:>7.0%} "
                f"{rate / fast:>16.2f}x"
            )
        slow = statistics.median(rates["map-style, shuffle=True"]) / fast
        text = f"DataLoader, {workers} workers: the batch sampler >= the map-style form"
        verdicts.append((text, slow, slow <= 1))
        del loaders  # persistent workers end here
    return verdicts
