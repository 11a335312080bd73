"""Compare every ``--help`` page of this tree with those of a git revision (default ``main``).

``python scripts/help_diff.py [REF]`` prints ``expcli --help`` and each command's ``--help``
as a user's terminal shows them (``python -m expcli``, 100 columns, no colour), once from
this tree's ``expcli`` and once from REF's (extracted by ``git archive`` into a temporary
folder: no checkout or worktree is touched), and prints a unified diff of each page that
differs. It exits 0 when every page is the same, 1 otherwise: a refactoring that should
change nothing a user sees shows it with an empty diff.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_TERMINAL = {"COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"}


def help_pages(tree: Path, commands: list[str]) -> dict[str, str]:
    """The help page of the app (key ``""``) and of each command, by the ``expcli`` in ``tree``."""
    env = {**os.environ, **_TERMINAL, "PYTHONPATH": str(tree)}
    pages = {}
    for command in ("", *commands):
        args = [sys.executable, "-m", "expcli", *([command] if command else []), "--help"]
        done = subprocess.run(args, cwd=tree, env=env, capture_output=True, text=True)
        pages[command] = f"{done.stdout}{done.stderr}[exit {done.returncode}]\n"
    return pages


def diff(ref: str, commands: list[str]) -> list[str]:
    """The unified diff of every page that differs between ``ref`` and this tree.

    ``commands``: this tree's, so that one that ``ref`` lacks shows as a page that differs.
    """
    with tempfile.TemporaryDirectory(prefix="expcli-help-") as folder:
        archive = subprocess.run(
            ["git", "archive", ref, "expcli"], cwd=ROOT, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        before = help_pages(Path(folder), commands)
    after = help_pages(ROOT, commands)
    lines: list[str] = []
    for command, page in after.items():
        name = f"expcli {command} --help".replace("  ", " ")
        lines += difflib.unified_diff(
            before.get(command, "").splitlines(keepends=True),
            page.splitlines(keepends=True),
            fromfile=f"{ref}: {name}",
            tofile=f"this tree: {name}",
        )
    return lines


def main() -> int:
    """Print the diff; 0 when there is none."""
    ref = sys.argv[1] if len(sys.argv) > 1 else "main"
    sys.path.insert(0, str(ROOT))
    from expcli.cli.app import COMMANDS

    lines = diff(ref, list(COMMANDS))
    sys.stdout.writelines(lines)
    verdict = "some differ" if lines else "all the same"
    print(f"{1 + len(COMMANDS)} help pages compared with {ref}: {verdict}")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
