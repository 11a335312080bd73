"""``expcli collect`` against envs that misbehave in every way an env can: odd values are
stored as they are, without a warning; a broken result or a failing call is one line naming
the env and its step, and the rows before it are saved; nothing an env prints reaches
stdout (the summary's, or with -q the path alone); no traceback in any case."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import expcli
from expcli.cli import app
from tests.envs.misbehaving_ids import MISBEHAVING_ID
from tests.small_fs import expcli_process

# The env misbehaves from its 4th step; its episodes end every 6 steps (autoresets, with
# reset infos, which --infos must not report).
RUN = [MISBEHAVING_ID, "--envs", "2", "--steps", "40", "--infos", "-q"]
SAVED = "saved the 6 transitions collected before the failure to"
NOTHING = "nothing was collected before the failure: no file was written"

FINE = ["nan_reward", "inf_reward", "huge_reward", "same_buffer", "print", "close_raises"]
FAILING = {
    "int_flag": ("step() returned terminated=1 of type int (expected a bool) at step 4", SAVED),
    "str_flag": ("step() returned terminated='yes' of type str (expected a bool)", SAVED),
    "array_flag": ("step() returned terminated=array([False]) of type ndarray", SAVED),
    "none_info": ("step() returned an info None (expected a dict) at step 4", SAVED),
    "four_tuple": ("step() raised ValueError: not enough values to unpack", SAVED),
    "six_tuple": ("step() raised ValueError: too many values to unpack", SAVED),
    "step_raises": ("step() raised RuntimeError: boom in step", SAVED),
    "exit": ("step() raised SystemExit: 5", SAVED),
    "int_reward": ("step() raised OverflowError: int too large to convert to float", SAVED),
    "reset_raises": ("step() raised RuntimeError: boom in reset", SAVED.replace("6", "10")),
    "reset_shape": ("reset() returned an observation of shape (2,)", NOTHING),
    "reset_none_info": ("reset() raised AssertionError", NOTHING),
}


def _kwargs(how: str) -> str:
    return json.dumps({"how": how, "at": 4, "horizon": 6})


@pytest.mark.parametrize("how", FINE + list(FAILING))
def test_a_hostile_env_in_dummy_mode(tmp_path: Path, how: str) -> None:
    out = tmp_path / "run.npz"
    args = ["collect", *RUN, "--mode", "dummy", "--env-kwargs", _kwargs(how), "-o", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.stderr
    if how in FINE:  # stored as they are, without a warning; prints go to stderr
        printed = "".join(f"step {t}\n" * 2 for t in range(4, 21)) if how == "print" else ""
        assert (result.exit_code, result.stdout, result.stderr) == (0, f"{out}\n", printed), (
            result.stderr
        )
        assert len(expcli.load(out)) == 40
        return
    problem, saved = FAILING[how]
    assert result.exit_code == 1 and result.stdout == ""
    first, second = result.stderr.strip().splitlines()
    assert first.startswith(f"error: env 0: {problem}"), first
    assert second.startswith(saved), second
    if saved is not NOTHING:
        assert len(expcli.load(out)) == int(saved.split()[2])
    else:
        assert not out.exists()


@pytest.mark.parametrize(
    ("how", "line"),
    [
        ("exit", "step() raised SystemExit: 5"),
        ("keyboard", "step() raised KeyboardInterrupt"),
        ("print", None),
    ],
    ids=["exit", "keyboard", "print"],
)
def test_a_hostile_env_in_a_worker_process(tmp_path: Path, how: str, line: str | None) -> None:
    out = tmp_path / "run.npz"
    args = ["collect", *RUN, "--mode", "subproc", "--env-kwargs", _kwargs(how), "-o", str(out)]
    done = expcli_process(*args, cwd=Path(__file__).resolve().parents[2])
    assert "Traceback" not in done.stderr
    if line is None:  # what the env prints goes to stderr; stdout is the path alone
        assert done.returncode == 0 and done.stdout == f"{out}\n"
        # two workers print at once: their lines may interleave, but only theirs are there
        assert re.fullmatch(r"(?:step \d+\n*)+", done.stderr), done.stderr
        assert done.stderr.count("step 4") == 2
        assert len(expcli.load(out)) == 40
        return
    assert done.returncode == 1 and done.stdout == ""
    first, second = done.stderr.strip().splitlines()
    # both envs fail at once, each in its worker: either may be reported
    assert first.startswith((f"error: env 0: {line}", f"error: env 1: {line}")), first
    assert second.startswith(SAVED) and len(expcli.load(out)) == 6
