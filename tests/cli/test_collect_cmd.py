"""``expcli collect`` end to end: every option, errors as one line, files a user can trust."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli import load
from expcli.cli.app import app
from tests.collect.registered_envs import COUNTING, CRASHING
from tests.format_catalogue import FILE_FORMATS, OTHER_COMPRESSIONS, suffix_of

COUNTING_ID = f"tests.collect.registered_envs:{COUNTING}"
CRASHING_ID = f"tests.collect.registered_envs:{CRASHING}"


def run(*args: str) -> object:
    return CliRunner().invoke(app, ["collect", *args])


def ok(*args: str) -> object:
    result = run(*args)
    assert result.exit_code == 0, result.stderr + result.stdout
    return result


def _done(dataset: object) -> np.ndarray:
    t = dataset.tensors  # type: ignore[attr-defined]
    return np.asarray(t["terminated"])[..., 0] | np.asarray(t["truncated"])[..., 0]


def test_defaults_write_under_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = ok("CartPole-v1", "--steps", "64", "--mode", "dummy", "--seed", "0")
    [path] = (tmp_path / "runs").glob("CartPole-v1-*.pt")
    dataset = load(path)
    assert len(dataset) == 64 and dataset.num_envs == 1
    meta = dataset.metadata
    assert meta["env_id"] == "CartPole-v1" and meta["seed"] == 0
    assert meta["observation_space"]["type"] == "Box"
    assert meta["action_space"] == {"type": "Discrete", "n": 2, "start": 0}
    assert meta["env_spec"]["id"] == "CartPole-v1"
    assert meta["collector"]["mode"] == "dummy" and meta["collector"]["steps"] == 64
    assert {"expcli", "gymnasium", "torch", "numpy"} <= set(meta["versions"])
    assert "steps" in result.stdout and path.name in result.stdout.replace("\n", "")


@pytest.mark.parametrize("fmt", FILE_FORMATS)
def test_output_formats(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"run{suffix_of(fmt)}"
    codecs = [codec for named, codec in OTHER_COMPRESSIONS if named == fmt]
    extra = ["--compression", codecs[0]] if codecs else []
    ok("CartPole-v1", "--envs", "4", "--steps", "200", "--mode", "dummy", "-o", str(out), *extra)
    dataset = load(out)
    assert len(dataset) == 200 and dataset.num_envs == 4
    assert (np.asarray(dataset.tensors["rewards"]) == 1.0).all()


def test_episodes_summary_matches_the_file(tmp_path: Path) -> None:
    out = tmp_path / "e.npz"
    result = ok("CartPole-v1", "--envs", "3", "--episodes", "12", "--mode", "dummy", "-o", str(out))
    dataset = load(out)
    done = int(_done(dataset).sum())
    assert done >= 12
    complete = int(re.search(r"(\d+) complete", result.stdout).group(1))  # type: ignore[union-attr]
    assert complete == done
    # CartPole: reward 1 per step, so every complete episode's return equals its length.
    rewards = np.asarray(dataset.tensors["rewards"])[..., 0]
    flags = _done(dataset)
    for env in range(3):
        ends = np.flatnonzero(flags[:, env])
        starts = np.r_[0, ends[:-1] + 1]
        for s, e in zip(starts, ends, strict=True):
            assert rewards[s : e + 1, env].sum() == e - s + 1


def test_memory_size_wraps(tmp_path: Path) -> None:
    out = tmp_path / "w.npz"
    ok(
        "CartPole-v1",
        "--envs",
        "2",
        "--steps",
        "400",
        "--memory-size",
        "10",
        "--mode",
        "dummy",
        "-o",
        str(out),
    )
    dataset = load(out)
    assert dataset.memory_size == 10 and dataset.state.filled and len(dataset) == 20


@pytest.mark.parametrize("mode", ["dummy", "subproc", "vector", "auto"])
def test_modes(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "m.npz"
    result = ok("CartPole-v1", "--envs", "4", "--steps", "400", "--mode", mode, "-o", str(out))
    dataset = load(out)
    assert len(dataset) == 400
    assert (np.asarray(dataset.tensors["rewards"]) == 1.0).all()  # no autoreset rows
    picked = dataset.metadata["collector"]["mode"]
    if mode == "auto":
        assert f"in {picked} mode (auto" in result.stderr
    else:
        assert picked == mode


@pytest.mark.parametrize("asynchronous", ["none", "idle", "restart", "continue"])
def test_async_modes(tmp_path: Path, asynchronous: str) -> None:
    out = tmp_path / "a.npz"
    ok(
        COUNTING_ID,
        "--envs",
        "2",
        "--steps",
        "40",
        "--mode",
        "dummy",
        "--async",
        asynchronous,
        "-o",
        str(out),
    )
    dataset = load(out)
    assert len(dataset) == 40
    assert dataset.metadata["collector"]["asynchronous"] == asynchronous


@pytest.mark.parametrize(
    ("frames", "per"),
    # 64x64 uint8 frames: 4,096 bytes twice, an int64 action, a float32 reward, 2 flags
    [("full", 2 * 4096 + 8 + 6), ("once", 4096 + 8 + 6)],
)
def test_the_free_space_check_counts_frames_stored_once_as_once(
    tmp_path: Path, frames: str, per: int
) -> None:
    """A lower bound on disk: next observations the once form may leave off are not counted."""
    result = run(
        "benchmarks.frame_env:ConstantFrame-v0", "--env-kwargs", '{"shape": [64, 64]}',
        "--mode", "dummy", "--steps", str(10**13), "--frames", frames,
        "-o", str(tmp_path / "run"),
    )  # fmt: skip
    assert result.exit_code == 2, result.stdout
    message = f"--steps 10,000,000,000,000 ({per:,} bytes per transition) needs at least"
    assert message in result.stderr.replace("\n", " ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["Nope-v0"], "unknown env id"),
        (["CartPol-v1"], "did you mean 'CartPole-v1'"),
        (["CartPole-v1", "--mode", "vector", "--async", "idle"], "--async restart only"),
        (["CartPole-v1", "--mode", "warp"], "--mode must be one of"),
        (["CartPole-v1", "--steps", "10", "--episodes", "2"], "not both"),
        (["CartPole-v1", "--envs", "0"], "--envs must be a positive integer"),
        (["CartPole-v1", "--env-kwargs", "{bad"], "not valid JSON"),
        (["CartPole-v1", "--env-kwargs", "[1]"], "JSON object"),
        (["Acrobot-v1", "--mode", "vector"], "no batched (vector) implementation"),
        (["CartPole-v1", "--policy", "no_such_module:act"], "no_such_module"),
        ([], "no env id"),
        (["CartPole-v1", "--seed", "-1"], "--seed must be an integer from 0"),
        (["CartPole-v1", "--envs", "100000000"], "--envs must be at most 65,536"),
        (["CartPole-v1", "--force-mode"], "--force-mode applies to --mode vector only"),
        # CartPole: 2 x 4 float32 observations, an int64 action, float32 reward, 2 flags = 46 B
        (
            ["CartPole-v1", "--mode", "dummy", "--memory-size", str(10**12)],
            "--memory-size 1,000,000,000,000 rows x 1 envs (46 bytes per transition) needs "
            "about 46.0 TB, more than the",
        ),
        (
            ["CartPole-v1", "--mode", "dummy", "--envs", "64", "--memory-size", str(2 * 10**9)],
            "needs about 5.9 TB, more than the",
        ),
        (["CartPole-v1", "--mode", "dummy", "--steps", str(10**15)], "--steps 1,000,000,000"),
    ],
)
def test_bad_options_are_one_line(args: list[str], message: str) -> None:
    result = (
        run(*args, "--steps", "8")
        if "--steps" not in args and "--episodes" not in args
        else run(*args)
    )
    assert result.exit_code == 2, result.stderr
    assert message in result.stderr
    assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.stderr


def test_policy_module_callable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mypolicy.py").write_text(
        textwrap.dedent("""
        import numpy as np
        def always_right(obs):
            return np.ones(len(obs), dtype=np.int64)
        def wrong_shape(obs):
            return np.ones((len(obs), 3), dtype=np.int64)
    """)
    )
    monkeypatch.chdir(tmp_path)
    ok(
        "CartPole-v1",
        "--envs",
        "2",
        "--steps",
        "20",
        "--mode",
        "dummy",
        "--policy",
        "mypolicy:always_right",
        "-o",
        "p.npz",
    )
    assert (np.asarray(load(tmp_path / "p.npz").tensors["actions"]) == 1).all()
    result = run(
        "CartPole-v1",
        "--steps",
        "20",
        "--mode",
        "dummy",
        "--policy",
        "mypolicy:wrong_shape",
        "-o",
        "q.npz",
    )
    assert result.exit_code == 2 and "wrong_shape" in result.stderr
    assert not (tmp_path / "q.npz").exists()


def test_env_kwargs_reach_the_env(tmp_path: Path) -> None:
    out = tmp_path / "k.npz"
    ok(
        "Pendulum-v1",
        "--steps",
        "20",
        "--mode",
        "dummy",
        "--env-kwargs",
        '{"g": 3.5}',
        "-o",
        str(out),
    )
    meta = load(out).metadata
    assert meta["env_kwargs"] == {"g": 3.5} and meta["env_spec"]["kwargs"]["g"] == 3.5
    assert meta["action_space"]["type"] == "Box"


def test_infos_are_stored(tmp_path: Path) -> None:
    out = tmp_path / "i.npz"
    ok(COUNTING_ID, "--envs", "2", "--steps", "40", "--mode", "dummy", "--infos", "-o", str(out))
    assert "infos/t" in load(out).tensors


def test_config_file_and_the_command_line_wins(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    out = tmp_path / "c.npz"
    config.write_text(
        f'env = "CartPole-v1"\nenvs = 2\nsteps = 100\nmode = "dummy"\noutput = "{out}"\n'
    )
    ok("--config", str(config), "--steps", "40")
    dataset = load(out)
    assert dataset.num_envs == 2 and len(dataset) == 40


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('env = "CartPole-v1"\nsteps = "ten"\n', "steps"),
        ('env = "CartPole-v1"\nwarp = 9\n', "warp"),
        ("env = \n", "not a valid TOML"),
    ],
)
def test_bad_config_files(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text)
    result = run("--config", str(config))
    assert result.exit_code == 2 and message in result.stderr and str(config) in result.stderr


def test_never_overwrites_without_permission(tmp_path: Path) -> None:
    out = tmp_path / "o.npz"
    out.write_bytes(b"precious")
    result = run("CartPole-v1", "--steps", "8", "--mode", "dummy", "-o", str(out))
    assert result.exit_code == 1 and "exists" in result.stderr
    assert out.read_bytes() == b"precious"
    ok("CartPole-v1", "--steps", "8", "--mode", "dummy", "-o", str(out), "--overwrite")
    assert len(load(out)) == 8


def test_quiet_prints_the_path_only(tmp_path: Path) -> None:
    out = tmp_path / "q.npz"
    result = ok("CartPole-v1", "--steps", "8", "--mode", "dummy", "-o", str(out), "--quiet")
    assert result.stdout.strip() == str(out) and result.stderr == ""


@pytest.mark.parametrize("mode", ["dummy", "subproc", "vector"])
def test_seed_makes_runs_identical(tmp_path: Path, mode: str) -> None:
    paths = [tmp_path / f"{k}.npz" for k in "ab"]
    for path in paths:
        ok(
            "CartPole-v1",
            "--envs",
            "3",
            "--steps",
            "300",
            "--mode",
            mode,
            "--seed",
            "5",
            "-o",
            str(path),
        )
    a, b = (load(p) for p in paths)
    for name in a.tensors:
        assert np.asarray(a.tensors[name]).tobytes() == np.asarray(b.tensors[name]).tobytes()


def test_env_crash_saves_what_was_collected(tmp_path: Path) -> None:
    out = tmp_path / "crash.npz"
    result = run(CRASHING_ID, "--envs", "2", "--steps", "400", "--mode", "subproc", "-o", str(out))
    assert result.exit_code == 1
    assert "boom" in result.stderr and "saved the 78 transitions" in result.stderr
    dataset = load(out)
    assert len(dataset) == 78 and dataset.metadata["collector"]["steps"] == 78


def test_metadata_is_json(tmp_path: Path) -> None:
    out = tmp_path / "j.npz"
    ok("Pendulum-v1", "--steps", "4", "--mode", "dummy", "-o", str(out))
    json.dumps(load(out).metadata)  # every value serialisable


@pytest.mark.parametrize("memory_size", [None, 7])
def test_inspect_agrees_with_the_collect_summary(tmp_path: Path, memory_size: int | None) -> None:
    out = tmp_path / "x.h5"
    extra = ["--memory-size", str(memory_size)] if memory_size else []
    result = ok(
        "CartPole-v1",
        "--envs",
        "4",
        "--steps",
        "400",
        "--mode",
        "vector",
        "--seed",
        "1",
        "-o",
        str(out),
        *extra,
    )
    inspected = CliRunner().invoke(app, ["inspect", str(out), "--json", "--check"])
    report = json.loads(inspected.stdout)
    assert report["wrapped"] is (memory_size is not None)
    assert report["transitions"] == (4 * memory_size if memory_size else 400)
    complete = int(re.search(r"(\d+) complete", result.stdout).group(1))  # type: ignore[union-attr]
    if memory_size is None:
        assert report["episodes"]["complete"] == complete
    failed = [c for c in report["checks"] if c.get("status", c.get("ok")) in ("fail", False)]
    assert inspected.exit_code == 0, failed


def test_a_run_that_collects_nothing_keeps_the_existing_file(tmp_path: Path) -> None:
    good = tmp_path / "good.npz"
    ok("Pendulum-v1", "--steps", "1000", "--mode", "dummy", "-o", str(good), "--quiet")
    before = good.read_bytes()
    result = run(
        "Pendulum-v1",
        "--env-kwargs",
        '{"g": "x"}',
        "--mode",
        "dummy",
        "-o",
        str(good),
        "--overwrite",
    )
    assert result.exit_code == 1
    assert "nothing was collected before the failure" in result.stderr
    assert f"{good} was left as it was" in result.stderr
    assert good.read_bytes() == before and len(load(good)) == 1000
    fresh = tmp_path / "fresh.npz"
    result = run("Pendulum-v1", "--env-kwargs", '{"g": "x"}', "--mode", "dummy", "-o", str(fresh))
    assert result.exit_code == 1 and "no file was written" in result.stderr
    assert not fresh.exists() and list(tmp_path.iterdir()) == [good]


def test_the_summary_gives_the_runs_counts_and_the_files(tmp_path: Path) -> None:
    args = ["CartPole-v1", "--steps", "4000", "--envs", "4", "--mode", "dummy", "--seed", "0"]
    whole, kept = tmp_path / "whole.npz", tmp_path / "kept.npz"
    ok(*args, "-o", str(whole))  # the same run, every row kept
    result = ok(*args, "--memory-size", "100", "-o", str(kept))
    run_episodes = int(_done(load(whole)).sum())
    inspected = json.loads(CliRunner().invoke(app, ["inspect", str(kept), "--json"]).stdout)
    file_episodes = inspected["episodes"]["complete"]
    assert inspected["transitions"] == 400 and 0 < file_episodes < run_episodes
    text = " ".join(result.stdout.split())
    assert "4,000 collected; the file keeps the newest 400" in text
    assert f"{run_episodes:,} complete, " in text
    assert f"; {file_episodes:,} complete in the file" in text
    collector = load(kept).metadata["collector"]
    assert (collector["steps"], collector["episodes"]) == (4000, run_episodes)
    assert collector["transitions_in_file"] == 400
    assert collector["complete_episodes_in_file"] == file_episodes
