"""Reference statistics computed the plain way: numpy on whole arrays of the valid rows.

Written independently of ``expcli.summary``: valid rows come from the layouts' own
``column_rows`` (built on ``chronological_rows`` and the fill counts), episodes from a
Python loop over each column's rows in order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from expcli.formats import Dataset
from expcli.formats.layouts._episodes import column_rows, episode_bounds


def valid_values(dataset: Dataset, name: str) -> np.ndarray:
    """Every valid value of a tensor, as one flat array."""
    array = np.asarray(dataset.tensors[name])
    parts = [array[rows, j].reshape(-1) for j, rows in enumerate(column_rows(dataset))]
    return np.concatenate(parts) if parts else array.reshape(-1)[:0]


def tensor_reference(dataset: Dataset, name: str) -> dict[str, Any]:
    values = valid_values(dataset, name)
    wide = values.astype(np.float64)
    finite = values[np.isfinite(wide)] if values.dtype.kind == "f" else values
    out: dict[str, Any] = {
        "count": values.size,
        "nan": int(np.isnan(wide).sum()),
        "inf": int(np.isinf(wide).sum()),
    }
    if finite.size:
        out.update(
            min=finite.min().item(),
            max=finite.max().item(),
            mean=float(np.mean(finite.astype(np.float64))),
            std=float(np.std(finite.astype(np.float64))),
        )
    else:
        out.update(min=None, max=None, mean=None, std=None)
    return out


def episode_reference(
    dataset: Dataset, *, wrapped: bool, seams: frozenset[tuple[int, int]] = frozenset()
) -> dict[str, Any]:
    """Counts, returns and lengths of complete episodes, column by column, in Python."""
    tensors = {k: np.asarray(v) for k, v in dataset.tensors.items()}
    size, envs = dataset.memory_size, dataset.num_envs
    flat = {
        k: tensors[k].reshape(size, envs, -1)
        for k in ("terminated", "truncated", "rewards")
        if k in tensors
    }
    term = flat["terminated"].any(axis=2) if "terminated" in flat else np.zeros((size, envs), bool)
    trunc = flat["truncated"].any(axis=2) if "truncated" in flat else np.zeros((size, envs), bool)
    rewards = flat["rewards"].astype(np.float64).sum(axis=2) if "rewards" in flat else None
    out: dict[str, Any] = {"complete": 0, "incomplete": 0, "terminated": 0, "truncated": 0}
    returns, lengths = [], []
    for j, rows in enumerate(column_rows(dataset)):
        done = term[rows, j] | trunc[rows, j]
        for k, (start, stop) in enumerate(episode_bounds(done)):
            last = int(rows[stop - 1])
            ended = bool(done[stop - 1])
            cut = (last, j) in seams
            if (k == 0 and wrapped) or not ended or cut:
                out["incomplete"] += 1
                continue
            out["complete"] += 1
            out["terminated" if term[last, j] else "truncated"] += 1
            lengths.append(stop - start)
            if rewards is not None:
                returns.append(float(np.sum(rewards[rows[start:stop], j])))
    out["returns"] = np.asarray(returns, dtype=np.float64)
    out["lengths"] = np.asarray(lengths, dtype=np.float64)
    return out


def assert_close(actual: Any, expected: Any, *, rtol: float = 1e-9, atol: float = 0.0) -> None:
    if expected is None:
        assert actual is None
        return
    assert actual is not None
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def check_summary(
    summary: Any, dataset: Dataset, *, wrapped: bool, seams: Any = frozenset()
) -> None:
    """Every number of a summary's JSON against the references."""
    data = summary.to_json()
    assert data["transitions"] == len(dataset)
    assert data["memory_size"] == dataset.memory_size and data["num_envs"] == dataset.num_envs
    assert [t["name"] for t in data["tensors"]] == sorted(dataset.tensors)
    for entry in data["tensors"]:
        want = tensor_reference(dataset, entry["name"])
        assert entry["count"] == want["count"], entry["name"]
        assert (entry["nan"], entry["inf"]) == (want["nan"], want["inf"]), entry["name"]
        for key in ("min", "max"):
            assert entry[key] == want[key], (entry["name"], key)
        for key in ("mean", "std"):
            assert_close(entry[key], want[key], atol=1e-300)
    if "terminated" not in dataset.tensors and "truncated" not in dataset.tensors:
        assert data["episodes"] is None
        return
    ref = episode_reference(dataset, wrapped=wrapped, seams=frozenset(seams))
    episodes = data["episodes"]
    for key in ("complete", "incomplete", "terminated", "truncated"):
        assert episodes[key] == ref[key], key
    for key, values in (("return", ref["returns"]), ("length", ref["lengths"])):
        got = episodes[key]
        if values.size == 0:
            assert set(got.values()) == {None}
            continue
        for stat, fn in (
            ("mean", np.mean),
            ("std", np.std),
            ("median", np.median),
            ("min", np.min),
            ("max", np.max),
        ):
            assert_close(got[stat], float(fn(values)), atol=1e-12)
