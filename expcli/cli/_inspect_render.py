"""Rich renderables for ``expcli inspect``: header, tensor table, episodes, head and checks.

Everything is drawn from a ``Summary``; nothing here computes a statistic.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from rich import box
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from expcli.errors import printable
from expcli.shaping.lineage import describe_edit, edits

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from expcli.summary import Distribution, EpisodeStats, Finding, Summary

__all__ = ["render"]

_BAR_WIDTH = 30
_MAX_CELL = 48  # characters of a value shown in the --head table
_MAX_ROW_VALUES = 64  # --head: a row of more values (or of 2+ dims: an image) is summarised
_STATUS = {
    "passed": "[green]ok[/green]  ",
    "failed": "[red]FAIL[/red]",
    "skipped": "[dim]skip[/dim]",
    "note": "[yellow]note[/yellow]",
}


def render(console: Console, summary: Summary, *, per_env: bool) -> None:
    """Print the whole report of ``summary`` to ``console``."""
    for part in _parts(summary, per_env):
        console.print(part)


def _parts(summary: Summary, per_env: bool) -> list[RenderableType]:
    parts: list[RenderableType] = [_header(summary)]
    if summary.tensors:
        parts.append(_tensors(summary))
    if summary.episodes is not None:
        parts.extend(_episodes(summary.episodes, per_env))
    if summary.head:
        parts.append(_head(summary))
    if summary.checks is not None:
        parts.append(_checks(summary.checks))
    return parts


def _header(summary: Summary) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    meta = summary.metadata
    grid.add_row("path", _safe(summary.path))
    grid.add_row("format", _safe(f"{summary.format}, {summary.layout} layout"))
    grid.add_row("size", _bytes(summary.size_bytes))
    for name, form in summary.frames.items():
        kept = f"{form.kept:,} of {form.cells:,} cells kept ({form.form})"
        grid.add_row("stored once", _safe(f"{name}: {kept}, {_bytes(form.saved_bytes)} saved"))
    if isinstance(meta.get("env_id"), str):
        grid.add_row("env", _safe(meta["env_id"]))
    for key, label in (("observation_space", "observations"), ("action_space", "actions")):
        if key in meta:
            grid.add_row(label, _safe(_space(meta[key])))
    stack = _frame_stack(meta.get("frame_stack"))
    if stack is not None:
        grid.add_row("frame stack", stack)
    for entry in edits(meta.get("lineage")):
        grid.add_row("made by", _safe(describe_edit(entry)))
    if summary.error is None:
        grid.add_row("memory", f"{summary.memory_size:,} rows × {summary.num_envs:,} envs")
        valid = f"{summary.transitions:,} valid transitions"
        if summary.unwritten:
            valid += f" ({summary.unwritten:,} never written, NaN-filled by skrl)"
        grid.add_row("transitions", valid)
        grid.add_row("wrapped", "yes" if summary.wrapped else "no")
        if summary.leftovers:
            n = summary.leftovers
            grid.add_row(
                "leftovers",
                f"[yellow]{n:,} temporary file{'s' if n > 1 else ''} from an interrupted write "
                "(removed by the next --resume)[/yellow]",
            )
    else:
        grid.add_row("error", f"[red]{_safe(summary.error)}[/red]")
    return grid


def _frame_stack(record: Any) -> str | None:
    """The recorded frame stack (``--mode envpool`` on Atari) in words; None when not recorded."""
    if not isinstance(record, dict):
        return None
    intended, stored = record.get("stack_num"), record.get("stored")
    if not (isinstance(intended, int) and isinstance(stored, int)):
        return _safe(json.dumps(record)[:_MAX_CELL])
    if stored == 1 and intended > 1:
        return (
            f"{intended} frames, 1 stored per transition: stack them at sample time "
            f"(ReplayBuffer(..., stack_num={intended}))"
        )
    return f"{intended} frames, {stored} stored in each observation"


def _tensors(summary: Summary) -> Table:
    table = Table(
        title="tensors (valid transitions; NaN/inf counted, not averaged)",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    rows = []
    for t in summary.tensors:
        bad = t.nan or t.inf
        rows.append(
            (
                Text(printable(t.name), style="bold red" if bad else ""),
                t.dtype,
                "×".join(map(str, t.shape[2:])) or "1",
                _number(t.min),
                _number(t.max),
                _number(t.mean),
                _number(t.std),
                Text(f"{t.nan:,}", style="bold red" if t.nan else "dim"),
                Text(f"{t.inf:,}", style="bold red" if t.inf else "dim"),
            )
        )
    # Every tensor is (rows, envs, *feature); the header gives rows x envs.
    columns = ("name", "dtype", "shape", "min", "max", "mean", "std", "nan", "inf")
    for k, column in enumerate(columns):
        if column in ("name", "dtype", "shape"):
            table.add_column(column, overflow="fold", no_wrap=True)
        else:  # numbers are never cut: the names fold first on a narrow terminal
            width = max([len(column), *(len(str(row[k])) for row in rows)])
            table.add_column(column, justify="right", no_wrap=True, min_width=width)
    for row in rows:
        table.add_row(*row)
    return table


def _episodes(stats: EpisodeStats, per_env: bool) -> list[RenderableType]:
    table = Table(title="episodes (complete ones; terminated | truncated per env column)")
    for column in ("", "mean", "std", "min", "median", "max"):
        table.add_column(column, justify="left" if not column else "right")
    for label, dist in (("return", stats.returns), ("length", stats.lengths)):
        table.add_row(label, *_distribution(dist))
    counts = (
        f"[bold]episodes[/bold]  {stats.complete:,} complete "
        f"({stats.terminated:,} terminated, {stats.truncated:,} truncated), "
        f"{stats.incomplete:,} incomplete"
    )
    parts: list[RenderableType] = [counts, table]
    if stats.histogram[1]:
        parts.append(_histogram(stats))
    if per_env:
        parts.append(_per_env(stats))
    return parts


def _histogram(stats: EpisodeStats) -> Table:
    edges, counts = stats.histogram
    table = Table.grid(padding=(0, 1))
    table.add_column(justify="right")
    table.add_column()
    table.add_column(justify="right")
    peak = max(counts) or 1
    for i, count in enumerate(counts):
        width = count * _BAR_WIDTH / peak
        bar = "█" * int(width) + ("▌" if width - int(width) >= 0.5 else "")
        label = (
            f"[{_number(edges[i])}, {_number(edges[i + 1])}{']' if i == len(counts) - 1 else ')'}"
        )
        table.add_row(label, f"[cyan]{bar}[/cyan]", f"{count:,}")
    outer = Table.grid()
    outer.add_row("[bold]returns[/bold]")
    outer.add_row(table)
    return outer


def _per_env(stats: EpisodeStats) -> Table:
    table = Table(title="episodes per env column")
    for column in ("env", "complete", "incomplete", "terminated", "truncated", "return", "length"):
        table.add_column(column, justify="right")
    for env in stats.per_env:
        table.add_row(
            str(env.env),
            f"{env.complete:,}",
            f"{env.incomplete:,}",
            f"{env.terminated:,}",
            f"{env.truncated:,}",
            _number(env.return_mean),
            _number(env.length_mean),
        )
    return table


def _head(summary: Summary) -> Table:
    """One line per transition: its row and env, then each tensor's value."""
    features = {t.name: (t.dtype, tuple(t.shape[2:])) for t in summary.tensors}
    table = Table.grid(padding=(0, 2))
    table.add_column(justify="right", style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for entry in summary.head:
        values = "  ".join(
            f"[dim]{_safe(n)}=[/dim]{_cell(entry.get(n), *feature)}"
            for n, feature in features.items()
        )
        table.add_row(f"{entry['row']}, {entry['env']}", values)
    outer = Table.grid()
    outer.add_row(f"[bold]first {len(summary.head)} transitions[/bold] (row, env; oldest first)")
    outer.add_row(table)
    return outer


def _checks(findings: tuple[Finding, ...]) -> Table:
    failed = sum(f.failed for f in findings)
    title = f"checks: {failed} failed" if failed else "checks: all passed"
    table = Table.grid(padding=(0, 1))
    table.add_column()
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for finding in findings:
        text = _safe(finding.message)
        if finding.rows:
            shown = ", ".join(f"({r}, {e})" for r, e in finding.rows)
            more = finding.count - len(finding.rows)
            text += f"\n  rows (row, env): {shown}" + (f" … and {more:,} more" if more > 0 else "")
        elif finding.episodes:
            shown = ", ".join(f"{i} (env {e}) = {j} (env {f})" for i, e, j, f in finding.episodes)
            more = finding.count - len(finding.episodes)
            text += f"\n  episodes: {shown}" + (f" … and {more:,} more" if more > 0 else "")
        elif finding.count > 1 and finding.failed:
            text += f" ({finding.count:,})"
        table.add_row(_STATUS.get(finding.status, finding.status), finding.check, text)
    outer = Table.grid()
    outer.add_row(f"[bold]{title}[/bold]")
    outer.add_row(table)
    return outer


def _safe(text: str) -> str:
    """Text from the file as rich prints it: markup escaped, invalid UTF-8 as escapes."""
    return escape(printable(text))


def _distribution(dist: Distribution) -> list[str]:
    return [_number(v) for v in (dist.mean, dist.std, dist.min, dist.median, dist.max)]


def _number(value: float) -> str:
    if isinstance(value, int):
        return f"{value:,}" if abs(value) < 10**15 else str(value)
    if math.isnan(value):
        return "—"
    return f"{value:.4g}"


def _cell(value: Any, dtype: str, feature: tuple[int, ...]) -> str:
    """One tensor's value in a transition; an image (or any large row) as its shape and range."""
    if len(feature) >= 2 or math.prod(feature) > _MAX_ROW_VALUES:
        return _safe(_image(value, dtype, feature))
    text = _compact(value[0] if isinstance(value, list) and len(value) == 1 else value)
    return _safe(text if len(text) <= _MAX_CELL else text[: _MAX_CELL - 1] + "…")


def _image(value: Any, dtype: str, feature: tuple[int, ...]) -> str:
    """``⟨84×84×3 uint8, 0..255, mean 37.2⟩``: an image row summarised, never printed."""
    import numpy as np

    shape = "×".join(map(str, feature))
    array = np.asarray(value, dtype=np.float64)
    finite = array[np.isfinite(array)]
    if finite.size == 0:
        return f"⟨{shape} {dtype}⟩"
    lo, hi, mean = (_compact(float(f(finite))) for f in (np.min, np.max, np.mean))
    return f"⟨{shape} {dtype}, {lo}..{hi}, mean {mean}⟩"


def _compact(value: Any) -> str:
    """A row's value in few characters: floats to 4 significant digits, lists bracketed."""
    if isinstance(value, list):
        return "[" + " ".join(_compact(v) for v in value) + "]"
    if isinstance(value, bool):
        return "T" if value else "F"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _space(description: Any) -> str:
    """A one-line description of a space from the metadata."""
    from expcli.summary.space_bounds import space_text

    if isinstance(description, dict) and isinstance(description.get("type"), str):
        return space_text(description)[: 4 * _MAX_CELL]
    return json.dumps(description)[:_MAX_CELL]


def _bytes(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit} ({size:,} bytes)"
    return f"{size:,} bytes"
