"""Hostile values for the structure-aware mutations: JSON metadata, spaces, shapes, cells.

Each list holds what a hostile or damaged file can declare where a reader trusts a value:
sizes that do not fit in memory, numbers too large for a float, nesting too deep for a
recursive parser, text that is not valid UTF-8, and values of the wrong type.
"""

from __future__ import annotations

import random
from typing import Any

HUGE_SHAPE = [100_000, 100_000, 100_000]

SPACES: list[Any] = [
    {"type": "Box", "low": -1.0, "high": 1.0, "shape": HUGE_SHAPE, "dtype": "float32"},
    {"type": "Box", "low": [0.0], "high": [1.0], "shape": [3], "dtype": "float32"},
    {"type": "Box", "low": "x", "high": None, "shape": [4], "dtype": "float3"},
    {"type": "Box", "low": 0, "high": 1, "shape": [-4], "dtype": "object"},
    {"type": "Box", "low": 0, "high": 1, "shape": [4], "dtype": "complex128"},
    {"type": "Discrete", "n": 10**400},
    {"type": "Discrete", "n": -3, "start": 10**30},
    {"type": "Discrete", "n": "2"},
    {"type": "MultiBinary", "n": [20_000, 20_000]},
    {"type": "MultiBinary", "n": -1},
    {"type": "MultiDiscrete", "nvec": [10**400, 2]},
    {"type": "MultiDiscrete", "nvec": [[2, 3], [4]]},
    {"type": "Dict", "spaces": {"a": {"type": "Discrete", "n": 2}}},
    {"type": "Box"},
    {"type": 7},
    [],
    "Box(4,)",
]

NUMBERS: list[Any] = [
    10**400,
    -(10**400),
    2**63,
    2**64 + 1,
    -1,
    -(2**31),
    0,
    1e308,
    float("inf"),
    float("nan"),
    True,
    None,
    "12",
    [1, 2],
    {"n": 1},
]

TEXTS: list[Any] = [
    "\udcff\udcfe bad utf-8",
    "\x1b[31mred\x1b[0m \x00 nul",
    "[bold]markup[/bold] [link=file:///]x[/link]",
    "x" * 200_000,
    "\u202e right-to-left",
    "",
]

SHAPES: list[Any] = [
    HUGE_SHAPE,
    [-1],
    [2**62, 2**62],
    [0],
    [],
    [1.5],
    ["4"],
    [10**400],
    None,
]


def deep_json(depth: int) -> str:
    """A JSON list nested ``depth`` deep."""
    return "[" * depth + "]" * depth


def hostile_value(rng: random.Random) -> Any:
    """Any of the hostile values above, or a deeply nested list."""
    pool = rng.choice([SPACES, NUMBERS, TEXTS, SHAPES, "deep"])
    if pool == "deep":
        nested: Any = []
        for _ in range(rng.choice([50, 900, 5000])):
            nested = [nested]
        return nested
    return rng.choice(pool)


# Metadata keys that the readers and the summary act upon, and what may stand there.
KEY_VALUES: dict[str, list[Any]] = {
    "observation_space": SPACES,
    "action_space": SPACES,
    "memory_size": NUMBERS,
    "num_envs": NUMBERS,
    "memory_index": NUMBERS,
    "env_index": NUMBERS,
    "filled": NUMBERS,
    "rows": NUMBERS,
    "schema": ["expcli/2", None, 3, "\udcff"],
    "env_id": TEXTS + NUMBERS,
    "layout": ["d4rl", "minari", "tianshou", "skrl", 5, None, "\udcff"],
    "d4rl": [[1, 2], "x", 3, {"missing": 5}, {"missing": ["terminals", "timeouts"]}, None],
    "minari": [[1], "x", {"total_steps": 10**400, "total_episodes": "3"}],
    "tianshou": [[1], {"derived": "next_observations"}, {"derived": [["x"]]}],
    "skrl": [[1], "x", {"unwritten_transitions": -5}],
    "collector": [{"steps": 10**400}, {"steps": -1}, "x", [1]],
    "seams_marked_truncated": [[10**400], [-1], ["x"], list(range(10_000)), "x"],
    "tensors": [
        {"observations": {"dtype": "float32", "shape": HUGE_SHAPE}},
        {"observations": {"dtype": "object", "shape": [4]}},
        {"observations": {"dtype": "float32", "shape": [-4]}},
        [],
        "x",
    ],
    "created": NUMBERS + TEXTS,
}


def mutate_json(obj: Any, rng: random.Random) -> Any:
    """A metadata object with one hostile change: a known key set to a value from its list,
    a random node replaced, or the whole object replaced."""
    choice = rng.random()
    if isinstance(obj, dict) and choice < 0.6:
        key = rng.choice(sorted(KEY_VALUES))
        obj = dict(obj)
        obj[key] = rng.choice(KEY_VALUES[key]) if rng.random() < 0.8 else hostile_value(rng)
        return obj
    if choice < 0.95:
        return _replace_node(obj, rng)
    return hostile_value(rng)


def _replace_node(obj: Any, rng: random.Random) -> Any:
    """``obj`` with one node, found by a random walk, replaced by a hostile value."""
    if isinstance(obj, dict) and obj and rng.random() < 0.8:
        key = rng.choice(sorted(obj))
        return {**obj, key: _replace_node(obj[key], rng)}
    if isinstance(obj, list) and obj and rng.random() < 0.8:
        index = rng.randrange(len(obj))
        return [*obj[:index], _replace_node(obj[index], rng), *obj[index + 1 :]]
    return hostile_value(rng)


CELLS = [
    "1e400",
    "-1e400",
    "nan:0xzz",
    "nan:0x7ff8000000000001",
    "nan:0x" + "f" * 40,
    "True",
    "",
    " ",
    "0x10",
    "1_000",
    "\u0661\u0662",
    '"1,2"',
    "9" * 5000,
    "\x00",
    "inf",
    "-0",
    "\udcff",
]
