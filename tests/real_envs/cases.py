"""The real-env matrix: which env runs in which mode, and the checks run on each.

Shared by the tests (``test_real_envs.py``) and the table printer (``report.py``), so the
table the lead reads is the tests' own verdict. Every check runs the real command line
(``python -m expcli collect ...`` in a subprocess) and raises ``AssertionError`` with one
line saying what went wrong.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.real_envs.oracle import CannotReplay, ReplayReport, assert_replays

__all__ = ["CASES", "CHECKS", "Case", "Check", "collect", "describe"]

REPO = Path(__file__).resolve().parents[2]
ATARI = "ale_py:ALE/Pong-v5"
BIPEDAL = "BipedalWalker-v3"
MINIGRID = "minigrid:MiniGrid-Empty-5x5-v0"
OWN = "tests.real_envs.own_envs"
SEED = 7


@dataclass(frozen=True)
class Case:
    """One ``expcli collect`` run to replay: env, mode, async mode and size."""

    label: str
    env_id: str
    mode: str = "auto"
    asynchronous: str = "restart"
    envs: int = 4
    steps: int = 400
    options: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    suffix: str = ".npz"

    @property
    def name(self) -> str:
        tail = "" if self.asynchronous == "restart" else f"-{self.asynchronous}"
        return f"{self.label}-{self.mode}{tail}"

    def arguments(self, output: Path, seed: int | None = SEED) -> list[str]:
        """The ``expcli`` arguments of this run writing ``output``."""
        args = ["collect", self.env_id, "--envs", str(self.envs), "--steps", str(self.steps)]
        args += ["--mode", self.mode, "--async", self.asynchronous, "-o", str(output), "-q"]
        if seed is not None:
            args += ["--seed", str(seed)]
        return [*args, *self.options]


_ATARI_MODES = ("auto", "dummy", "subproc", "ray", "ray-subproc")

CASES: tuple[Case, ...] = (
    *(
        Case(
            "Pong",
            ATARI,
            mode,
            envs=4,
            steps=160,
            needs=("ale_py", *(("ray",) if mode.startswith("ray") else ())),
        )
        for mode in _ATARI_MODES
    ),
    # Pong's episodes last thousands of steps: a frame limit brings truncations in.
    Case(
        "Pong-100-frames",
        ATARI,
        "dummy",
        envs=2,
        steps=240,
        options=("--env-kwargs", '{"max_num_frames_per_episode": 100}'),
        needs=("ale_py",),
    ),
    Case("InvertedPendulum-v5", "InvertedPendulum-v5", needs=("mujoco",)),
    Case(BIPEDAL, BIPEDAL, "auto", steps=800, needs=("Box2D",)),
    Case(BIPEDAL, BIPEDAL, "dummy", steps=800, needs=("Box2D",)),
    Case("LunarLander-v3", "LunarLander-v3", needs=("Box2D",), suffix=".h5"),
    Case("Blackjack-v1", "Blackjack-v1"),
    Case("FrozenLake-v1", "FrozenLake-v1", suffix=".pt"),
    Case("Puck (own Dict)", f"{OWN}:ExpcliReal/Puck-v0"),
    Case("Puck (Dict actions)", f"{OWN}:ExpcliReal/PuckDictActions-v0"),
    Case(
        "MiniGrid-Empty-5x5",
        MINIGRID,
        options=("--wrapper", f"{OWN}:drop_mission"),
        needs=("minigrid",),
    ),
    Case("CartPole-v1", "CartPole-v1"),
    *(
        Case("CartPole-v1", "CartPole-v1", mode, asynchronous)
        for asynchronous in ("none", "idle")
        for mode in ("dummy", "subproc")
    ),
)


def run_expcli(
    args: list[str], cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python -m expcli ARGS`` in a subprocess that can import this test package."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "expcli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


_collected: dict[tuple[Case, Path, str, int | None], Path] = {}


def collect(case: Case, folder: Path, tag: str = "", seed: int | None = SEED) -> Path:
    """Run the case's collect into ``folder`` (once: later calls reuse the file).

    Raises:
        AssertionError: The command failed or wrote nothing; its last stderr line says why.
    """
    key = (case, folder, tag, seed)
    if key in _collected and _collected[key].exists():
        return _collected[key]
    output = folder / f"{_slug(case.name)}{tag}{case.suffix}"
    done = run_expcli([*case.arguments(output, seed), "--overwrite"], folder)
    if done.returncode != 0 or not output.exists():
        raise AssertionError(f"collect exited {done.returncode}: {_last_line(done.stderr)}")
    _collected[key] = output
    return output


def check_replay(case: Case, folder: Path) -> ReplayReport:
    """Every stored transition replays bit for bit, and the run is what was asked for."""
    from expcli import load

    output = collect(case, folder)
    collector = load(output).metadata.get("collector") or {}
    chosen = collector.get("mode")
    if case.mode == "auto" and chosen == "vector":
        raise AssertionError("auto chose vector mode although --seed was given")
    if case.mode != "auto" and chosen != case.mode:
        raise AssertionError(f"metadata records mode {chosen!r}, asked for {case.mode!r}")
    if collector.get("asynchronous") != case.asynchronous:
        raise AssertionError(f"metadata records async {collector.get('asynchronous')!r}")
    try:
        report = assert_replays(output)
    except CannotReplay as e:
        raise AssertionError(f"cannot replay: {e}") from e
    if report.transitions != case.steps:
        raise AssertionError(f"replayed {report.transitions} transitions, asked for {case.steps}")
    return report


def check_bipedal_seed_gives_same_bytes(folder: Path) -> None:
    """BipedalWalker with ``--seed``: auto twice and dummy once store the same tensors."""
    auto, dummy = _case(BIPEDAL, "auto"), _case(BIPEDAL, "dummy")
    files = [collect(auto, folder), collect(auto, folder, "-again"), collect(dummy, folder)]
    same_tensors(files)


def same_tensors(files: list[Path]) -> None:
    """The files hold the same tensors, byte for byte (metadata aside)."""
    from expcli import load

    first = load(files[0])
    for other_path in files[1:]:
        other = load(other_path)
        if sorted(first.tensors) != sorted(other.tensors):
            raise AssertionError(f"{other_path.name} has other tensors than {files[0].name}")
        for name in sorted(first.tensors):
            a, b = first.tensors[name], other.tensors[name]
            if a.shape != b.shape or a.dtype != b.dtype:
                raise AssertionError(f"{name}: {a.dtype}{a.shape} != {b.dtype}{b.shape}")
            rows = _differing_rows(a, b)
            if rows.size:
                t, i = rows[0]
                raise AssertionError(
                    f"{other_path.name} differs from {files[0].name} in {name} from row {t}, "
                    f"env {i} on"
                )


def check_atari_vector_refused(folder: Path) -> None:
    """``--mode vector`` on Pong says in one line what differs from gym.make's env."""
    output = folder / "pong-vector.npz"
    done = run_expcli(
        ["collect", ATARI, "--envs", "2", "--steps", "16", "--mode", "vector", "-o", str(output)],
        folder,
    )
    if done.returncode == 0:
        raise AssertionError("--mode vector was accepted although AtariVectorEnv's spec differs")
    if output.exists():
        raise AssertionError("a refused run wrote its output file")
    line = _one_error_line(done.stderr)
    words = ("observation", "space", "spec", "kwargs", "wrapper", "repeat_action_probability")
    if not any(word in line for word in words):
        raise AssertionError(f"the refusal does not say what differs: {line}")


def check_atari_auto_unseeded_is_not_vector(folder: Path) -> None:
    """Without ``--seed``, auto still never swaps in AtariVectorEnv's preprocessed frames."""
    from expcli import load

    case = Case("Pong", ATARI, "auto", envs=4, steps=80)
    output = collect(case, folder, "-unseeded", seed=None)
    dataset = load(output)
    mode = (dataset.metadata.get("collector") or {}).get("mode")
    shape = dataset.tensors["observations"].shape[2:]
    if mode == "vector" or shape != (210, 160, 3):
        raise AssertionError(f"auto chose {mode} mode, storing frames shaped {shape}")


def check_text_leaf_refused(folder: Path) -> None:
    """MiniGrid's text ``mission`` leaf without a wrapper: one line naming leaf and remedy."""
    output = folder / "minigrid-text.npz"
    args = ["collect", MINIGRID, "--envs", "2", "--steps", "16", "--mode", "dummy"]
    done = run_expcli([*args, "-o", str(output)], folder)
    if done.returncode == 0:
        raise AssertionError("a Dict with a text leaf was collected without a word")
    if output.exists():
        raise AssertionError("a refused run wrote its output file")
    line = _one_error_line(done.stderr)
    if "mission" not in line or "--wrapper" not in line:
        raise AssertionError(f"the refusal does not name the leaf and --wrapper: {line}")


def _differing_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(row, env)`` pairs whose bytes differ, in order."""
    width = a.dtype.itemsize * int(np.prod(a.shape[2:], dtype=np.int64))
    a_bytes = np.ascontiguousarray(a).view(np.uint8).reshape(a.shape[0], a.shape[1], width)
    b_bytes = np.ascontiguousarray(b).view(np.uint8).reshape(b.shape[0], b.shape[1], width)
    return np.argwhere((a_bytes != b_bytes).any(axis=2))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]+", "-", text).strip("-")


def _is_ale_banner(line: str) -> bool:
    return line.startswith(("A.L.E:", "[Powered by Stella]"))


def _last_line(text: str) -> str:
    """The last line with words in it, without rich's box drawing around usage errors."""
    for line in reversed(text.splitlines()):
        words = line.strip(" \u2502\u256d\u256e\u2570\u256f\u2500")
        if any(c.isalnum() for c in words) and not _is_ale_banner(words):
            return words
    return "(no message)"


def _one_error_line(stderr: str) -> str:
    """The CLI's one ``error:`` line; ``AssertionError`` for a traceback or more lines."""
    if "Traceback" in stderr:
        count = len(stderr.splitlines())
        raise AssertionError(f"a {count}-line traceback ending: {_last_line(stderr)}")
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    if len(errors) != 1:
        raise AssertionError(f"expected one 'error:' line, got {len(errors)}: {_last_line(stderr)}")
    return errors[0]


def _case(label: str, mode: str) -> Case:
    return next(c for c in CASES if c.label == label and c.mode == mode)


@dataclass(frozen=True)
class Check:
    """One row of the table: an env, a mode, the packages it needs and the check to run."""

    env: str
    mode: str
    needs: tuple[str, ...]
    run: Callable[[Path], object]

    @property
    def name(self) -> str:
        return _slug(f"{self.env}-{self.mode}")


def _replay_check(case: Case) -> Check:
    mode = (
        case.mode if case.asynchronous == "restart" else f"{case.mode}, async {case.asynchronous}"
    )
    return Check(case.label, mode, case.needs, lambda folder: check_replay(case, folder))


CHECKS: tuple[Check, ...] = (
    *(_replay_check(case) for case in CASES if case.label == "Pong"),
    Check("Pong", "vector (refused)", ("ale_py",), check_atari_vector_refused),
    Check(
        "Pong", "auto, no seed (not vector)", ("ale_py",), check_atari_auto_unseeded_is_not_vector
    ),
    *(_replay_check(case) for case in CASES if case.label != "Pong"),
    Check(BIPEDAL, "auto --seed twice = dummy", ("Box2D",), check_bipedal_seed_gives_same_bytes),
    Check("MiniGrid-Empty-5x5", "no wrapper (refused)", ("minigrid",), check_text_leaf_refused),
)


def describe(error: BaseException) -> str:
    """The first line of an error, for the table."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
