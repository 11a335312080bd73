"""The report in a real browser (Chromium, driven by playwright), every network request
blocked: it loads with no console error and asks for nothing but itself, its charts draw,
it shows ``inspect --json``'s count of complete episodes, its player shows the stored
frames pixel for pixel, and switching episodes, scrubbing and playing work.

One Chromium serves the module. Without playwright or a Chromium (Debian's ``chromium``,
which ``make test`` installs where it can), the tests are skipped with the reason. Run with
``EXPCLI_SCREENSHOT=docs/report.png`` to write the README's screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli import load
from expcli.cli import app
from tests.report.page_data import carried

pytest.importorskip("matplotlib")
pytest.importorskip("ale_py", reason="ale-py (test-envs extra) makes the Pong run shown")
playwright = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (the dev extra brings it)"
)

ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
PONG = ("ale_py:ALE/Pong-v5", "--env-kwargs", '{"max_num_frames_per_episode": 600}')

# Draws the shown frame on a canvas and reads its pixels back (RGBA), with where it is from.
READ_FRAME = """(image) => {
    const canvas = document.createElement("canvas");
    canvas.width = image.naturalWidth;
    canvas.height = image.naturalHeight;
    const context = canvas.getContext("2d");
    context.drawImage(image, 0, 0);
    const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
    let bytes = "";
    for (let i = 0; i < pixels.length; i += 8192) {
        bytes += String.fromCharCode.apply(null, pixels.subarray(i, i + 8192));
    }
    return {width: canvas.width, height: canvas.height, pixels: btoa(bytes),
            row: Number(image.dataset.row), env: Number(image.dataset.env),
            step: Number(image.dataset.step)};
}"""


def _chromium() -> str | None:
    given = os.environ.get("EXPCLI_CHROMIUM")
    if given:
        return given
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _chromium()
    if executable is None:
        pytest.skip("no Chromium to drive: apt-get install chromium (make test does, as root)")
    with playwright.sync_playwright() as driver:
        try:
            launched = driver.chromium.launch(executable_path=executable, args=ARGS)
        except playwright.Error as e:
            pytest.skip(f"Chromium at {executable} does not start: {str(e).splitlines()[0]}")
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def pong(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A short Pong run (2 env columns, episodes of at most 150 steps) and its report."""
    folder = tmp_path_factory.mktemp("pong")
    runner = CliRunner()
    with contextlib.chdir(folder):  # the page names the dataset as given: pong.npz
        args = [*PONG, "--envs", "2", "--steps", "640", "--seed", "3", "--mode", "dummy"]
        collected = runner.invoke(app, ["collect", *args, "-o", "pong.npz", "-q"])
        assert collected.exit_code == 0, collected.output
        made = runner.invoke(app, ["inspect", "pong.npz", "--html", "pong.html"])
        assert made.exit_code == 0, made.output
    return folder / "pong.npz", folder / "pong.html"


@pytest.fixture
def opened(browser: Any, pong: tuple[Path, Path]) -> Iterator[tuple[Any, list[str], list[str]]]:
    """The report loaded with every request but its own blocked: the page, the requests
    made, and the console's errors."""
    page = browser.new_page(viewport={"width": 1100, "height": 1000})
    own = pong[1].resolve().as_uri()
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def only_itself(route: Any) -> None:
        if route.request.url == own:
            route.continue_()
        else:
            route.abort()

    page.route("**/*", only_itself)
    page.goto(own, wait_until="load")
    yield page, requests, errors
    page.close()


def _frame(page: Any) -> dict[str, Any]:
    return dict(page.locator("img.frame").first.evaluate(READ_FRAME))


def _pixels(shown: dict[str, Any]) -> np.ndarray:
    raw = base64.b64decode(shown["pixels"])
    rgba = np.frombuffer(raw, np.uint8).reshape(shown["height"], shown["width"], 4)
    assert (rgba[..., 3] == 255).all()
    return rgba[..., :3]


def test_it_loads_alone_without_errors_and_its_charts_draw(opened: Any, pong: Any) -> None:
    page, requests, errors = opened
    page.wait_for_timeout(200)
    assert requests == [pong[1].resolve().as_uri()] and errors == []
    charts = page.locator("figure.chart svg")
    assert charts.count() >= 6
    for i in range(charts.count()):
        box = charts.nth(i).bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 50
        assert charts.nth(i).locator("path").count() > 3
    counts = carried(pong[1], "summary-json")["episodes"]["histogram"]["counts"]
    assert page.locator('#chart-returns [id^="returns-bin-"]').count() == len(counts)


def test_it_shows_inspect_json_s_count_of_complete_episodes(opened: Any, pong: Any) -> None:
    page = opened[0]
    result = CliRunner().invoke(app, ["inspect", str(pong[0]), "--json"])
    complete = json.loads(result.stdout)["episodes"]["complete"]
    assert complete >= 3
    card = page.locator("#complete-episodes")
    assert card.get_attribute("data-count") == str(complete)
    assert card.locator(".big").inner_text() == f"{complete:,}"


def test_the_player_shows_the_stored_frames_and_switches_episodes(
    opened: Any, pong: tuple[Path, Path]
) -> None:
    page = opened[0]
    observations = load(pong[0]).tensors["observations"]
    shown = _frame(page)
    assert shown["step"] == 0 and (shown["height"], shown["width"]) == (210, 160)
    assert np.array_equal(_pixels(shown), observations[shown["row"], shown["env"]])
    tabs = page.locator("#episode-tabs button")
    assert tabs.count() >= 3
    episodes = carried(pong[1], "player-data")["episodes"]
    for index in (1, 2):
        tabs.nth(index).click()
        assert tabs.nth(index).get_attribute("aria-selected") == "true"
        assert page.locator(f'.strip[data-episode="{index}"]').is_visible()
        assert not page.locator('.strip[data-episode="0"]').is_visible()
        episode = episodes[index]
        shown = _frame(page)
        assert (shown["row"], shown["env"]) == (episode["frames"]["observations"]["rows"][0],
                                                episode["env"])  # fmt: skip
        assert np.array_equal(_pixels(shown), observations[shown["row"], shown["env"]])
        middle = episode["length"] // 2
        page.locator("#scrubber").evaluate(
            "(el, v) => { el.value = v; el.dispatchEvent(new Event('input')); }", middle
        )
        shown = _frame(page)
        assert shown["step"] == middle
        assert np.array_equal(_pixels(shown), observations[shown["row"], shown["env"]])
    page.locator("#scrubber").evaluate(
        "(el) => { el.value = 0; el.dispatchEvent(new Event('input')); }"
    )
    page.locator("#play").click()
    page.wait_for_function("Number(document.getElementById('scrubber').value) > 2")
    page.locator("#play").click()
    assert page.locator("#play").inner_text().endswith("play")
    assert opened[2] == []


def test_a_screenshot_for_the_readme(opened: Any, tmp_path: Path) -> None:
    page = opened[0]
    target = Path(os.environ.get("EXPCLI_SCREENSHOT") or tmp_path / "report.png")
    page.locator("#scrubber").evaluate(
        "(el) => { el.value = 12; el.dispatchEvent(new Event('input')); }"
    )
    page.screenshot(path=str(target), full_page=True,
                    clip={"x": 0, "y": 0, "width": 1100, "height": 1900})  # fmt: skip
    assert target.stat().st_size > 10_000
