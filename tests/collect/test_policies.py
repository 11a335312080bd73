"""Policies: random (each env == Gymnasium's own sampler on its own stream), callables,
TorchScript / torch.export files, and ``check_actions`` on real Gymnasium spaces."""

from __future__ import annotations

import copy
import json
import re
import shutil
import textwrap
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.vector.utils import batch_space
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.collect.policies import check_actions, make_policy
from expcli.collect.random_policy import RandomPolicy, env_stream_seed
from expcli.errors import ConfigError, FormatError

OBS = spaces.Box(-1.0, 1.0, (4,), np.float32)

SPACES = {
    "discrete": spaces.Discrete(3),
    "discrete_start": spaces.Discrete(4, start=-2),
    "box1": spaces.Box(-2.0, 2.0, (1,), np.float32),
    "box_mixed": spaces.Box(np.array([-1.0, 0.0]), np.array([1.0, 5.0]), dtype=np.float64),
    "box_2d": spaces.Box(-1.0, 1.0, (2, 3), np.float32),
    "box_int": spaces.Box(0, 9, (2,), np.int32),
    "box_unbounded": spaces.Box(-np.inf, np.inf, (2,), np.float32),
    "multidiscrete": spaces.MultiDiscrete([3, 5]),
    "multidiscrete_start": spaces.MultiDiscrete([3, 5], start=[1, -2]),
    "multibinary": spaces.MultiBinary(4),
    "multibinary_2d": spaces.MultiBinary([2, 2]),
}


# --- random --------------------------------------------------------------------------


class PerEnvReference:
    """The reference: a copy of the space per env, seeded by hand, sampled by Gymnasium."""

    def __init__(self, space: Any, num_envs: int, seed: int, first_env: int = 0) -> None:
        self.space = space
        self.copies = []
        for i in range(num_envs):
            one = copy.deepcopy(space)
            sequence = np.random.SeedSequence(seed, spawn_key=(first_env + i,))
            one.seed(int(sequence.generate_state(1, np.uint64)[0]))
            self.copies.append(one)

    def sample(self) -> Any:
        samples = [c.sample() for c in self.copies]
        if isinstance(self.space, spaces.Dict):
            return {k: np.stack([s[k] for s in samples]) for k in self.space.spaces}
        return np.stack(samples)


@pytest.mark.parametrize("name", list(SPACES))
def test_random_draws_exactly_what_each_envs_own_space_samples(name: str) -> None:
    space = SPACES[name]
    policy = make_policy("random", OBS, space, 8, seed=3)
    reference = PerEnvReference(space, 8, 3)
    for _ in range(300):  # past a block of pre-drawn steps
        actions, expected = policy(None), reference.sample()
        assert actions.shape == (8, *space.shape) and actions.dtype == space.dtype
        np.testing.assert_array_equal(actions, expected)
        assert all(space.contains(a) for a in actions)
    assert policy.description == {"kind": "random", "spec": "random", "seed": 3}


@settings(max_examples=40, deadline=None)
@given(
    low=st.floats(-1e6, 1e6),
    width=st.floats(1e-3, 1e6),
    shape=st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple),
    dtype=st.sampled_from([np.float32, np.float64]),
    num_envs=st.integers(1, 17),
    seed=st.integers(0, 2**32 - 1),
)
def test_random_box_matches_gymnasium_for_any_bounds(
    low: float, width: float, shape: tuple[int, ...], dtype: Any, num_envs: int, seed: int
) -> None:
    space = spaces.Box(low, low + width, shape, dtype)
    policy = make_policy("random", OBS, space, num_envs, seed)
    reference = PerEnvReference(space, num_envs, seed)
    for _ in range(3):
        np.testing.assert_array_equal(policy(None), reference.sample())


@settings(max_examples=40, deadline=None)
@given(
    nvec=st.lists(st.integers(1, 1000), min_size=1, max_size=3),
    start=st.integers(-50, 50),
    num_envs=st.integers(1, 17),
    seed=st.integers(0, 2**32 - 1),
)
def test_random_discrete_spaces_match_gymnasium(
    nvec: list[int], start: int, num_envs: int, seed: int
) -> None:
    for space in (
        spaces.Discrete(nvec[0], start=start),
        spaces.MultiDiscrete(nvec, start=[start] * len(nvec)),
    ):
        policy = make_policy("random", OBS, space, num_envs, seed)
        reference = PerEnvReference(space, num_envs, seed)
        for _ in range(3):
            np.testing.assert_array_equal(policy(None), reference.sample())


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(list(SPACES)),
    num_envs=st.integers(2, 12),
    cut=st.integers(1, 11),
    seed=st.integers(0, 2**63),
)
def test_random_actions_do_not_depend_on_how_the_envs_are_split(
    name: str, num_envs: int, cut: int, seed: int
) -> None:
    """Two slices, each drawn apart (as two Ray actors do), give the whole batch's actions."""
    space, cut = SPACES[name], min(cut, num_envs - 1)
    whole = RandomPolicy(space, num_envs, seed)
    left = RandomPolicy(space, cut, seed)
    right = RandomPolicy(space, num_envs - cut, seed, first_env=cut)
    for _ in range(70):
        np.testing.assert_array_equal(whole(), np.concatenate([left(), right()]))


def test_random_policy_without_a_seed_shares_its_entropy() -> None:
    space = SPACES["discrete"]
    first = RandomPolicy(space, 4, None)
    again = RandomPolicy(space, 4, first.entropy)
    assert first.description["seed"] is None
    for _ in range(5):
        np.testing.assert_array_equal(first(), again())
    assert env_stream_seed(1, 0) != env_stream_seed(1, 1) != env_stream_seed(2, 1)


def test_random_is_seeded() -> None:
    space = SPACES["box1"]
    a = [make_policy("random", OBS, space, 16, seed=5)(None) for _ in range(2)]
    np.testing.assert_array_equal(a[0], a[1])
    other = make_policy("random", OBS, space, 16, seed=6)(None)
    assert not np.array_equal(a[0], other)


def test_random_composite_space_gives_gymnasiums_batch() -> None:
    space = spaces.Dict({"move": spaces.Discrete(3), "force": spaces.Box(-1, 1, (2,))})
    actions = make_policy("random", OBS, space, 5, seed=0)(None)
    expected = PerEnvReference(space, 5, 0).sample()
    assert isinstance(actions, dict) and list(actions) == list(space.spaces)
    assert actions["move"].shape == (5,) and actions["move"].dtype == np.int64
    assert actions["force"].shape == (5, 2) and actions["force"].dtype == np.float32
    for key in expected:
        np.testing.assert_array_equal(actions[key], expected[key])
    checked = check_actions(actions, space, 5, "random")
    for key in expected:
        np.testing.assert_array_equal(checked[key], actions[key])


# --- callables -----------------------------------------------------------------------


def write_module(folder: Path, name: str, source: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    return path


POLICIES_SOURCE = """
    import numpy as np
    import torch

    def greedy(obs):
        return (obs[:, 0] > 0).astype(np.int64)

    def as_tensor(obs):
        return torch.ones(len(obs), 1, dtype=torch.int32, requires_grad=False)

    def column(obs):
        return (obs[:, :1] > 0).astype(np.int32)   # (N, 1) int32 for a Discrete space

    def broken(obs):
        raise RuntimeError("boom")

    def factory(observation_space, action_space):
        return greedy

    class Policy:
        def __call__(self, obs):
            return np.zeros(len(obs), np.int64)

    class Holder:
        policy = Policy()

    NOT_CALLABLE = 3
"""


@pytest.fixture
def policy_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = write_module(tmp_path, "my_policies", POLICIES_SOURCE)
    monkeypatch.chdir(tmp_path)  # MODULE:CALLABLE imports from the current folder
    yield path
    import sys

    sys.modules.pop("my_policies", None)


def test_callable_from_a_module_and_from_a_file(policy_module: Path) -> None:
    obs = np.array([[1.0, 0, 0, 0], [-1.0, 0, 0, 0]], np.float32)
    space = spaces.Discrete(2)
    by_module = make_policy("my_policies:greedy", OBS, space, 2, seed=None)
    np.testing.assert_array_equal(by_module(obs), [1, 0])
    assert by_module.description["kind"] == "callable"
    by_file = make_policy(f"{policy_module}:greedy", OBS, space, 2, seed=None)
    np.testing.assert_array_equal(by_file(obs), [1, 0])
    assert (
        by_file.description["sha256"]
        == __import__("hashlib").sha256(policy_module.read_bytes()).hexdigest()
    )
    nested = make_policy("my_policies:Holder.policy", OBS, space, 2, seed=None)
    np.testing.assert_array_equal(nested(obs), [0, 0])


def test_callable_output_is_cast_to_the_space(policy_module: Path) -> None:
    obs = np.array([[1.0, 0, 0, 0], [-1.0, 0, 0, 0]], np.float32)
    space = spaces.Discrete(2)
    for name in ("as_tensor", "column"):
        actions = make_policy(f"my_policies:{name}", OBS, space, 2, None)(obs)
        assert isinstance(actions, np.ndarray)
        assert actions.shape == (2,) and actions.dtype == np.int64


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module:act", "no module named 'no_such_module'"),
        ("my_policies:greedyy", "has no attribute 'greedyy'; did you mean 'greedy'?"),
        ("my_policies:NOT_CALLABLE", "is a int, not a callable"),
        ("my_policies:Policy", "is a class"),
        ("my_policies:factory", "takes (observation_space, action_space)"),
        ("missing_file.py:act", "policy file 'missing_file.py' not found"),
        ("greedy", "unknown policy 'greedy'"),
        ("", "unknown policy ''"),
    ],
)
def test_bad_callable_specs(policy_module: Path, spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        make_policy(spec, OBS, spaces.Discrete(2), 2, None)


def test_a_module_that_fails_to_import_is_a_config_error(tmp_path: Path) -> None:
    path = write_module(tmp_path, "bad_import", "import no_such_dependency_xyz\n")
    with pytest.raises(ConfigError, match="No module named 'no_such_dependency_xyz'"):
        make_policy(f"{path}:act", OBS, spaces.Discrete(2), 2, None)


def test_a_policy_that_raises_is_a_config_error_naming_it(policy_module: Path) -> None:
    policy = make_policy("my_policies:broken", OBS, spaces.Discrete(2), 2, None)
    with pytest.raises(ConfigError, match=r"policy 'my_policies:broken' failed .*boom") as info:
        policy(np.zeros((2, 4), np.float32))
    assert isinstance(info.value.__cause__, RuntimeError)


# --- TorchScript and torch.export files ----------------------------------------------


class Logits(torch.nn.Module):
    """4 observations -> 2 logits: action 1 when the first observation is positive."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)
        with torch.no_grad():
            self.linear.weight.zero_()
            self.linear.bias.zero_()
            self.linear.weight[1, 0] = 1.0

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.linear(obs)


class GradProbe(torch.nn.Module):
    """Action 1 when autograd is on, 0 under ``no_grad``."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():
            return torch.ones(obs.shape[0], dtype=torch.int64)
        return torch.zeros(obs.shape[0], dtype=torch.int64)


class Torque(torch.nn.Module):
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(obs[:, :1]) * 2.0


def script(module: torch.nn.Module, path: Path) -> None:
    with warnings.catch_warnings():  # torch 2.13 deprecates torch.jit.script (not loading)
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(module).save(str(path))


@pytest.fixture(scope="module")
def torch_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("torch_policies")
    files = {"script": folder / "logits.pt", "export": folder / "logits.pt2"}
    script(Logits(), files["script"])
    batch = torch.export.Dim("batch")
    program = torch.export.export(
        Logits(), (torch.zeros(4, 4),), dynamic_shapes={"obs": {0: batch}}
    )
    torch.export.save(program, str(files["export"]))
    files["torque"] = folder / "torque.pt"
    script(Torque(), files["torque"])
    files["probe"] = folder / "probe.pt"
    script(GradProbe(), files["probe"])
    files["state_dict"] = folder / "state_dict.pt"
    torch.save(Logits().state_dict(), files["state_dict"])
    return files


@pytest.mark.parametrize("kind", ["script", "export"])
def test_torch_file_logits_become_discrete_actions(kind: str, torch_files: dict[str, Path]) -> None:
    path = torch_files[kind]
    policy = make_policy(str(path), OBS, spaces.Discrete(2), 3, None)
    obs = np.array([[0.5, 0, 0, 0], [-0.5, 0, 0, 0], [2.0, 1, 1, 1]], np.float32)
    actions = policy(obs)
    np.testing.assert_array_equal(actions, [1, 0, 1])
    assert actions.dtype == np.int64
    described = policy.description
    assert described["kind"] == ("torchscript" if kind == "script" else "torch.export")
    assert described["logits_argmax"] is True and len(described["sha256"]) == 64


def test_torch_files_run_under_no_grad(torch_files: dict[str, Path]) -> None:
    policy = make_policy(str(torch_files["probe"]), OBS, spaces.Discrete(2), 3, None)
    assert torch.is_grad_enabled()
    np.testing.assert_array_equal(policy(np.zeros((3, 4), np.float32)), [0, 0, 0])


def test_an_export_file_with_a_pt_suffix_is_recognised(
    torch_files: dict[str, Path], tmp_path: Path
) -> None:
    path = tmp_path / "exported.pt"
    shutil.copy(torch_files["export"], path)
    policy = make_policy(str(path), OBS, spaces.Discrete(2), 2, None)
    assert policy.description["kind"] == "torch.export"
    np.testing.assert_array_equal(policy(np.eye(2, 4, dtype=np.float64)), [1, 0])


def test_torch_file_for_a_box_and_a_discrete_start(torch_files: dict[str, Path]) -> None:
    box = spaces.Box(-2.0, 2.0, (1,), np.float32)
    policy = make_policy(str(torch_files["torque"]), OBS, box, 2, None)
    actions = policy(np.array([[10.0, 0, 0, 0], [-10.0, 0, 0, 0]], np.float32))
    assert actions.dtype == np.float32 and actions.shape == (2, 1)
    np.testing.assert_allclose(actions[:, 0], [2.0, -2.0], atol=1e-5)
    shifted = make_policy(str(torch_files["script"]), OBS, spaces.Discrete(2, start=5), 1, None)
    np.testing.assert_array_equal(shifted(np.ones((1, 4), np.float32)), [6])


def test_torch_policy_steps_a_real_vector_env(torch_files: dict[str, Path]) -> None:
    envs = gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync")
    try:
        policy = make_policy(
            str(torch_files["export"]),
            envs.single_observation_space,
            envs.single_action_space,
            4,
            None,
        )
        obs, _ = envs.reset(seed=0)
        actions = check_actions(policy(obs), envs.single_action_space, 4, "logits.pt2")
        for _ in range(5):
            obs, *_ = envs.step(actions)
            actions = policy(obs)
            np.testing.assert_array_equal(actions, (obs[:, 0] > 0).astype(np.int64))
    finally:
        envs.close()


def test_torch_policy_with_the_wrong_observation_width(torch_files: dict[str, Path]) -> None:
    policy = make_policy(str(torch_files["script"]), OBS, spaces.Discrete(2), 2, None)
    with pytest.raises(ConfigError, match=r"failed on a float32 batch of observations \(2, 3\)"):
        policy(np.zeros((2, 3), np.float32))


def rewrite_zip(src: Path, dst: Path, change: dict[str, bytes | None]) -> Path:
    """A copy of a zip archive with members replaced (bytes), removed (None) or added."""
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dst, "w") as new:
        for item in old.infolist():
            name = item.filename
            if name not in change:
                new.writestr(item, old.read(name))
        for name, data in change.items():
            if data is not None:
                new.writestr(name, data)
    return dst


def test_unsafe_or_foreign_torch_files_are_refused(
    torch_files: dict[str, Path], tmp_path: Path
) -> None:
    discrete = spaces.Discrete(2)
    with pytest.raises(FormatError, match="pickled checkpoint written by torch.save") as info:
        make_policy(str(torch_files["state_dict"]), OBS, discrete, 2, None)
    assert info.value.path == str(torch_files["state_dict"])
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a zip archive")
    with pytest.raises(FormatError, match="not a TorchScript or torch.export file"):
        make_policy(str(junk), OBS, discrete, 2, None)
    truncated = tmp_path / "truncated.pt"
    data = torch_files["script"].read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError, match="truncated.pt"):
        make_policy(str(truncated), OBS, discrete, 2, None)
    with pytest.raises(ConfigError, match="not found"):
        make_policy(str(tmp_path / "missing.pt2"), OBS, discrete, 2, None)

    export = torch_files["export"]
    with zipfile.ZipFile(export) as archive:
        root = archive.namelist()[0].split("/")[0]
        config_name = f"{root}/data/weights/model_weights_config.json"
        config = json.loads(archive.read(config_name))
    first = next(iter(config["config"].values()))
    first["use_pickle"] = True
    pickled = rewrite_zip(
        export, tmp_path / "pickled.pt2", {config_name: json.dumps(config).encode()}
    )
    with pytest.raises(FormatError, match="unsafe torch.export archive"):
        make_policy(str(pickled), OBS, discrete, 2, None)
    native = rewrite_zip(
        export, tmp_path / "native.pt2", {f"{root}/data/aotinductor/model/model.so": b"\x7fELF"}
    )
    with pytest.raises(FormatError, match="data/aotinductor/model/model.so"):
        make_policy(str(native), OBS, discrete, 2, None)
    inputs = f"{root}/data/sample_inputs/model.pt"
    unsafe_inputs = rewrite_zip(export, tmp_path / "inputs.pt2", {inputs: b"\x80\x04garbage."})
    with pytest.raises(FormatError, match="sample inputs"):
        make_policy(str(unsafe_inputs), OBS, discrete, 2, None)


# --- check_actions -------------------------------------------------------------------


def test_compatible_dtypes_are_cast_without_copies_when_possible() -> None:
    discrete = spaces.Discrete(3)
    same = np.array([0, 1, 2], np.int64)
    assert check_actions(same, discrete, 3, "p") is same
    column = np.array([[0], [1], [2]], np.int64)
    out = check_actions(column, discrete, 3, "p")
    assert out.shape == (3,) and np.shares_memory(out, column)
    np.testing.assert_array_equal(
        check_actions(np.array([0, 1, 2], np.int32), discrete, 3, "p"), same
    )
    box = spaces.Box(-1.0, 1.0, (2,), np.float32)
    cast = check_actions(np.full((3, 2), 0.5), box, 3, "p")
    assert cast.dtype == np.float32 and cast.shape == (3, 2)
    flat = check_actions(np.zeros(3, np.float32), spaces.Box(-1, 1, (1,), np.float32), 3, "p")
    assert flat.shape == (3, 1)
    binary = check_actions(np.array([[True, False]] * 3), spaces.MultiBinary(2), 3, "p")
    assert binary.dtype == np.int8
    as_torch = check_actions(torch.tensor([[0.25, -0.25]] * 3, dtype=torch.float64), box, 3, "p")
    assert as_torch.dtype == np.float32


@pytest.mark.parametrize(
    ("actions", "space", "message"),
    [
        (
            np.array([0, 1, 3]),
            spaces.Discrete(3),
            "returned action 3 for env 2, outside Discrete(3): expected integers in [0, 2]",
        ),
        (np.array([0, -1, 0]), spaces.Discrete(3), "action -1 for env 1"),
        (
            np.array([0.0, 1.0, 0.0]),
            spaces.Discrete(3),
            "returned float64 actions; Discrete(3) takes integers (int64) (take an argmax",
        ),
        (
            np.zeros((3, 2), np.int64),
            spaces.Discrete(3),
            "returned actions of shape (3, 2); expected (3,)",
        ),
        (np.zeros(2, np.int64), spaces.Discrete(3), "expected (3,) (one action per env for 3 envs"),
        (np.array([[0.0], [np.nan], [0.0]]), spaces.Box(-1, 1, (1,)), "returned NaN for env 1"),
        (
            np.array([[0.0], [0.5], [1.5]]),
            spaces.Box(-1, 1, (1,)),
            "returned 1.5 for env 2 (element (0,)), outside [-1.0, 1.0] of "
            "Box(-1.0, 1.0, (1,), float32)",
        ),
        (
            np.array([[0.0], [0.5], [1.5]]),
            spaces.Box(-1, 1, (1,)),
            "out-of-bounds Box actions are refused, not clipped",
        ),
        (
            np.array([[0, 4]] * 3),
            spaces.MultiDiscrete([3, 4]),
            "action 4 for env 0 (element (1,)), outside MultiDiscrete([3 4]): "
            "expected integers in [0, 3]",
        ),
        (np.array([[0, 2]] * 3), spaces.MultiBinary(2), "action 2 for env 0 (element (1,))"),
        (np.array(["a", "b", "c"]), spaces.Discrete(3), "expected numeric actions"),
        (None, spaces.Discrete(3), "expected numeric actions"),
        (len, spaces.Discrete(3), "not actions (if it is a factory"),
    ],
)
def test_bad_actions_say_what_was_expected(actions: Any, space: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        check_actions(actions, space, 3, "my.policy:act")
    assert "policy 'my.policy:act'" in str(info.value)


def test_composite_actions_are_checked_per_env() -> None:
    space = spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3)))
    with pytest.raises(ConfigError, match=r"returned 2 actions; expected 3"):
        check_actions([(0, 0), (1, 2)], space, 3, "p")
    with pytest.raises(ConfigError, match=r"for env 1, not in Tuple"):
        check_actions([(0, 0), (1, 5), (0, 1)], space, 3, "p")
    batched = (np.array([0, 1, 1]), np.array([2, 0, 1]))
    out = check_actions(batched, space, 3, "p")
    assert isinstance(out, tuple) and [a.tolist() for a in out] == [[0, 1, 1], [2, 0, 1]]
    per_env = check_actions([(0, 2), (1, 0), (1, 1)], space, 3, "p")  # batched as gymnasium
    assert isinstance(per_env, tuple) and [a.tolist() for a in per_env] == [[0, 1, 1], [2, 0, 1]]


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from([n for n in SPACES if n != "box_unbounded"]),
    seed=st.integers(0, 1000),
    n=st.integers(1, 9),
)
def test_any_sample_of_the_batched_space_passes_unchanged(name: str, seed: int, n: int) -> None:
    space = SPACES[name]
    batched = batch_space(space, n)
    batched.seed(seed)
    sample = batched.sample()
    checked = check_actions(sample, space, n, "random")
    assert checked is sample or np.shares_memory(checked, sample)
    np.testing.assert_array_equal(checked, sample)
