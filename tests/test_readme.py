"""Every code block of README.md runs, in README order, in a fresh folder.

A new user copies the README's blocks one after the other into a fresh clone; so does this
test. The folder holds what a clone's top level gives the README (the Makefile with its
prerequisites ``pyproject.toml`` and ``constraints.txt``, ``examples/``, ``sample_configs/``)
and nothing else: every other file a block uses must be made by an earlier block.

Shell blocks (``bash``, ``sh``, ``console``) run through ``bash -e -o pipefail`` with the
venv's ``bin`` first on ``PATH`` (where ``expcli`` is) and ``PYTHONPATH`` kept; ``make`` runs
the README's targets with that venv as ``.venv``, already set up (``-o``: nothing is
installed). Python blocks each run in a fresh interpreter reading the block from stdin
(``python -``, which the README says suits ``ParallelEnv`` code), in the same folder.

What cannot run here is marked in the README itself, visibly, by an HTML comment on the line
before the block::

    <!-- readme-test: skip (REASON) -->             the whole block
    <!-- readme-test: skip "COMMAND" (REASON) -->   the block's lines starting with COMMAND

Each REASON must name a real constraint (``REAL_CONSTRAINTS``). Output text is never
compared: a block passes when it exits 0.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CLONE_PARTS = ("Makefile", "pyproject.toml", "constraints.txt", "examples", "sample_configs")
SHELL = {"bash", "sh", "shell", "console"}
PYTHON = {"python", "py"}
NOT_CODE = {"text", "toml", "json"}
MARKER = re.compile(
    r'<!--\s*readme-test:\s*skip(?:\s+"(?P<command>[^"]+)")?\s*\((?P<reason>.+)\)\s*-->'
)
REAL_CONSTRAINTS = re.compile(
    r"Ray cluster|remote host|the network|runs the whole test suite, this test included"
)
BLOCK_TIMEOUT_S = 300
NESTED = "EXPCLI_README_TEST"  # set in the blocks' environment: a README that lost its marker
# on `make test` must not start the suite, and this test, inside itself again


@dataclass(frozen=True)
class Block:
    """One fenced code block of the README."""

    line: int  # of the opening fence, 1-based
    language: str
    code: str
    marker: re.Match[str] | None  # the readme-test comment just before it, if any


def readme_blocks(text: str) -> list[Block]:
    """The fenced blocks of ``text`` in order, each with the marker just before it."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\S*)\s*$", lines[i])
        if fence is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        code = "\n".join(lines[i + 1 : end]) + "\n"
        blocks.append(Block(i + 1, fence.group(1).lower(), code, MARKER.search(before)))
        i = end + 1
    return blocks


def runnable(block: Block) -> str | None:
    """The code of ``block`` to run: None when skipped whole; marked commands dropped."""
    code = block.code
    if block.language == "console":
        code = "".join(line[2:] + "\n" for line in code.splitlines() if line.startswith("$ "))
    if block.marker is None:
        return code
    command = block.marker.group("command")
    if command is None:
        return None
    return "".join(line + "\n" for line in code.splitlines() if not line.startswith(command))


def test_the_readme_skips_only_what_cannot_run_here() -> None:
    """Every skip marker names a real constraint, and a skipped command is in its block."""
    blocks = readme_blocks(README.read_text(encoding="utf-8"))
    markers = README.read_text(encoding="utf-8").count("readme-test:")
    assert markers == sum(b.marker is not None for b in blocks), "a marker not before a block"
    for block in blocks:
        assert block.language in SHELL | PYTHON | NOT_CODE, (
            f"README.md:{block.line}: label the block bash, python or text"
        )
        if block.marker is None:
            continue
        reason = block.marker.group("reason")
        assert REAL_CONSTRAINTS.search(reason), f"README.md:{block.line}: skipped for {reason!r}"
        command = block.marker.group("command")
        if command is not None:
            assert any(line.startswith(command) for line in block.code.splitlines()), (
                f"README.md:{block.line}: no line starts with {command!r}"
            )


def _fresh_clone(folder: Path) -> None:
    for part in CLONE_PARTS:
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, folder / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, folder / part)


def _environment() -> dict[str, str]:
    venv_bin = Path(sys.executable).parent
    assert (venv_bin / "expcli").exists(), f"no expcli script beside {sys.executable}"
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(venv_bin), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(ROOT), env.get("PYTHONPATH", "")] if p)
    env["README_VENV"] = sys.prefix
    env[NESTED] = "1"
    env.pop("RAY_ADDRESS", None)
    return env


SHELL_PREAMBLE = """\
make() {  # the README's targets, with the venv running this test as .venv, already set up
    command make VENV="$README_VENV" -o "$README_VENV/.core" -o "$README_VENV/.dev" "$@"
}
"""


def test_every_readme_block_runs_in_order(tmp_path: Path) -> None:
    """Shell and Python blocks, in README order, in a folder a fresh clone would give."""
    if os.environ.get(NESTED):
        pytest.skip("run by a README block (make test) inside this test")
    _fresh_clone(tmp_path)
    env = _environment()
    ran = 0
    for block in readme_blocks(README.read_text(encoding="utf-8")):
        code = runnable(block)
        if code is None or block.language in NOT_CODE:
            continue
        if block.language in SHELL:
            command = ["bash", "-e", "-o", "pipefail", "-c", SHELL_PREAMBLE + code]
            stdin = None
        else:
            command, stdin = [sys.executable, "-"], code
        result = subprocess.run(
            command,
            cwd=tmp_path,
            env=env,
            input=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
            check=False,
        )
        assert result.returncode == 0, (
            f"README.md:{block.line} ({block.language}) exited {result.returncode}:\n"
            f"{code}\n--- output (end) ---\n{result.stdout[-4000:]}"
        )
        ran += 1
    assert ran >= 10, f"only {ran} blocks ran"


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("```bash\necho hi\n```\n", ["echo hi\n"]),
        ("<!-- readme-test: skip (needs a Ray cluster) -->\n```bash\nray start\n```\n", [None]),
        (
            '<!-- readme-test: skip "make test" (x) -->\n```bash\nmake demo\nmake test  # all\n```',
            ["make demo\n"],
        ),
        ("```console\n$ expcli envs\nCartPole-v1\n```\n", ["expcli envs\n"]),
    ],
)
def test_markers_and_prompts_are_read_as_documented(
    markdown: str, expected: list[str | None]
) -> None:
    assert [runnable(b) for b in readme_blocks(markdown)] == expected
