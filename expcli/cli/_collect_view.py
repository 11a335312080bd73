"""What ``expcli collect`` shows: the chosen mode, a live progress bar, the summary table.

Progress and messages go to stderr, the summary table to stdout (``--quiet``: the output
path alone). Signal handling lives here too, because it is about the terminal: SIGTERM is
taken as Ctrl-C; the first asks the job to stop and save, the second (or one before the
collection began) raises ``KeyboardInterrupt`` at once. Both end in exit code 130.
"""

from __future__ import annotations

import math
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from expcli.cli._console import ProgressLog, bar_columns, err_console, out_console
from expcli.collect.engines import ENGINES, CollectMode
from expcli.collect.env_modes import SHORT_RUN

if TYPE_CHECKING:
    from expcli.collect import CollectStats, Progress
    from expcli.collect.job import CollectJob, SavedFile
    from expcli.errors import EnvError

__all__ = ["CollectView", "Signals"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Signals:
    """What SIGINT and SIGTERM do during ``expcli collect``.

    While collecting, the first stops the job and the second aborts; while saving (a
    spooled run's merge), the first is noted and the save goes on, the second aborts
    (a merge's rows are then kept in a folder, which the command names); before
    collecting (envs starting), any aborts.
    """

    def __init__(self, job: CollectJob, on_first: Callable[[int, bool], None]) -> None:
        self.job = job
        self.on_first = on_first
        self.received = 0
        self.collecting = False
        self.saving = False
        self.installed = False

    def arm(self) -> None:
        """Collecting begins: the first signal now stops and saves.

        The handlers are set again, for starting Ray puts its own C-level SIGTERM handler over them.
        """
        self.collecting = True
        self._install()

    def save(self) -> None:
        """Saving begins: a first signal lets it finish.

        The handlers are set again: closing the envs (Ray's shutdown) may have replaced them,
        and a SIGTERM would then end the process in the middle of the merge.
        """
        self.collecting = self.saving = True
        self._install()

    def _install(self) -> None:
        if self.installed:
            for sig in _SIGNALS:
                signal.signal(sig, self.handle)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        del frame
        if self.received or not self.collecting:
            raise KeyboardInterrupt
        self.received = signum
        self.job.stop()
        self.on_first(signum, self.saving)


class CollectView:
    """Terminal output of one collect run."""

    def __init__(self, job: CollectJob, *, quiet: bool, staged: bool = False) -> None:
        self.job = job
        self.quiet = quiet
        self.staged = staged  # the output is converted after: quiet prints its target only
        self.err = err_console()
        self.out = out_console()

    def _say(self, text: str) -> None:
        if not self.quiet:
            self.err.print(text, highlight=False, soft_wrap=True)

    @contextmanager
    def starting(self) -> Iterator[None]:
        """A spinner while the envs start (and ``auto`` probes); it leaves no line behind."""
        s = self.job.settings
        if self.quiet:
            yield
            return
        engine = ENGINES.get(s.mode)  # None: auto
        what = "probing modes" if engine is None else f"starting {s.mode} mode"
        if (
            engine is not None
            and engine.uses_ray
            and not (s.ray_address or os.environ.get("RAY_ADDRESS"))
        ):
            self._say("no Ray cluster given (--ray-address, RAY_ADDRESS): starting a local Ray")
        with self.err.status(f"{escape(s.env_id)} x {s.envs}: {what}…"):
            yield

    def started(self) -> None:
        job = self.job
        s = job.settings
        how = ""
        timed = [p for p in job.probes if p.skipped is None]
        untried = [p.mode for p in job.probes if p.skipped == SHORT_RUN]
        if len(timed) > 1:
            tried = ", ".join(f"{p.mode} {_rate(p.steps_per_second)}" for p in timed)
            how = f" (auto: fastest of {tried} steps/s)"
        elif untried:
            rate = _rate(timed[0].steps_per_second)
            how = f" (auto: {rate} steps/s; the run is too short to try {', '.join(untried)})"
        elif s.mode is CollectMode.AUTO:
            how = " (auto: the only candidate)"
        # The path on a line of its own: a long one does not break the sentence mid-path.
        self._say(f"collecting {escape(s.env_id)} x {s.envs} in [bold]{job.mode}[/bold] mode{how}")
        self._say(f"  into {escape(str(job.output))}")
        for p in job.probes:
            if p.skipped is not None and p.skipped != SHORT_RUN:
                self._say(f"auto: skipped {p.mode}: {escape(p.skipped)}")
        if job.mode_differences:
            self.err.print(
                f"[yellow]--force-mode: the vector env of {escape(s.env_id)} is not the env "
                f"gym.make builds: {escape('; '.join(job.mode_differences))}[/yellow]",
                highlight=False,
                soft_wrap=True,
            )

    @contextmanager
    def signals(self) -> Iterator[Signals]:
        """Install the SIGINT/SIGTERM handlers for the duration (main thread only)."""
        handler = Signals(self.job, self._first_signal)
        if threading.current_thread() is not threading.main_thread():
            yield handler
            return
        previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
        for sig in previous:
            signal.signal(sig, handler.handle)
        handler.installed = True
        try:
            yield handler
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)

    def _first_signal(self, signum: int, saving: bool) -> None:
        name = signal.Signals(signum).name
        spooled = self.job.spool is not None
        if saving:
            what = "finishing the file" if spooled else "finishing the save"
        else:
            what = "stopping and saving what was collected"
        if saving and spooled:
            again = "again to stop at once, keeping the rows in a folder beside the file"
        elif spooled or self.job.to_folder:
            again = "again to stop at once, keeping only the shards written"
        else:
            again = "again to stop at once without saving"
        self.err.print(f"[yellow]{name}: {what} ({again})[/yellow]", highlight=False)

    def kept(self, note: str) -> None:
        """A second signal stopped a merge: say where the collected rows are."""
        self.err.print(f"[yellow]interrupted: {escape(note)}[/yellow]", highlight=False)

    @contextmanager
    def progress(self) -> Iterator[Callable[[Progress], None] | None]:
        """A rich progress bar on stderr, fed by the collector's callback.

        When stderr is not a terminal (a log), a plain line every ``progress_seconds()``
        instead: steps, rate, episodes, return, elapsed and ETA, never cut to a width.
        """
        if self.quiet:
            yield None
            return
        if not self.err.is_terminal:
            with self._progress_log() as update:
                yield update
            return
        from rich.progress import Progress as Bar
        from rich.progress import TextColumn

        columns = bar_columns(
            TextColumn("{task.fields[steps]} steps"),
            TextColumn("{task.fields[rate]}/s"),
            TextColumn("{task.fields[episodes]} episodes"),
            TextColumn("return {task.fields[ret]}"),
        )
        s = self.job.settings
        total = float(s.steps if s.steps is not None else s.episodes or 1)
        with Bar(*columns, console=self.err, transient=False) as bar:
            task = bar.add_task("collect", total=total, steps="0", rate="-", episodes="0", ret="-")

            def update(p: Progress) -> None:
                done = p.steps if p.target_steps is not None else p.episodes
                bar.update(
                    task,
                    completed=min(float(done), total),
                    steps=f"{p.steps:,}",
                    rate=_rate(p.steps / p.elapsed if p.elapsed > 0 else math.nan),
                    episodes=f"{p.episodes:,}",
                    ret=_num(p.recent_mean_return),
                )

            yield update

    @contextmanager
    def _progress_log(self) -> Iterator[Callable[[Progress], None]]:
        s = self.job.settings
        target = s.steps if s.steps is not None else s.episodes
        unit = "steps" if s.steps is not None else "episodes"
        log = ProgressLog("collect")

        def update(p: Progress) -> None:
            done = p.steps if p.target_steps is not None else p.episodes
            rate = _rate(p.steps / p.elapsed if p.elapsed > 0 else math.nan)
            of = f" of {target:,}" if target else ""
            steps = f"{p.steps:,}{of if unit == 'steps' else ''} steps"
            episodes = f"{p.episodes:,}{of if unit == 'episodes' else ''} episodes"
            details = f"{steps}, {rate} steps/s, {episodes}, return {_num(p.recent_mean_return)}"
            log.update(done / target if target else None, details)

        try:
            yield update
        finally:
            log.close()

    @contextmanager
    def merging(self) -> Iterator[Callable[[str, float], None] | None]:
        """A progress bar for merging a spooled run into its file (none for other runs)."""
        if self.quiet or self.job.spool is None:
            yield None
            return
        if not self.err.is_terminal:
            log = ProgressLog("writing the file")
            try:
                yield lambda phase, done: log.update(done, "") if phase == "write" else None
            finally:
                log.close()
            return
        from rich.progress import Progress as Bar

        with Bar(*bar_columns(), console=self.err, transient=True) as bar:
            task = bar.add_task("write", total=1.0)

            def update(phase: str, done: float) -> None:
                if phase == "write":
                    bar.update(task, completed=done)

            yield update

    def crashed(self, error: EnvError, saved: SavedFile | None) -> None:
        if saved is None:
            what = f"nothing was collected before the failure: {self._not_written()}"
        else:
            what = (
                f"saved the {saved.transitions:,} transitions{self._of_collected(saved)} "
                f"collected before the failure to {escape(str(saved.path))}"
            )
        self.err.print(
            f"[red]error:[/red] {escape(str(error))}\n{what}", highlight=False, soft_wrap=True
        )

    def info_notes(self) -> None:
        """``--infos``: one line naming the info keys skipped (or stored changed), and why."""
        notes = self.job.info_notes()
        if notes:
            text = "; ".join(f"{key} {why}" for key, why in notes.items())
            self.err.print(
                f"[yellow]--infos: {escape(text)}[/yellow]",
                highlight=False,
                soft_wrap=True,
            )

    def interrupted(self, saved: SavedFile) -> None:
        self.err.print(
            f"[yellow]interrupted: saved {saved.transitions:,} transitions"
            f"{self._of_collected(saved)} to {escape(str(saved.path))}[/yellow]",
            highlight=False,
            soft_wrap=True,
        )

    def nothing_saved(self) -> None:
        """The run stopped before its first row: say that no file was written."""
        self.err.print(
            f"[yellow]nothing was collected: {self._not_written()}[/yellow]",
            highlight=False,
            soft_wrap=True,
        )

    def _not_written(self) -> str:
        output = self.job.output
        if output.exists():
            return f"{escape(str(output))} was left as it was"
        return f"no file was written ({escape(str(output))})"

    def _of_collected(self, saved: SavedFile) -> str:
        """`` (the newest of N collected)`` when the memory wrapped, else nothing.

        A resumed folder run collected its earlier segments' transitions too (``before``).
        """
        stats = self.job.stats
        if stats is None:
            return ""
        collected = self.job.before[0] + stats.steps
        if saved.transitions >= collected:
            return ""
        return f" (the newest of {collected:,} collected)"

    def finished(self, stats: CollectStats, saved: SavedFile) -> None:
        if self.quiet:
            if not self.staged:
                self.out.print(str(saved.path), highlight=False, soft_wrap=True)
            return
        from rich.table import Table

        e = stats.episodes
        table = Table(
            title=f"{escape(self.job.settings.env_id)}: {self.job.mode} mode", title_justify="left"
        )
        table.add_column("", style="bold")
        table.add_column("value", justify="right")
        steps = f"{stats.steps:,}"
        episodes = f"{e.complete:,} complete, {e.incomplete:,} incomplete"
        resumed = self.job.before[0]
        if resumed:  # --resume: the folder holds the earlier segments too
            steps = f"{stats.steps:,} collected now; {saved.transitions:,} in the folder"
        elif saved.transitions != stats.steps or saved.episodes != e.complete:
            # The memory wrapped (--memory-size): the file keeps only the newest rows.
            steps = f"{stats.steps:,} collected; the file keeps the newest {saved.transitions:,}"
            episodes += f"; {saved.episodes:,} complete in the file"
        rows: list[tuple[str, Any]] = [
            ("steps", steps),
            ("episodes", episodes),
            ("ended by", f"{e.terminated:,} terminated, {e.truncated:,} truncated"),
            ("return", _spread(e.returns)),
            ("length", _spread(e.lengths)),
            ("wall time", f"{stats.elapsed:.2f} s"),
            ("steps/s", _rate(stats.steps_per_second)),
            ("output", f"{saved.path} ({_size(saved.size_bytes)})"),
        ]
        rollout = getattr(self.job.collector, "stepper", None)
        restarts = getattr(rollout, "restarts", None)
        if isinstance(restarts, list):
            rows.insert(2, ("actors restarted", f"{len(restarts):,}"))
        if stats.dropped:
            rows.insert(2, ("not stored", f"{stats.dropped:,} (rows left incomplete at the end)"))
        for name, value in rows:
            table.add_row(name, escape(str(value)))
        self.out.print(table)


def _spread(s: Any) -> str:
    if math.isnan(s.mean):
        return "-"
    return f"mean {_num(s.mean)}  std {_num(s.std)}  min {_num(s.min)}  max {_num(s.max)}"


def _num(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.3e}"


def _rate(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"


def _size(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"
