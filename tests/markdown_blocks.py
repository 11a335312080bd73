"""The fenced code blocks of Markdown pages, and running them as a reader copying them would.

``tests/test_readme.py`` runs the README's blocks with this, ``tests/test_docs_blocks.py``
the docs site's. A run starts in a fresh folder holding what a clone's top level gives
(the Makefile with its prerequisites ``pyproject.toml`` and ``constraints.txt``,
``examples/``, ``sample_configs/``) and nothing else: every other file a block uses must be
made by an earlier block.

Shell blocks (``bash``, ``sh``, ``console``) run through ``bash -e -o pipefail`` with the
venv's ``bin`` first on ``PATH`` (where ``expcli`` is) and ``PYTHONPATH`` kept; ``make`` runs
the Makefile's targets with that venv as ``.venv``, already set up (``-o``: nothing is
installed). Python blocks each run in a fresh interpreter reading the block from stdin
(``python -``, which the docs say suits ``ParallelEnv`` code), in the same folder.

What cannot run here is marked in the page itself, visibly, by an HTML comment on the line
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

ROOT = Path(__file__).resolve().parents[1]
CLONE_PARTS = ("Makefile", "pyproject.toml", "constraints.txt", "examples", "sample_configs")
SHELL = {"bash", "sh", "shell", "console"}
PYTHON = {"python", "py"}
NOT_CODE = {"text", "toml", "json", "yaml"}
MARKER = re.compile(
    r'<!--\s*readme-test:\s*skip(?:\s+"(?P<command>[^"]+)")?\s*\((?P<reason>.+)\)\s*-->'
)
REAL_CONSTRAINTS = re.compile(
    r"Ray cluster|remote host|the network|runs the whole test suite, this test included"
)
BLOCK_TIMEOUT_S = 300
NESTED = "EXPCLI_README_TEST"  # set in the blocks' environment: a page that lost its marker
# on `make test` must not start the suite, and these tests, inside themselves again


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    line: int  # of the opening fence, 1-based
    language: str
    code: str
    marker: re.Match[str] | None  # the readme-test comment just before it, if any


def read_blocks(text: str) -> list[Block]:
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


def marker_problems(name: str, text: str) -> list[str]:
    """What is wrong with the blocks and markers of the page ``name`` holding ``text``.

    A block must be labelled with a language this module knows; a marker must stand just
    before a block, name a real constraint, and name a command of its block; a fence must
    start its line (one indented, in a list or an admonition, would not be run).
    """
    problems: list[str] = []
    blocks = read_blocks(text)
    if text.count("readme-test:") != sum(b.marker is not None for b in blocks):
        problems.append(f"{name}: a readme-test marker not just before a block")
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"^\s+```", line):
            problems.append(f"{name}:{number}: an indented fence, which no test runs")
    for block in blocks:
        where = f"{name}:{block.line}"
        if block.language not in SHELL | PYTHON | NOT_CODE:
            problems.append(f"{where}: label the block bash, python or text")
        if block.marker is None:
            continue
        reason = block.marker.group("reason")
        if not REAL_CONSTRAINTS.search(reason):
            problems.append(f"{where}: skipped for {reason!r}, not a real constraint")
        command = block.marker.group("command")
        if command is not None and not any(
            line.startswith(command) for line in block.code.splitlines()
        ):
            problems.append(f"{where}: no line starts with {command!r}")
    return problems


def fresh_clone(folder: Path) -> None:
    """Fill ``folder`` with what a clone's top level gives the pages."""
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
make() {  # the Makefile's targets, with the venv running this test as .venv, already set up
    command make VENV="$README_VENV" -o "$README_VENV/.core" -o "$README_VENV/.dev" "$@"
}
"""


def run_pages(pages: list[tuple[str, str]], folder: Path) -> int:
    """Run every block of ``pages`` (name, text), in order, in ``folder``; the count run.

    The first block that exits non-zero fails the calling test, named by page and line.
    """
    env = _environment()
    ran = 0
    for name, text in pages:
        for block in read_blocks(text):
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
                cwd=folder,
                env=env,
                input=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=BLOCK_TIMEOUT_S,
                check=False,
            )
            assert result.returncode == 0, (
                f"{name}:{block.line} ({block.language}) exited {result.returncode}:\n"
                f"{code}\n--- output (end) ---\n{result.stdout[-4000:]}"
            )
            ran += 1
    return ran
