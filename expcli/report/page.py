"""The report as one self-contained HTML page: header, player, charts, tensors, checks.

Everything is inline (styles, the player's script, charts as SVG, frames as PNG data
URIs): the page opens from a laptop, an email or a Hub repo and fetches nothing. Text
from the dataset (names, paths, metadata) is escaped wherever it goes, and JSON inside
``<script>`` elements cannot close them. The summary's JSON, ``inspect --json``'s object,
rides along in ``#summary-json``: the numbers shown are its numbers.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from expcli._version import __version__
from expcli.errors import printable
from expcli.report.charts import Chart
from expcli.report.leaves import Kind, Role, ShownLeaf
from expcli.report.player import Played
from expcli.report.strips import Strips
from expcli.shaping.lineage import describe_edit, edits
from expcli.summary.overview import Summary
from expcli.summary.space_bounds import space_text

__all__ = ["Section", "page", "title_of"]

_SCREEN = 420  # pixels of a shown frame's longer side, about (whole multiples of the stored)


@dataclass(frozen=True, slots=True)
class Section:
    """Charts under a heading (``key``: the section's id)."""

    key: str
    title: str
    charts: tuple[Chart, ...]


def page(
    summary: Summary,
    sections: Sequence[Section],
    played: Sequence[Played],
    strips: Sequence[Strips | None],
    leaves: Sequence[ShownLeaf],
    brightness: Mapping[str, float],
) -> str:
    """The whole page."""
    title = title_of(summary)
    body = [
        f"<header><h1>{_e(title)}</h1>",
        f'<p class="sub">{_e(summary.path)}</p></header>',
        _overview(summary),
        _player(played, strips, leaves, brightness),
        *(_section(s) for s in sections if s.charts),
        _tensors(summary),
        _checks(summary),
        f"<footer>Made by expcli {_e(__version__)} (<code>expcli inspect --html</code>): "
        "everything on this page is in this file.</footer>",
    ]
    player_data = {"episodes": [_episode_data(p, s) for p, s in zip(played, strips, strict=True)]}
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_e(title)} · expcli report</title>",
            '<link rel="icon" href="data:,">',
            f"<style>{_asset('report.css')}</style>",
            "</head><body><main>",
            *body,
            "</main>",
            _json_script("summary-json", summary.to_json(per_env=True)),
            _json_script("player-data", player_data),
            f"<script>{_asset('player.js')}</script>",
            "</body></html>",
            "",
        ]
    )


def title_of(summary: Summary) -> str:
    """The env id and the file's name (or the name alone): the page's and the plot's title."""
    env = summary.metadata.get("env_id")
    name = Path(summary.path).name
    return f"{env} · {name}" if isinstance(env, str) else name


def _overview(summary: Summary) -> str:
    meta, stats = summary.metadata, summary.episodes
    cards = [
        _card("transitions", f"{summary.transitions:,}", "transitions"),
        _card("env columns", f"{summary.num_envs:,}", "env-columns"),
    ]
    if stats is not None:
        cards.append(
            _card(
                "complete episodes",
                f"{stats.complete:,}",
                "complete-episodes",
                data=str(stats.complete),
            )
        )
        cards.append(_card("incomplete", f"{stats.incomplete:,}", "incomplete-episodes"))
        if math.isfinite(stats.returns.mean):
            cards.append(_card("mean return", _number(stats.returns.mean), "mean-return"))
        if math.isfinite(stats.lengths.mean):
            cards.append(_card("mean length", _number(stats.lengths.mean), "mean-length"))
    cards.append(_card("size", _bytes(summary.size_bytes), "size"))
    facts: list[tuple[str, str]] = [("format", f"{summary.format}, {summary.layout} layout")]
    if isinstance(meta.get("env_id"), str):
        facts.append(("env", meta["env_id"]))
    for key, label in (("observation_space", "observations"), ("action_space", "actions")):
        if key in meta:
            facts.append((label, space_text(meta[key])))
    facts.append(("memory", f"{summary.memory_size:,} rows × {summary.num_envs:,} env columns"))
    facts.append(("wrapped", "yes (the oldest rows were overwritten)" if summary.wrapped else "no"))
    if stats is not None:
        facts.append(
            (
                "episodes",
                f"{stats.complete:,} complete ({stats.terminated:,} terminated, "
                f"{stats.truncated:,} truncated), {stats.incomplete:,} incomplete",
            )
        )
        for label, dist in (("return", stats.returns), ("length", stats.lengths)):
            if math.isfinite(dist.mean):
                facts.append((label, _distribution(dist)))
    facts += _collected(meta)
    for name, form in summary.frames.items():
        facts.append(
            (
                "stored once",
                f"{name}: {form.kept:,} of {form.cells:,} cells kept ({form.form}), "
                f"{_bytes(form.saved_bytes)} saved",
            )
        )
    for entry in edits(meta.get("lineage")):
        facts.append(("made by", describe_edit(entry)))
    if summary.unwritten:
        facts.append(("unwritten", f"{summary.unwritten:,} transitions never written (skrl)"))
    if summary.leftovers:
        facts.append(("leftovers", f"{summary.leftovers:,} temporary files of a killed write"))
    if summary.error is not None:
        facts.append(("error", summary.error))
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts)
    return (
        '<section id="overview"><h2>Dataset</h2>'
        f'<div class="cards">{"".join(cards)}</div>'
        f'<table class="facts">{rows}</table></section>'
    )


def _collected(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    """How the data was collected: policy, seed, mode, steps, when, with which versions."""
    out = []
    collector = meta.get("collector")
    if isinstance(collector, dict):
        policy = collector.get("policy")
        if isinstance(policy, dict):
            spec = policy.get("spec", policy.get("kind", "?"))
            seed = policy.get("seed")
            out.append(("policy", f"{spec}" + (f" (seed {seed})" if seed is not None else "")))
        elif policy is not None:
            out.append(("policy", str(policy)))
        how = [
            f"{label} {collector[key]}"
            for key, label in (
                ("mode", "mode"),
                ("asynchronous", "async"),
                ("steps", "steps"),
                ("env_steps", "env steps"),
                ("episodes", "episodes"),
            )
            if key in collector
        ]
        if collector.get("interrupted"):
            how.append("interrupted")
        if how:
            out.append(("collected", ", ".join(how)))
    if "seed" in meta:
        out.append(("seed", str(meta["seed"])))
    if isinstance(meta.get("created"), str):
        out.append(("created", meta["created"]))
    versions = meta.get("versions")
    if isinstance(versions, dict) and versions:
        out.append(("versions", ", ".join(f"{k} {v}" for k, v in versions.items())))
    elif isinstance(meta.get("expcli_version"), str):
        out.append(("versions", f"expcli {meta['expcli_version']}"))
    return out


def _player(
    played: Sequence[Played],
    strips: Sequence[Strips | None],
    leaves: Sequence[ShownLeaf],
    brightness: Mapping[str, float],
) -> str:
    head = '<section id="player"><h2>Episodes</h2>'
    if not played:
        return head + '<p class="empty">No complete episode to play.</p></section>'
    tabs = "".join(
        f'<button type="button" role="tab" data-episode="{i}">{_e(_episode_title(p))}</button>'
        for i, p in enumerate(played)
    )
    screens = []
    for leaf in leaves:
        if leaf.kind is Kind.IMAGE and leaf.role is Role.OBSERVATION:
            height = leaf.feature[leaf.view.axes[0]] if leaf.view is not None else 0
            width = leaf.feature[leaf.view.axes[1]] if leaf.view is not None else 0
            scale = max(1, round(_SCREEN / max(1, height, width)))
            style = f"width:{width * scale}px"
            if leaf.name in brightness:
                style += f";filter:brightness({brightness[leaf.name]:.3g})"
            screens.append(
                f'<figure><img class="frame" alt="{_e(leaf.name)}" data-leaf="{_e(leaf.name)}" '
                f'style="{style}"><figcaption>{_e(leaf.name)}</figcaption></figure>'
            )
    strip_html = "".join(
        f'<div class="strip" data-episode="{i}" hidden>{s.svg}<div class="cursor"></div></div>'
        for i, s in enumerate(strips)
        if s is not None
    )
    return (
        head + '<p class="sub">The best, the worst and the median episode by return, and a few at '
        "random. Frames are the stored ones, pixel for pixel (long episodes show every k-th).</p>"
        + f'<div id="episode-tabs" role="tablist">{tabs}</div>'
        + f'<div class="screens">{"".join(screens)}</div>'
        + '<div class="controls"><button type="button" id="play">▶ play</button>'
        + '<input type="range" id="scrubber" min="0" max="0" value="0" aria-label="step">'
        + '<span id="step-label" class="numbers"></span></div>'
        + '<div id="readout"></div>'
        + strip_html
        + "</section>"
    )


def _episode_title(played: Played) -> str:
    chosen = played.chosen
    return (
        f"{' · '.join(chosen.names)}: #{chosen.number} (env {chosen.column}), "
        f"return {_number(chosen.ret)}, {chosen.length:,} steps"
    )


def _episode_data(played: Played, strips: Strips | None) -> dict[str, Any]:
    chosen = played.chosen
    return {
        "names": list(chosen.names),
        "number": chosen.number,
        "env": chosen.column,
        "length": chosen.length,
        "return": _finite(chosen.ret),
        "ended": "terminated" if chosen.terminated else "truncated",
        "steps": played.steps.tolist(),
        "rewards": None if played.rewards is None else _finite_list(played.rewards),
        "series": {s.leaf.name: _finite_list(s.values) for s in played.series},
        "texts": {name: list(texts) for name, texts in played.texts.items()},
        "frames": {
            name: {
                "steps": list(frames.steps),
                "rows": [int(chosen.rows[s]) for s in frames.steps],
                "images": list(frames.images),
                "stride": frames.stride,
                "pixel_step": frames.pixel_step,
            }
            for name, frames in played.frames.items()
        },
        "cursor": None if strips is None else strips.cursor,
    }


def _section(section: Section) -> str:
    figures = "".join(
        f'<figure class="chart{" wide" if c.wide else ""}" id="chart-{_e(c.key)}">'
        f"<figcaption>{_e(c.title)}</figcaption>"
        + (
            f'<div class="beside">{c.svg}'
            f'<img class="mean-frame" alt="mean frame" src="{c.picture}"></div>'
            if c.picture
            else c.svg
        )
        + (f'<p class="note">{_e(c.note)}</p>' if c.note else "")
        + "</figure>"
        for c in section.charts
    )
    return (
        f'<section id="{_e(section.key)}"><h2>{_e(section.title)}</h2>'
        f'<div class="charts">{figures}</div></section>'
    )


def _tensors(summary: Summary) -> str:
    if not summary.tensors:
        return ""
    head = "".join(
        f"<th>{h}</th>"
        for h in ("name", "dtype", "shape", "min", "max", "mean", "std", "nan", "inf")
    )
    rows = []
    for t in summary.tensors:
        shape = "×".join(map(str, t.shape[2:])) or "1"
        cells = [_number(v) for v in (t.min, t.max, t.mean, t.std)]
        nan, inf = (
            f'<td class="bad">{n:,}</td>' if n else f"<td>{n:,}</td>" for n in (t.nan, t.inf)
        )
        rows.append(
            f"<tr><td>{_e(t.name)}</td><td>{_e(t.dtype)}</td><td>{shape}</td>"
            + "".join(f"<td>{c}</td>" for c in cells)
            + f"{nan}{inf}</tr>"
        )
    return (
        '<section id="tensors"><h2>Tensors</h2><p class="sub">Over the valid transitions; '
        "NaN and inf are counted, not averaged.</p>"
        f'<table class="tensors numbers"><tr>{head}</tr>{"".join(rows)}</table></section>'
    )


def _checks(summary: Summary) -> str:
    if summary.checks is None:
        return ""
    items = "".join(
        f'<li class="{_e(f.status)}"><b>{_e(f.status)}</b> {_e(f.check)}: {_e(f.message)}</li>'
        for f in summary.checks
    )
    failed = sum(f.failed for f in summary.checks)
    title = f"Checks: {failed} failed" if failed else "Checks: all passed"
    return f'<section id="checks"><h2>{title}</h2><ul class="checks">{items}</ul></section>'


def _card(label: str, value: str, key: str, data: str | None = None) -> str:
    extra = f' data-count="{_e(data)}"' if data is not None else ""
    return (
        f'<div class="card" id="{key}"{extra}><div class="label">{_e(label)}</div>'
        f'<div class="big numbers">{_e(value)}</div></div>'
    )


def _distribution(dist: Any) -> str:
    return ", ".join(
        f"{name} {_number(getattr(dist, name))}" for name in ("mean", "std", "min", "median", "max")
    )


def _json_script(key: str, value: Any) -> str:
    """JSON in a ``<script>`` element that no value can close (``<``, ``>``, ``&`` escaped)."""
    text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{key}">{text}</script>'


def _asset(name: str) -> str:
    return resources.files("expcli.report").joinpath("assets", name).read_text(encoding="utf-8")


def _e(text: Any) -> str:
    return html.escape(printable(str(text)), quote=True)


def _number(value: float) -> str:
    if isinstance(value, int):
        return f"{value:,}"
    if math.isnan(value):
        return "—"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:.4g}"


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _finite_list(values: np.ndarray) -> Any:
    """Values as JSON lists, NaN and inf as null."""
    array = np.asarray(values, dtype=np.float64)
    listed = np.where(np.isfinite(array), array, np.nan).tolist()
    return _nulls(listed)


def _nulls(value: Any) -> Any:
    if isinstance(value, list):
        return [_nulls(v) for v in value]
    return None if isinstance(value, float) and math.isnan(value) else value


def _bytes(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size:,} bytes"
