"""The README is the front door: it fits on a screen, and every code block of it runs.

A new user copies the README's blocks one after the other into a fresh clone; so does
``test_every_readme_block_runs_in_order``, in README order, in a fresh folder (the rules,
skip markers included, are in ``tests/markdown_blocks.py``). The docs site's blocks run in
``tests/test_docs_blocks.py``.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest

from tests.markdown_blocks import (
    NESTED,
    ROOT,
    fresh_clone,
    marker_problems,
    read_blocks,
    run_pages,
    runnable,
)

README = ROOT / "README.md"
MOST_LINES = 250  # a front door: the rest is in docs/


def test_the_readme_skips_only_what_cannot_run_here() -> None:
    """Every skip marker names a real constraint, and a skipped command is in its block."""
    assert marker_problems("README.md", README.read_text(encoding="utf-8")) == []


def test_the_readme_fits_on_a_screen_and_names_every_extra() -> None:
    """At most 250 lines, and the install list names each extra of pyproject.toml."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MOST_LINES
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    listed = {
        extra
        for group in re.findall(r"(?:expcli|\.)\[([a-z,-]+)\]", text)
        for extra in group.split(",")
    }
    assert sorted(set(extras) - listed) == []


@pytest.mark.slow
def test_every_readme_block_runs_in_order(tmp_path: Path) -> None:
    """Shell and Python blocks, in README order, in a folder a fresh clone would give."""
    if os.environ.get(NESTED):
        pytest.skip("run by a README block (make test) inside this test")
    fresh_clone(tmp_path)
    ran = run_pages([("README.md", README.read_text(encoding="utf-8"))], tmp_path)
    assert ran >= 6, f"only {ran} blocks ran"


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
    assert [runnable(b) for b in read_blocks(markdown)] == expected


@pytest.mark.parametrize(
    ("markdown", "problem"),
    [
        ("<!-- readme-test: skip (too slow) -->\n```bash\nx\n```\n", "not a real constraint"),
        ('<!-- readme-test: skip "y" (the network) -->\n```bash\nx\n```\n', "no line starts"),
        ("- a list item:\n\n    ```bash\n    x\n    ```\n", "an indented fence"),
        ("```rust\nfn main() {}\n```\n", "label the block"),
        ("<!-- readme-test: skip (the network) -->\n\ntext\n", "not just before a block"),
    ],
)
def test_marker_problems_are_found(markdown: str, problem: str) -> None:
    assert any(problem in found for found in marker_problems("page.md", markdown))
