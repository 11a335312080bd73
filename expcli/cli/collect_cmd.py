"""``expcli collect``: options and config file in, progress bar and summary out.

A thin layer over ``expcli.collect.job.CollectJob``. Ctrl-C or SIGTERM once: stop (an env
stuck in a step is given up after a second), close the envs, save what was collected (a
folder output: the staging area as a last shard) and exit 130. Twice, or before
collecting began: stop at once, writing nothing more, exit 130; the shards a folder or a
spooled run wrote are kept (a spool renamed beside the target), and a line says where.
A run that collected nothing (failed or stopped before its first row) writes nothing, so
an existing file under ``--overwrite`` is kept.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from expcli.cli._authorship_options import (
    AlgorithmNameOption,
    AuthorEmailOption,
    AuthorOption,
    CodePermalinkOption,
    LicenseOption,
    authorship_of,
)
from expcli.cli._collect_options import (
    AsyncOption,
    ChunkStepsOption,
    ChunkTimeoutOption,
    CompressionOption,
    ConfigOption,
    EnvIdArgument,
    EnvKwargsOption,
    EnvsOption,
    EpisodesOption,
    ForceModeOption,
    InfosOption,
    LayoutOption,
    MemorySizeOption,
    ModeOption,
    NumCpusOption,
    OutputOption,
    OverwriteOption,
    PolicyOption,
    QuietOption,
    RayAddressOption,
    RestartOnErrorOption,
    ResumeOption,
    RewardsDtypeOption,
    SeedOption,
    ShardFormatOption,
    ShardSizeOption,
    SpoolOption,
    StepsOption,
    StepTimeoutOption,
    ToOption,
    TrustSettingsOption,
    WrapperOption,
)
from expcli.cli._errors import reports_errors
from expcli.cli._read_options import FramesOption, ImagesOption
from expcli.cli._storage_option import StorageOption, storage_spelled
from expcli.collect.engines import CollectMode
from expcli.envs.modes import AsyncMode
from expcli.errors import ConfigError, EnvError, OutputError, quoted
from expcli.formats.rows import Layout
from expcli.spec import FramesForm, ImagesForm

if TYPE_CHECKING:
    from expcli.cli._collect_view import CollectView, Signals
    from expcli.collect.job import CollectJob, SavedFile
    from expcli.collect.layout_output import LayoutRun
    from expcli.collect.settings import CollectSettings
    from expcli.formats.authorship import Authorship


@reports_errors
def collect_cmd(
    ctx: typer.Context,
    env_id: EnvIdArgument = None,
    envs: EnvsOption = 1,
    steps: StepsOption = None,
    episodes: EpisodesOption = None,
    memory_size: MemorySizeOption = None,
    mode: ModeOption = CollectMode.AUTO,
    force_mode: ForceModeOption = False,
    asynchronous: AsyncOption = AsyncMode.RESTART,
    policy: PolicyOption = "random",
    seed: SeedOption = None,
    env_kwargs: EnvKwargsOption = None,
    ray_address: RayAddressOption = None,
    num_cpus: NumCpusOption = None,
    step_timeout: StepTimeoutOption = "60",  # settings.STEP_TIMEOUT: `expcli --help` stays light
    chunk_steps: ChunkStepsOption = None,
    chunk_timeout: ChunkTimeoutOption = None,
    restart_on_error: RestartOnErrorOption = False,
    infos: InfosOption = False,
    wrapper: WrapperOption = None,
    rewards_dtype: RewardsDtypeOption = "float32",
    output: OutputOption = None,
    layout: LayoutOption = Layout.EXPCLI,
    to: ToOption = None,
    storage: StorageOption = None,
    compression: CompressionOption = None,
    config: ConfigOption = None,
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    shard_size: ShardSizeOption = None,
    shard_format: ShardFormatOption = None,
    spool: SpoolOption = None,
    resume: ResumeOption = None,
    frames: FramesOption = FramesForm.ONCE,
    images: ImagesOption = ImagesForm.PNG,
    trust_settings: TrustSettingsOption = False,
    author: AuthorOption = None,
    author_email: AuthorEmailOption = None,
    algorithm_name: AlgorithmNameOption = None,
    code_permalink: CodePermalinkOption = None,
    license: LicenseOption = None,
) -> None:
    """Collect experience from a Gymnasium env (or EnvPool's) into a dataset file."""
    from expcli.collect.settings import CollectSettings

    settings = CollectSettings(
        env_id=env_id or "",
        envs=envs,
        steps=steps,
        episodes=episodes,
        memory_size=memory_size,
        mode=mode,
        force_mode=force_mode,
        asynchronous=asynchronous,
        policy=policy,
        seed=seed,
        env_kwargs=_json_object(env_kwargs) if env_kwargs is not None else {},
        ray_address=ray_address,
        num_cpus=num_cpus,
        step_timeout=step_timeout,
        chunk_steps=chunk_steps,
        chunk_timeout=chunk_timeout,
        restart_on_error=restart_on_error,
        infos=infos,
        wrappers=list(wrapper or []),
        rewards_dtype=rewards_dtype,
        output=output,
        compression=compression,
        overwrite=overwrite,
        quiet=quiet,
        shard_size=shard_size,
        shard_format=shard_format,
        spool=spool,
        frames=frames,
        license=license,
        images=images,
    )
    who = authorship_of(author, author_email, algorithm_name, code_permalink)
    _collect(ctx, settings, layout, (to, storage), config, resume, trust_settings, who)


def _collect(
    ctx: typer.Context,
    settings: CollectSettings,
    layout: Layout,
    named: tuple[str | None, str | None],
    config: Path | None,
    resume: Path | None,
    trust: bool,
    authorship: Authorship | None = None,
) -> None:
    """Run the settings the command line gave: resumed, with a config file, or in a layout.

    ``named``: ``--to`` and ``--storage`` as given.
    """
    from expcli.collect.job import CollectJob

    to = storage_spelled(layout, *named)
    given = dict(_given_on_command_line(ctx, settings))
    if to is not None and layout is Layout.EXPCLI:
        raise ConfigError(
            "--to names the file format of a --layout (the OUTPUT's suffix names expcli's)"
        )
    if authorship is not None and layout is Layout.EXPCLI:
        raise ConfigError(
            "--author, --author-email, --algorithm-name and --code-permalink are Minari's "
            "metadata: give them with --layout minari"
        )
    if resume is not None:
        if layout is not Layout.EXPCLI:
            raise ConfigError(
                "--layout cannot be given with --resume: resume the folder, then "
                "`expcli convert FOLDER TARGET --layout LAYOUT`"
            )
        if _from_command_line(ctx, "config"):
            given["config"] = config
        return _resume(resume, given, trust=trust, quiet=settings.quiet)
    if trust:
        raise ConfigError("--trust-settings applies to --resume only")
    if config is not None:  # the file's values, where the command line gives none
        settings = settings.with_config(config, given=given)
    if str(settings.output) == "-":
        raise ConfigError("collect cannot write to stdout (-o -); name a file, then convert it")
    if layout is Layout.EXPCLI:
        _run(CollectJob(settings))
    else:
        from expcli.collect.layout_output import layout_run

        _run_in_layout(layout_run(settings, layout, to, authorship))


def _resume(folder: Path, given: Mapping[str, Any], *, trust: bool, quiet: bool) -> None:
    """``--resume FOLDER``: go on with the run the folder records, as ``given`` changes it."""
    from expcli.collect.job import CollectJob
    from expcli.collect.resume import resume_settings, resume_summary
    from expcli.files.output_lock import OutputLock

    # held from the first read of the folder: a writer still at work is named before
    # anything of its folder is judged (the job takes the same lock again)
    with OutputLock(folder):
        settings = resume_settings(folder, given=given, trust=trust, quiet=quiet)
        if not quiet:
            typer.echo(resume_summary(settings), err=True)
        _run(CollectJob(settings))


def _run_in_layout(run: LayoutRun) -> None:
    """Collect into the run's staging folder, then convert it into its layout.

    When the run or the conversion fails, a line says where the rows are and how to finish.
    """
    from expcli.cli._console import err_console
    from expcli.cli.convert_cmd import show_conversion
    from expcli.collect.job import CollectJob

    try:
        _run(CollectJob(run.settings), staged=True)
        show_conversion(run.staging, run.convert, quiet=run.settings.quiet)
    except BaseException:
        kept = run.kept()
        if kept is not None:
            err_console().print(kept, soft_wrap=True, markup=False)
        raise


def _given_on_command_line(
    ctx: typer.Context, options: CollectSettings
) -> Iterator[tuple[str, Any]]:
    """The settings the command line gives (its other options are the defaults)."""
    for field in dataclasses.fields(options):
        if _from_command_line(ctx, _PARAMETERS.get(field.name, field.name)):
            yield field.name, getattr(options, field.name)


def _run(job: CollectJob, *, staged: bool = False) -> None:
    """Run a collect job with progress, signals and the summary; exit as the module says.

    ``staged``: its output is converted after (``--layout``).
    """
    from expcli.cli._collect_view import CollectView

    view = CollectView(job, quiet=job.settings.quiet, staged=staged)
    try:
        with view.signals() as signals:
            with view.starting(), _env_prints_to_stderr():
                job.start()
            view.started()
            with view.progress() as on_progress:
                signals.arm()
                try:
                    with _env_prints_to_stderr():
                        stats = job.run(on_progress)
                except EnvError as error:
                    job.close()
                    try:
                        saved = _save(job, view, signals)
                    except OutputError:  # two failures: say the first, then the save's
                        from rich.markup import escape

                        view.err.print(f"[red]error:[/red] {escape(str(error))}", soft_wrap=True)
                        raise
                    view.info_notes()
                    view.crashed(error, saved)
                    raise typer.Exit(1) from None
                except OutputError as error:  # a shard could not be written (a full disk)
                    job.close()
                    raise job.write_failed(error) from error
                except KeyboardInterrupt:  # a second signal: stop, keep the shards written
                    job.close()
                    where = job.stopped_at_once()
                    if where is not None:
                        view.kept(where)
                    raise
            with _env_prints_to_stderr():
                job.close()
            saved = _save(job, view, signals)
            view.info_notes()
            if saved is None:  # stopped before the first row: an existing file stays as it was
                view.nothing_saved()
                raise typer.Exit(130 if signals.received else 1)
            view.finished(stats, saved)
            if signals.received:
                view.interrupted(saved)
                raise typer.Exit(130)
    finally:
        job.close()


def _env_prints_to_stderr() -> Any:
    """What envs print goes to stderr: stdout is the summary's (with -q, the path alone)."""
    import contextlib
    import sys

    return contextlib.redirect_stdout(sys.stderr)


def _save(job: CollectJob, view: CollectView, signals: Signals) -> SavedFile | None:
    """``job.save()``, with a progress bar while a spooled run is merged into its file.

    A first signal now lets the save finish; a second stops a merge, and the line printed
    says which folder keeps the rows (exit 130).
    """
    from expcli.collect.spool_run import MergeInterrupted

    signals.save()
    with view.merging() as progress:
        try:
            return job.save(progress)
        except MergeInterrupted as stop:
            view.kept(stop.note)
            raise typer.Exit(130) from None
        except KeyboardInterrupt:  # a folder's last shard: the shards before it stay
            where = job.stopped_at_once()
            if where is not None:
                view.kept(where)
            raise


_PARAMETERS = {"wrappers": "wrapper"}  # settings named otherwise than their parameter


def _from_command_line(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    # Compared by name: Typer may bring its own copy of click's ParameterSource enum.
    return getattr(source, "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP")


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"--env-kwargs is not valid JSON: {e}") from e
    if not isinstance(value, dict):
        raise ConfigError(f"--env-kwargs must be a JSON object, got {quoted(text)}")
    return value
