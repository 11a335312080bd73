"""``make docs`` passes: the site builds with ``--strict``, offline, with its generated pages.

The build runs as ``make docs`` runs it, into a temporary folder, with every proxy pointed
at a closed port: a build that reached for the network (a remote font, social cards) would
fail here as it would on a machine without one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import expcli
from tests.markdown_blocks import ROOT

DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens


@pytest.mark.slow
def test_the_site_builds_strictly_offline(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings_handlers.python")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(ROOT))
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        env[name] = DEAD_PROXY
    env.pop("no_proxy", None)
    env.pop("NO_PROXY", None)
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr

    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    for command in ("collect", "convert", "envs", "inspect", "sample", "merge", "split", "filter"):
        assert f"Usage: expcli {command} [OPTIONS]" in cli, command
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    missing = [name for name in expcli._EXPORTS if f'id="expcli.{name}"' not in api]
    assert missing == []
    assert "fonts.googleapis.com" not in (site / "index.html").read_text(encoding="utf-8")
