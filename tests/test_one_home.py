"""Each public name in expcli is defined in one module: no second copy to keep in step.

A name defined at the top level of two modules is either a copy (merge it) or two things
sharing a name (rename one). The few names below are the same protocol met by several
modules on purpose, or a private detail of unrelated modules that happens to share a name.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import numpy as np

PACKAGE = Path(__file__).parents[1] / "expcli"

# name -> why several modules define it
ALLOWED: dict[str, str] = {
    "read": "the reader every format and layout module offers the registry",
    "write": "the writer every format and layout module offers the registry",
    "losses": "what a layout module's files do not keep, offered to the layout table",
    "open_lazy": "the lazy reader some format modules offer the registry",
    "write_to": "the stream writer of the formats written front to back",
    "write_stream": "what a stream format's object calls: its header made, then write_to",
    "write_shard": "the shard writer of the formats a sharded folder's shards may be in",
    "Factory": "a local alias of 'callable that makes an env' in each backend",
    "Batch": "a local alias in each module that hands batches out",
    "Policy": "a local alias of 'callable that picks actions'",
    "Progress": "a local alias of each module's progress callback",
    "PROGRESS_MIN_BYTES": "convert and inspect show a bar from different sizes",
    "Chunk": "a CSV read chunk and a chronology chunk: private to their modules",
    "FANOUT": "the sum tree and its compiled kernel share the constant",
    "FANOUT_BITS": "the sum tree and its compiled kernel share the constant",
    "user_metadata": "sharded folders and foreign layouts keep different user metadata",
}


def _top_level_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def test_every_public_name_has_one_home() -> None:
    homes: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in _top_level_names(path):
            homes[name].append(str(path.relative_to(PACKAGE)))
    twice = {n: h for n, h in homes.items() if len(h) > 1 and n not in ALLOWED}
    assert not twice, "\n".join(f"{n}: {', '.join(h)}" for n, h in sorted(twice.items()))


def test_collect_and_inspect_describe_episodes_with_one_type() -> None:
    """A collect's episode summary is the ``Distribution`` that inspect reports, median too."""
    from expcli.collect.episode_stats import EpisodeTracker
    from expcli.summary import Distribution

    rewards = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]])
    ends = np.array([[False], [True], [False], [False], [True]])
    tracker = EpisodeTracker(1)
    tracker.update(rewards, ends, np.zeros_like(ends))
    summary = tracker.summary()
    assert isinstance(summary.returns, Distribution)
    assert summary.returns == Distribution.of(np.array([3.0, 28.0]))
    assert summary.lengths.median == float(np.median([2.0, 3.0]))


def test_done_flags_of_any_dtype_by_hand() -> None:
    """``terminated | truncated`` from flags stored as bool, bytes or floats."""
    from expcli.spec import done_flags

    rng = np.random.default_rng(0)
    terminated = rng.random((6, 3, 1)) < 0.3
    truncated = rng.random((6, 3, 1)) < 0.3
    expected = (terminated | truncated)[..., 0]
    for dtype in (bool, np.uint8, np.float32):
        tensors = {"terminated": terminated.astype(dtype), "truncated": truncated.astype(dtype)}
        assert np.array_equal(done_flags(tensors, 6, 3), expected)
    assert not done_flags({}, 6, 3).any()
