"""``expcli inspect --html`` and ``--plot``: the files, the same stdout as without them,
one red line for what is wrong, and the plot checked as a picture against its numbers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("matplotlib")
from PIL import Image

from expcli.cli import app
from expcli.report._svg import COLORS
from expcli.report.plot import DPI
from tests.report.page_data import carried


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About a hundred CartPole episodes of a random policy, in 4 env columns."""
    path = tmp_path_factory.mktemp("cartpole") / "cp.npz"
    args = ["CartPole-v1", "--envs", "4", "--steps", "2000", "--seed", "0", "--mode", "dummy"]
    result = CliRunner().invoke(app, ["collect", *args, "-o", str(path), "-q"])
    assert result.exit_code == 0, result.output
    return path


def test_the_files_and_the_same_output_as_without_them(cartpole: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    plain = runner.invoke(app, ["inspect", str(cartpole), "--json"])
    page, plot = tmp_path / "r.html", tmp_path / "p.png"
    both = runner.invoke(app, ["inspect", str(cartpole), "--json", "--html", str(page),
                               "--plot", str(plot)])  # fmt: skip
    assert both.exit_code == 0, both.output
    assert json.loads(both.stdout) == json.loads(plain.stdout)
    assert f"wrote {page}" in both.stderr and f"wrote {plot}" in both.stderr
    per_env = runner.invoke(app, ["inspect", str(cartpole), "--json", "--per-env"])
    assert carried(page, "summary-json") == json.loads(per_env.stdout)


def test_checks_run_with_the_report_and_are_listed(cartpole: Path, tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["inspect", str(cartpole), "--check", "--html", str(page)])
    assert result.exit_code == 0, result.output
    for table in ("episodes", "tensors", "checks: all passed"):  # the tables, as without --html
        assert table in result.stdout, table
    text = page.read_text()
    assert 'id="checks"' in text and "Checks: all passed" in text


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--html", "r.txt"], "a report is an .html file"),
        (["--plot", "p.jpg"], "use one of .png, .svg, .pdf"),
        (["--html", "r.html", "--no-episodes"], "leave out --no-episodes"),
    ],
)
def test_what_cannot_be_written_is_one_line_and_exit_2(
    cartpole: Path, tmp_path: Path, args: list[str], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["inspect", str(cartpole), *args])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and says in result.stderr
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("missing", ["matplotlib", "PIL"])
def test_without_the_extra_one_line_says_what_to_install(
    cartpole: Path, tmp_path: Path, missing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # import fails as when not installed
    result = CliRunner().invoke(app, ["inspect", str(cartpole), "--html", str(tmp_path / "r.html")])
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert 'pip install "expcli[report]"' in line and "Traceback" not in result.output
    assert not (tmp_path / "r.html").exists()


def _bar_heights(picture: np.ndarray, panel: dict, color: str) -> list[float]:
    """Each bar's height in data units, measured in pixels at the middle of its bin."""
    rgb = np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)])
    x0, y0, x1, y1 = panel["box"]
    (left, right), (bottom, top) = panel["xlim"], panel["ylim"]
    heights = []
    edges = panel["edges"]
    for a, b in zip(edges, edges[1:], strict=False):
        x = int(round(x0 + ((a + b) / 2 - left) / (right - left) * (x1 - x0)))
        column = picture[int(y0) : int(np.ceil(y1)), x, :3].astype(int)
        painted = np.flatnonzero(np.abs(column - rgb).sum(axis=1) < 40)
        pixels = 0.0 if painted.size == 0 else y1 - (int(y0) + painted.min())
        heights.append(pixels / (y1 - y0) * (top - bottom))
    return heights


def test_the_png_is_a_picture_of_its_numbers(cartpole: Path, tmp_path: Path) -> None:
    plot = tmp_path / "p.png"
    runner = CliRunner()
    assert runner.invoke(app, ["inspect", str(cartpole), "--plot", str(plot)]).exit_code == 0
    numbers = json.loads(runner.invoke(app, ["inspect", str(cartpole), "--json"]).stdout)
    image = Image.open(plot)
    assert image.size == (10 * DPI, int(6.5 * DPI)) and image.format == "PNG"
    picture = np.asarray(image.convert("RGB"))
    assert len(np.unique(picture.reshape(-1, 3), axis=0)) > 50  # not one colour
    shown = json.loads(image.info["expcli"])
    episodes = numbers["episodes"]
    assert shown["complete"] == episodes["complete"] > 50
    returns = shown["panels"]["returns"]
    assert returns["counts"] == episodes["histogram"]["counts"]
    assert returns["edges"] == episodes["histogram"]["edges"]
    assert sum(shown["panels"]["lengths"]["counts"]) == episodes["complete"]
    for key, color in (("returns", COLORS[0]), ("lengths", COLORS[1])):
        panel = shown["panels"][key]
        measured = _bar_heights(picture, panel, color)
        scale = (panel["ylim"][1] - panel["ylim"][0]) / (panel["box"][3] - panel["box"][1])
        for got, want in zip(measured, panel["counts"], strict=True):
            assert got == pytest.approx(want, abs=3 * scale), (key, measured, panel["counts"])


@pytest.mark.parametrize(("suffix", "head"), [(".svg", b"<?xml"), (".pdf", b"%PDF")])
def test_svg_and_pdf_by_suffix(cartpole: Path, tmp_path: Path, suffix: str, head: bytes) -> None:
    plot = tmp_path / f"p{suffix}"
    assert CliRunner().invoke(app, ["inspect", str(cartpole), "--plot", str(plot)]).exit_code == 0
    assert plot.read_bytes().startswith(head) and plot.stat().st_size > 5000


def test_a_large_dataset_shows_a_bar_while_the_report_is_made(
    cartpole: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import re

    import expcli.cli.inspect_cmd as inspect_cmd

    monkeypatch.setattr(inspect_cmd, "PROGRESS_MIN_BYTES", 1)
    terminal = {"COLUMNS": "120", "TTY_INTERACTIVE": "1", "TTY_COMPATIBLE": "1", "NO_COLOR": "1"}
    page = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["inspect", str(cartpole), "--html", str(page)], env=terminal)
    assert result.exit_code == 0, result.output
    err = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", result.stderr)
    assert "read" in err and "render" in err and re.search(r"\b\d{1,3}%", err), err[-2000:]
    assert re.search(r"ETA \d+:\d\d:\d\d", err) and page.exists()
