"""A collect run written in another library's layout: a folder of shards first, then converted.

The run goes to a staging folder beside the target (``TARGET-collecting``, dots made
dashes), which is what a collect to a folder is: bounded in memory, kept by a kill,
resumable. Once the run is saved, the folder is converted into the layout and removed.
When the run or the conversion fails, the folder stays, and ``LayoutRun.kept`` says where
the rows are and how to finish (``expcli collect --resume``, then ``expcli convert``).

``layout_run`` checks the target before any env is built; ``collect_in_layout`` is the
whole run from Python. ``expcli collect --layout`` runs the same ``LayoutRun`` with its
progress bars and summary.
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from expcli.collect.settings import CollectSettings
from expcli.errors import ConfigError, ExpcliError
from expcli.formats.authorship import Authorship
from expcli.formats.rows import Layout, WritePlan

if TYPE_CHECKING:
    from expcli.conversion import ConvertResult, Progress

__all__ = ["LayoutRun", "collect_in_layout", "layout_run"]


@dataclass(frozen=True, slots=True)
class LayoutRun:
    """A collect run into a foreign layout, its target checked (``layout_run`` makes it).

    Attributes:
        settings: The staging run's: the staging folder as output, no spool, no compression.
        staging: The folder the run is collected into, beside the target.
        plan: The layout's write: target, format or storage, layout, compression, frames,
            overwrite.
        to: The storage (``--storage``) or file format (``--to``) given (None: the layout's
            own), for the command that finishes a kept run.
    """

    settings: CollectSettings
    staging: Path
    plan: WritePlan
    to: str | None = None

    @property
    def finish(self) -> str:
        """The commands that finish a run whose rows stay in the staging folder."""
        from expcli.formats.table import layout_named

        flag = "--to" if layout_named(self.plan.layout).formats else "--storage"
        to = "" if self.to is None else f" {flag} {self.to}"
        to += _authorship_options(self.plan.authorship)
        return (
            f"`expcli collect --resume {self.staging}` finishes the run; "
            f"`expcli convert {self.staging} {self.plan.target} --layout {self.plan.layout}{to}` "
            "writes the layout"
        )

    def kept(self) -> str | None:
        """Where the rows collected are and how to finish, while the staging folder stays.

        A staging folder that holds no row (the run stopped before its first) is removed, so
        that the next run is not refused for it.
        """
        if not self.staging.exists():
            return None
        if _holds_no_rows(self.staging):
            shutil.rmtree(self.staging)
            return None
        return f"the rows collected are in {self.staging}: {self.finish}"

    def convert(self, progress: Progress | None = None) -> ConvertResult:
        """Convert the staging folder into the layout (the plan), then remove the folder.

        Raises:
            ExpcliError: The layout could not be written; the staging folder stays.
        """
        from expcli.conversion import convert_planned

        result = convert_planned(self.staging, self.plan, progress=progress)
        shutil.rmtree(self.staging)
        return result


def _authorship_options(authorship: Authorship | None) -> str:
    """The options of ``convert`` that give ``authorship`` again (`` --author 'A B'``...)."""
    import shlex

    if authorship is None:
        return ""
    given = [("--author", name) for name in authorship.authors]
    given += [("--author-email", email) for email in authorship.author_emails]
    given += [
        (option, value)
        for option, value in (
            ("--algorithm-name", authorship.algorithm_name),
            ("--code-permalink", authorship.code_permalink),
        )
        if value is not None
    ]
    return "".join(f" {option} {shlex.quote(value)}" for option, value in given)


def _holds_no_rows(folder: Path) -> bool:
    """Whether a staging folder holds its manifest (and card) and no shard: nothing to keep."""
    from expcli.formats.sharded import CARD, MANIFEST, Manifest

    try:
        if Manifest.load(folder).rows:
            return False
    except (ExpcliError, OSError):
        return False  # whatever it is, it is the user's to look at
    return all(path.name in (MANIFEST, CARD) for path in folder.iterdir())


def layout_run(
    settings: CollectSettings,
    layout: Layout,
    to: str | None = None,
    authorship: Authorship | None = None,
) -> LayoutRun:
    """The run of ``settings`` into ``layout`` (``to``: its storage), checked before any env.

    ``authorship``: who made the data and with what, for a layout that keeps it (Minari;
    its algorithm defaults to the policy's spec, which the run's metadata records).

    Raises:
        ConfigError: No output, a format or storage the layout does not write, a target
            the layout refuses (a Minari folder not named as its id), an ``authorship`` it
            does not keep, or a staging folder left by an earlier run (the message says how
            to finish that one).
        OutputExistsError: The target exists and ``settings.overwrite`` is false.
    """
    from expcli.formats.checked_write import check_target
    from expcli.formats.layouts import layout_format

    if settings.output is None:
        raise ConfigError(f"--layout {layout} needs --output, the dataset to write")
    target = Path(settings.output)
    fmt = layout_format(layout, target, to)
    compression = None if settings.compression is None else str(settings.compression)
    plan = WritePlan(
        target,
        fmt,
        layout=layout,
        compression=compression,
        frames=settings.frames,
        overwrite=settings.overwrite,
        authorship=authorship,
        license=settings.license,
    )
    check_target(plan)
    staging = target.with_name(target.name.replace(".", "-") + "-collecting")  # no suffix
    staged = dataclasses.replace(settings, output=staging, spool=None, compression=None)
    run = LayoutRun(staged, staging, plan, to)
    if staging.exists():
        raise ConfigError(f"{staging} holds an earlier run: {run.finish}; or remove it")
    return run


def collect_in_layout(
    settings: CollectSettings,
    layout: Layout,
    to: str | None = None,
    authorship: Authorship | None = None,
) -> ConvertResult | None:
    """Collect as ``settings`` say into ``layout`` (``to``: its storage): staged, then converted.

    ``authorship``: as ``layout_run`` takes it.

    Returns:
        What the conversion did; None when nothing was collected (the run was stopped
        before its first row).

    Raises:
        ConfigError, OutputExistsError: As ``layout_run``, before any env is built.
        ExpcliError: The run or the conversion failed; the rows collected stay in the
            staging folder, and a note on the error says where and how to finish.
    """
    from expcli.collect.job import CollectJob

    run = layout_run(settings, layout, to, authorship)
    job = CollectJob(run.settings)
    try:
        job.start()
        try:
            job.run()
        finally:
            job.close()
            saved = job.save()
        if saved is None:
            run.kept()  # removes a staging folder that holds nothing
            return None
        return run.convert()
    except BaseException as error:
        note = run.kept()
        if note is not None:
            error.add_note(note)
        raise
