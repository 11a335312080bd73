"""The engine table: one row per ``--mode`` engine, and no module compares a mode's spelling."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from expcli.collect.engines import ENGINES, CollectMode, mode_list
from expcli.collect.env_modes import candidate_modes
from expcli.collect.settings import CollectSettings
from expcli.errors import ConfigError

ROOT = Path(__file__).parents[2] / "expcli"
# The modules that vary by engine read the table; only the table names the spellings.
READERS = [
    *sorted((ROOT / "collect").rglob("*.py")),
    ROOT / "cli" / "collect_cmd.py",
    ROOT / "cli" / "_collect_view.py",
]


def test_every_mode_but_auto_has_one_row_under_its_spelling() -> None:
    assert [m for m in CollectMode if m not in ENGINES] == [CollectMode.AUTO]
    assert all(engine.mode == mode.value for mode, engine in ENGINES.items())
    assert mode_list() == "auto, dummy, subproc, ray, ray-subproc, vector or envpool"


@pytest.mark.parametrize("path", READERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_compares_a_mode_spelling(path: Path) -> None:
    if path.name in ("engines.py", "envs_cmd.py"):
        return
    spellings = {m.value for m in CollectMode}
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Set, ast.Tuple, ast.List)) and any(
            isinstance(n, ast.Constant) and n.value in spellings for n in node.elts
        ):
            found.append(f"{path.name}:{node.lineno}")  # a set of modes named by spelling
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                names = side.elts if isinstance(side, (ast.Tuple, ast.Set, ast.List)) else [side]
                found += [
                    f"{path.name}:{node.lineno}"
                    for n in names
                    if isinstance(n, ast.Constant) and n.value in spellings
                ]
    assert not found, found


def test_validation_reads_each_row() -> None:
    """A row's refusals are what settings validation says, before any env is built."""
    wrapped = CollectSettings("CartPole-v1", mode=CollectMode.ENVPOOL, wrappers=["m:w"])
    with pytest.raises(ConfigError, match="--mode envpool cannot apply --wrapper"):
        wrapped.validate()
    from_file: dict[str, Any] = {"mode": "vector", "asynchronous": "IDLE"}  # as in a TOML file
    idle = CollectSettings("CartPole-v1", **from_file)
    with pytest.raises(ConfigError, match="it takes --async restart only"):
        idle.validate()
    forced = CollectSettings("CartPole-v1", mode=CollectMode.DUMMY, force_mode=True)
    with pytest.raises(ConfigError, match="--force-mode applies to --mode vector only"):
        forced.validate()
    ray = CollectSettings("CartPole-v1", mode="ray").validate()
    assert ray.mode is CollectMode.RAY and ray.asynchronous == "restart"


def test_auto_ranks_candidates_from_the_rows() -> None:
    modes = candidate_modes("CartPole-v1", 1, "restart")
    assert modes[:2] == [CollectMode.VECTOR, CollectMode.DUMMY]
    assert CollectMode.VECTOR not in candidate_modes("CartPole-v1", 1, "idle")
    assert not {CollectMode.RAY, CollectMode.RAY_SUBPROC} & set(modes)
