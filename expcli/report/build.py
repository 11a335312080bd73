"""``write_report``: a dataset's HTML report and plot, from one pass and one short read.

1. The summary's own pass (``summarize``, the numbers of ``inspect --json``), which also
   keeps each complete episode's place (``episode_records``) and lets the report's
   ``Profiler`` look at every chunk (``watch``).
2. The chosen episodes (``choice``) read back through the format's lazy reader, only their
   cells (``player``).
3. The charts, the strips, the page, written atomically; the plot likewise.

Memory is that of the pass (a chunk, the samples, 37 bytes per complete episode) plus the
frames kept (at most ``player.FRAME_BUDGET`` characters) and matplotlib's.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from expcli.errors import ConfigError
from expcli.files.atomic import atomic_write
from expcli.formats.column_roles import ColumnRoles, DoneMeans, column_roles
from expcli.formats.dataset import Dataset
from expcli.report._svg import house_style, require
from expcli.report.charts import (
    Chart,
    endings_chart,
    leaf_chart,
    lengths_chart,
    per_env_chart,
    returns_chart,
    timeline_chart,
)
from expcli.report.choice import RANDOM_EPISODES, choose_episodes
from expcli.report.leaves import Kind, Role, ShownLeaf, leaves
from expcli.report.page import Section, page
from expcli.report.player import Played, play
from expcli.report.plot import PLOT_SUFFIXES, plot_suffix, write_plot
from expcli.report.profile import Profile, Profiler
from expcli.report.strips import strips
from expcli.summary.overview import Summary, summarize

__all__ = ["HTML_SUFFIXES", "PLOT_SUFFIXES", "Progress", "write_report"]

HTML_SUFFIXES = (".html", ".htm")
"""What ``--html`` writes."""

Progress = Callable[[str, float], None]
"""Called with a phase (``read``, then ``render``) and the fraction of it done."""

_DIM_IMAGE = 64  # a uint8 image leaf whose values stay below this is shown brighter


def write_report(
    source: str | os.PathLike[str],
    *,
    html: str | os.PathLike[str] | None = None,
    plot: str | os.PathLike[str] | None = None,
    num_envs: int | None = None,
    check: bool = False,
    against: Sequence[str | os.PathLike[str]] = (),
    head: int = 0,
    random_episodes: int = RANDOM_EPISODES,
    seed: int = 0,
    progress: Progress | None = None,
    columns: ColumnRoles | Mapping[str, str] | str | None = None,
    done_means: DoneMeans | str | None = None,
) -> Summary:
    """Write a dataset's HTML report (``html``) and/or its plot (``plot``); return its summary.

    Args:
        source: The dataset: any file, folder or layout that ``summarize`` reads.
        html: Where the report goes (``.html``); replaced if it exists.
        plot: Where the plot goes (``.png``, ``.svg`` or ``.pdf``); replaced if it exists.
        num_envs: As ``summarize``.
        check: Run the structural checks too (the report lists them).
        against: As ``summarize``.
        head: As ``summarize``.
        random_episodes: Episodes the player picks at random, besides the best, the worst
            and the median.
        seed: Seeds the random episodes and the samples: the same dataset, the same report.
        progress: Called as the work goes (``Progress``).
        columns: As ``summarize``.
        done_means: As ``summarize``.

    Returns:
        The summary, the same as ``summarize`` gives (``inspect --json``'s numbers).

    Raises:
        ConfigError: Neither ``html`` nor ``plot``, or a suffix that is not theirs.
        MissingDependencyError: matplotlib or Pillow is not installed (``expcli[report]``).
        FormatError, SchemaError, OutputError: As ``summarize`` and the writes.
    """
    if html is None and plot is None:
        raise ConfigError("write_report needs html=, plot= or both")
    if html is not None and Path(html).suffix.lower() not in HTML_SUFFIXES:
        raise ConfigError(f"--html {html}: a report is an .html file")
    if plot is not None:
        plot_suffix(plot)
    require()
    mapping = column_roles(columns, done_means)
    report = progress or (lambda phase, done: None)
    watcher: list[tuple[list[ShownLeaf], Profiler]] = []

    def watch(dataset: Dataset) -> Profiler:
        found = leaves(dataset.tensors, dataset.metadata)
        profiler = Profiler(found, seed=seed)
        watcher.append((found, profiler))
        return profiler

    summary = summarize(
        source,
        head=head,
        check=check,
        against=against,
        num_envs=num_envs,
        progress=lambda done: report("read", done),
        episode_records=True,
        watch=watch if html is not None else None,
        columns=mapping,
    )
    if plot is not None:
        write_plot(summary, plot)
    if html is not None:
        found, profiler = watcher[0] if watcher else ([], Profiler([]))
        profiles = profiler.result()
        read = (num_envs, mapping)
        text = _html(source, summary, found, profiles, read, random_episodes, seed, report)
        with atomic_write(html, "w") as f:
            f.write(text)
        report("render", 1.0)
    return summary


def _html(
    source: str | os.PathLike[str],
    summary: Summary,
    found: list[ShownLeaf],
    profiles: Mapping[str, Profile],
    read: tuple[int | None, ColumnRoles | None],
    random_episodes: int,
    seed: int,
    report: Progress,
) -> str:
    """The page of a dataset whose pass gave ``summary`` and ``profiles``.

    ``read``: how the dataset is read again: ``num_envs`` and the column mapping.
    """
    ranges = {t.name: (float(t.min), float(t.max)) for t in summary.tensors}
    stats = summary.episodes
    records = None if stats is None else stats.records
    with_returns = stats is not None and math.isfinite(stats.returns.mean)
    chosen = []
    if records is not None and summary.error is None:
        chosen = choose_episodes(
            records, summary.memory_size, by_return=with_returns, random=random_episodes, seed=seed
        )
    played: list[Played] = []
    if chosen:
        from expcli.formats import open_lazy

        dataset, close = open_lazy(source, num_envs=read[0], mapping=read[1])
        try:
            played = play(
                dataset.tensors,
                dataset.num_envs,
                chosen,
                found,
                ranges=ranges,
                progress=lambda done: report("render", 0.6 * done),
            )
        finally:
            close()
    with house_style():
        drawn = [strips(p, f"strip-{i}") for i, p in enumerate(played)]
        report("render", 0.7)
        sections = _sections(summary, found, profiles, with_returns)
    report("render", 0.95)
    brightness = _brightness(found, ranges)
    return page(summary, sections, played, drawn, found, brightness)


def _sections(
    summary: Summary, found: list[ShownLeaf], profiles: Mapping[str, Profile], with_returns: bool
) -> list[Section]:
    stats = summary.episodes
    episodes: list[Chart | None] = []
    if stats is not None:
        records = stats.records
        episodes.append(returns_chart(stats))
        if records is not None:
            episodes += [lengths_chart(records), timeline_chart(records, with_returns)]
        episodes += [endings_chart(stats), per_env_chart(stats)]
    by_role: dict[Role, list[Chart | None]] = {role: [] for role in Role}
    for leaf in found:
        if leaf.kind is not Kind.TEXT and leaf.name in profiles:
            by_role[leaf.role].append(leaf_chart(profiles[leaf.name]))
    titled = [
        ("episodes", "Returns and lengths", episodes),
        ("actions", "Actions", by_role[Role.ACTION]),
        ("observations", "Observations", by_role[Role.OBSERVATION]),
        ("rewards", "Rewards", by_role[Role.REWARD]),
        ("other", "Other tensors", by_role[Role.OTHER]),
    ]
    return [
        Section(key, title, tuple(c for c in charts if c is not None))
        for key, title, charts in titled
    ]


def _brightness(
    found: list[ShownLeaf], ranges: Mapping[str, tuple[float, float]]
) -> dict[str, float]:
    """How much brighter to show uint8 image leaves whose values stay low (MiniGrid's 0..10)."""
    out = {}
    for leaf in found:
        high = ranges.get(leaf.name, (0.0, 255.0))[1]
        if leaf.kind is Kind.IMAGE and leaf.dtype.kind == "u" and 0 < high < _DIM_IMAGE:
            out[leaf.name] = min(20.0, 255.0 / high)
    return out
