"""The env catalog: filtering, spaces read from made envs, missing extras, failures."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from expcli.envs.catalog import EnvEntry, describe_space, list_envs
from expcli.envs.env_ids import similar_ids
from expcli.errors import ConfigError

CLOSED: list[str] = []


class Noisy(gym.Env[np.ndarray, np.int64]):
    """Warns and prints while made, and records that it was closed."""

    def __init__(self) -> None:
        import warnings

        warnings.warn("a gymnasium-style warning", UserWarning, stacklevel=1)
        print("printed while made")
        self.observation_space = spaces.Dict(
            {"pos": spaces.Box(-1.0, 1.0, (2,), np.float32), "id": spaces.Discrete(3)}
        )
        self.action_space = spaces.MultiDiscrete([2, 3])

    def close(self) -> None:
        CLOSED.append("Noisy")


class NeedsBox2D(gym.Env[np.ndarray, np.int64]):
    def __init__(self) -> None:
        raise gym.error.DependencyNotInstalled(
            "Box2D is not installed, you can install it by run `pip install swig` followed by "
            '`pip install "gymnasium[box2d]"`'
        )


class NeedsSomething(gym.Env[np.ndarray, np.int64]):
    def __init__(self) -> None:
        import expcli_no_such_dependency  # type: ignore[import-not-found]  # noqa: F401


class Broken(gym.Env[np.ndarray, np.int64]):
    def __init__(self, size: int) -> None:
        raise AssertionError("unreachable")


TEST_ENVS = {
    "ExpcliCatalogNoisy-v0": Noisy,
    "ExpcliCatalogBox2D-v0": NeedsBox2D,
    "ExpcliCatalogMissingModule-v0": NeedsSomething,
    "ExpcliCatalogBroken-v0": Broken,
}


@pytest.fixture
def registered() -> Iterator[None]:
    for env_id, cls in TEST_ENVS.items():
        gym.register(env_id, entry_point=cls, max_episode_steps=7)
    CLOSED.clear()
    yield
    for env_id in TEST_ENVS:
        gym.envs.registry.pop(env_id, None)


def by_id(entries: list[EnvEntry]) -> dict[str, EnvEntry]:
    return {e.id: e for e in entries}


def test_classic_control_spaces_come_from_the_made_env() -> None:
    entries = by_id(list_envs("cartpole"))
    cartpole = entries["CartPole-v1"]
    assert cartpole.observation_space == "Box((4,), float32)"
    assert cartpole.action_space == "Discrete(2)"
    assert cartpole.max_episode_steps == 500 and cartpole.vector is True
    assert cartpole.status == "ok" and cartpole.error is None
    assert all("cartpole" in env_id.lower() for env_id in entries)
    pendulum = by_id(list_envs("Pendulum-v1"))["Pendulum-v1"]
    assert pendulum.action_space == "Box(-2.0, 2.0, (1,), float32)" and not pendulum.vector


def test_filter_is_a_case_insensitive_substring_and_sorted() -> None:
    upper = [e.id for e in list_envs("ACRO", spaces=False)]
    # MiniGrid's "BabyAI-MoveTwoAcross..." match too once a test has imported minigrid
    wanted = sorted((i for i in gym.envs.registry if "acro" in i.lower()), key=str.lower)
    assert upper == [e.id for e in list_envs("acro", spaces=False)] == wanted
    assert "Acrobot-v1" in upper
    everything = [e.id for e in list_envs(spaces=False)]
    assert set(everything) == set(gym.envs.registry)
    assert everything == sorted(everything, key=str.lower)
    assert list_envs("no-such-env-anywhere") == []


def test_no_spaces_makes_no_env(registered: None) -> None:
    entries = by_id(list_envs("ExpcliCatalog", spaces=False))
    assert set(entries) == set(TEST_ENVS)
    noisy = entries["ExpcliCatalogNoisy-v0"]
    assert noisy.observation_space is None and noisy.status == "" and CLOSED == []
    assert noisy.entry_point.endswith("test_catalog:Noisy") and noisy.max_episode_steps == 7


def test_failures_are_listed_not_raised(
    registered: None, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = by_id(list_envs("expclicatalog"))
    noisy = entries["ExpcliCatalogNoisy-v0"]
    assert (
        noisy.observation_space == "Dict('id': Discrete(3), 'pos': Box(-1.0, 1.0, (2,), float32))"
    )
    assert noisy.action_space == "MultiDiscrete([2 3])"
    assert CLOSED == ["Noisy"]  # made once, closed
    box2d = entries["ExpcliCatalogBox2D-v0"]
    assert (
        box2d.needs == "box2d" and box2d.install is not None and "gymnasium[box2d]" in box2d.install
    )
    assert box2d.status.startswith("needs box2d (pip install")
    missing = entries["ExpcliCatalogMissingModule-v0"]
    assert missing.needs == "expcli_no_such_dependency"
    assert missing.install == "pip install expcli_no_such_dependency"
    broken = entries["ExpcliCatalogBroken-v0"]
    assert broken.needs is None and broken.error is not None
    assert broken.error.startswith("TypeError:") and "size" in broken.error
    assert broken.status.startswith("error: TypeError")
    out = capsys.readouterr()
    assert "printed while made" not in out.out  # stdout is for results only
    assert "printed while made" in out.err


def test_the_real_missing_extras_of_this_install() -> None:
    """Box2D, MuJoCo and JAX envs are registered by Gymnasium; here, each says what it needs."""
    for env_id, needs in [
        ("LunarLander-v3", "box2d"),
        ("HalfCheetah-v5", "mujoco"),
        ("phys2d/CartPole-v1", "jax"),
    ]:
        entry = by_id(list_envs(env_id))[env_id]
        modules = {"box2d": ["Box2D"], "mujoco": ["mujoco"], "jax": ["jax", "flax"]}[needs]
        try:  # Gymnasium's jax extra is jax and flax: jax alone (minari[create]'s) is not it
            for module in modules:
                __import__(module)
        except ImportError:
            assert entry.needs == needs, entry
            assert entry.install and entry.install.startswith("pip install")
        else:  # pragma: no cover - the extra happens to be installed
            assert entry.status == "ok"


def test_json_form_has_every_field() -> None:
    [entry] = list_envs("CartPole-v1")[:1]
    data = entry.to_json()
    assert data["id"] == "CartPole-v1" and data["status"] == "ok"
    assert set(data) == {
        "id", "entry_point", "max_episode_steps", "vector", "observation_space",
        "action_space", "needs", "install", "error", "status",
    }  # fmt: skip


def test_modules_are_imported_first_and_bad_ones_named() -> None:
    assert list_envs("CartPole-v1", spaces=False, modules=["gymnasium.envs.classic_control"])
    with pytest.raises(ConfigError, match=re.escape("cannot import module 'ale_py_missing_x'")):
        list_envs(modules=["ale_py_missing_x"])


@pytest.mark.parametrize(
    ("space", "text"),
    [
        (spaces.Box(0, 1, (3, 2), np.uint8), "Box(0, 1, (3, 2), uint8)"),
        (
            spaces.Box(np.array([0.0, -1.0]), np.array([1.0, 1.0]), dtype=np.float64),
            "Box((2,), float64)",
        ),
        (spaces.Discrete(4, start=1), "Discrete(4, start=1)"),
        (
            spaces.Tuple((spaces.Discrete(2), spaces.MultiBinary(3))),
            "Tuple(Discrete(2), MultiBinary(3))",
        ),
    ],
)
def test_describe_space(space: Any, text: str) -> None:
    assert describe_space(space) == text


def test_similar_ids() -> None:
    assert "CartPole-v1" in similar_ids("cartpoel-v1")
    assert similar_ids("zzzzzzzzzzzz") == []
