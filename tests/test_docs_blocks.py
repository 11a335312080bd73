"""Every code block of the docs site runs, page after page in the site's nav order.

The pages run in one fresh folder, as a reader who follows the site from Getting started
on: a guide uses the files that earlier pages made (``runs/cartpole.h5`` of ``make demo``
above all) instead of making its own, so one collect serves every page. A folder per page
would repeat that set-up on each. The README runs apart, in its own folder
(``tests/test_readme.py``), so that the two run side by side on two workers; ``make demo``
is the one block both run. The rules, skip markers included, are in
``tests/markdown_blocks.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.markdown_blocks import NESTED, ROOT, fresh_clone, marker_problems, run_pages

DOCS = ROOT / "docs"


def nav_pages() -> list[Path]:
    """The pages of ``mkdocs.yml``'s nav, in its order."""
    yaml = pytest.importorskip("yaml")  # PyYAML: a dependency of mkdocs (dev extra)
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def walk(entry: Any) -> list[str]:
        if isinstance(entry, str):
            return [entry]
        if isinstance(entry, list):
            return [page for item in entry for page in walk(item)]
        return [page for value in entry.values() for page in walk(value)]

    return [DOCS / page for page in walk(config["nav"])]


def test_every_page_is_in_the_nav_once() -> None:
    """A page left out of the nav would be left out of the run too."""
    pages = nav_pages()
    assert len(pages) == len(set(pages))
    assert sorted(pages) == sorted(DOCS.rglob("*.md"))


def test_the_pages_skip_only_what_cannot_run_here() -> None:
    problems = [
        problem
        for page in nav_pages()
        for problem in marker_problems(
            str(page.relative_to(ROOT)), page.read_text(encoding="utf-8")
        )
    ]
    assert problems == []


@pytest.mark.slow
def test_every_docs_block_runs_in_nav_order(tmp_path: Path) -> None:
    """Shell and Python blocks of every page, in nav order, in one fresh clone's folder."""
    if os.environ.get(NESTED):
        pytest.skip("run by a docs block (make test) inside this test")
    fresh_clone(tmp_path)
    pages = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in nav_pages()]
    ran = run_pages(pages, tmp_path)
    assert ran >= 20, f"only {ran} blocks ran"
