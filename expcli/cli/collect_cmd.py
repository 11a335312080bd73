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
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from expcli.cli._errors import _report, reports_errors
from expcli.cli._help import choices_shown, shard_choices, storage_choices
from expcli.cli._read_options import FramesOption, completing, typed_choice
from expcli.collect.engines import CollectMode
from expcli.envs.modes import AsyncMode
from expcli.errors import ConfigError, EnvError, OutputError, quoted
from expcli.formats.rows import Layout
from expcli.spec import Compression, FramesForm

if TYPE_CHECKING:
    from expcli.cli._collect_view import CollectView, Signals
    from expcli.collect.job import CollectJob, SavedFile
    from expcli.collect.settings import CollectSettings

_Choice = TypeVar("_Choice", bound=StrEnum)


def _spelling(
    flag: str, choices: type[_Choice], *, any_case: bool = False
) -> Callable[[str], _Choice]:
    """The parser of an option whose values are ``choices``' spellings.

    With ``any_case`` the letter case does not matter (``--async`` has always taken
    ``IDLE``). A value that is none of them is reported as every config error is (one red line, exit
    2), in the words ``CollectSettings`` uses for a config file's value.
    """

    def parse(text: str) -> _Choice:
        from expcli.collect.settings import choose

        try:
            return choose(flag, text.lower() if any_case else text, choices)
        except ConfigError as error:
            _report(str(error), error.exit_code)

    parse.__name__ = "text"  # the option's metavar in help: TEXT, as for any string
    return parse


@reports_errors
def collect_cmd(
    ctx: typer.Context,
    env_id: Annotated[
        str | None,
        typer.Argument(
            help="Gymnasium env id, e.g. CartPole-v1 (see `expcli envs`); with --mode envpool, "
            "EnvPool's id (see `expcli envs --envpool`)."
        ),
    ] = None,
    envs: Annotated[int, typer.Option("--envs", "-n", help="Parallel envs (at most 65,536).")] = 1,
    steps: Annotated[
        int | None,
        typer.Option("--steps", help="Transitions to store in all.", show_default="10000"),
    ] = None,
    episodes: Annotated[
        int | None, typer.Option("--episodes", help="Run until this many episodes complete.")
    ] = None,
    memory_size: Annotated[
        int | None,
        typer.Option(
            "--memory-size",
            help="Memory rows; older rows are overwritten past it.",
            show_default="fits the run",
        ),
    ] = None,
    mode: Annotated[
        CollectMode,
        typer.Option(
            "--mode",
            metavar=choices_shown(CollectMode),
            parser=_spelling("--mode", CollectMode),
            autocompletion=completing(CollectMode),
            help="Where the envs run: auto picks the fastest; dummy in this process; subproc "
            "in worker processes (survives a crashing env); vector and envpool as their own "
            "vector envs; ray and ray-subproc on Ray actors.",
        ),
    ] = CollectMode.AUTO,
    force_mode: Annotated[
        bool,
        typer.Option(
            "--force-mode",
            help="With --mode vector: use it even where its spec differs from gym.make's env.",
        ),
    ] = False,
    asynchronous: Annotated[
        AsyncMode,
        typer.Option(
            "--async",
            metavar=choices_shown(AsyncMode),
            parser=_spelling("--async", AsyncMode, any_case=True),
            autocompletion=completing(AsyncMode),
            help="What an ended env does: none, idle, restart or continue.",
        ),
    ] = AsyncMode.RESTART,
    policy: Annotated[
        str,
        typer.Option(
            "--policy",
            help="random, MODULE:CALLABLE, file.py:CALLABLE, or a TorchScript or torch.export "
            "file (.pt, .pt2).",
        ),
    ] = "random",
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seed of envs and policy (0 or more).")
    ] = None,
    env_kwargs: Annotated[
        str | None,
        typer.Option(
            "--env-kwargs",
            help="JSON object passed to gym.make (to envpool.make with --mode envpool).",
        ),
    ] = None,
    ray_address: Annotated[
        str | None, typer.Option("--ray-address", help="Ray cluster to join (ray modes).")
    ] = None,
    num_cpus: Annotated[
        int | None, typer.Option("--num-cpus", help="Worker processes or Ray actors.")
    ] = None,
    step_timeout: Annotated[
        str,
        typer.Option(
            "--step-timeout",
            metavar="SECONDS",
            help="An env whose step takes longer is reported hung (0 or none: no limit).",
        ),
    ] = "60",  # settings.STEP_TIMEOUT (not imported here: `expcli --help` stays light)
    chunk_steps: Annotated[
        int | None,
        typer.Option(
            "--chunk-steps",
            help="Ray rollout actors: steps per call.",
            show_default="about 50 ms of env work, measured",
        ),
    ] = None,
    chunk_timeout: Annotated[
        str | None,
        typer.Option(
            "--chunk-timeout",
            metavar="SECONDS",
            help="Ray rollout actors: one that sends nothing for this long is reported lost.",
            show_default="--step-timeout",
        ),
    ] = None,
    restart_on_error: Annotated[
        bool,
        typer.Option(
            "--restart-on-error",
            help="Ray rollout actors: replace a lost actor (new recorded seed; its episodes "
            "in flight end truncated) instead of stopping with an error.",
        ),
    ] = False,
    infos: Annotated[
        bool, typer.Option("--infos", help="Also store numeric scalar infos as infos/<key>.")
    ] = False,
    wrapper: Annotated[
        list[str] | None,
        typer.Option(
            "--wrapper",
            help="MODULE:CALLABLE or file.py:CALLABLE applied to each env after gym.make "
            "(repeatable; e.g. minigrid.wrappers:ImgObsWrapper).",
        ),
    ] = None,
    rewards_dtype: Annotated[
        str,
        typer.Option("--rewards-dtype", help="Stored rewards: float32 or float64."),
    ] = "float32",
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Dataset file (.pt, .npz, .csv, .h5, .parquet), or a folder of shards (no "
            "suffix). Missing folders on its path are made.",
            show_default="runs/ENV_ID-TIME.pt",
        ),
    ] = None,
    layout: Annotated[
        Layout,
        typed_choice(
            "--layout",
            "Write for another library (the run goes to a folder OUTPUT-collecting first, "
            "then is converted).",
            Layout.parse,
            Layout,
        ),
    ] = Layout.EXPCLI,
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            metavar="{storage_choices}",
            autocompletion=completing(storage_choices),
            help="With --layout: the layout's storage (minari: hdf5, parquet or arrow; "
            "lerobot: parquet, or video for its images).",
        ),
    ] = None,
    compression: Annotated[
        Compression | None,
        typer.Option(
            "--compression",
            metavar=choices_shown(Compression),
            parser=_spelling("--compression", Compression),
            autocompletion=completing(Compression),
            help="The output's compression ({by_format}); default: none, Parquet's zstd.",
            show_default=False,
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="TOML file of options; the command line wins."),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace the output if it exists.")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress or summary; print the path only.")
    ] = False,
    shard_size: Annotated[
        str | None,
        typer.Option(
            "--shard-size",
            help="Folder output: rows per shard (5000) or bytes (256MB).",
            show_default="128MB",
        ),
    ] = None,
    shard_format: Annotated[
        str | None,
        typer.Option(
            "--shard-format",
            metavar="{shard_choices}",
            autocompletion=completing(shard_choices),
            help="Folder output: the shards' format.",
            show_default="npz",
        ),
    ] = None,
    spool: Annotated[
        bool | None,
        typer.Option(
            "--spool/--no-spool",
            help="File output: stream to shards beside it, then merge (bounded memory).",
            show_default="when the run may exceed 256 MB",
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            metavar="FOLDER",
            help="Continue the run stored in a folder output (after a kill or Ctrl-C).",
        ),
    ] = None,
    frames: FramesOption = FramesForm.ONCE,
    trust_settings: Annotated[
        bool,
        typer.Option(
            "--trust-settings",
            help="With --resume: run the policy, wrappers or env module the folder's "
            "recorded settings name without giving them again.",
        ),
    ] = False,
) -> None:
    """Collect experience from a Gymnasium env (or EnvPool's) into a dataset file."""
    from expcli.collect.job import CollectJob
    from expcli.collect.settings import CollectSettings, read_config

    options = CollectSettings(
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
    )
    given = dict(_given_on_command_line(ctx, options))
    if to is not None and layout is Layout.EXPCLI:
        raise ConfigError("--to picks a layout's storage: give it with --layout")
    if resume is not None:
        if layout is not Layout.EXPCLI:
            raise ConfigError(
                "--layout cannot be given with --resume: resume the folder, then "
                "`expcli convert FOLDER TARGET --layout LAYOUT`"
            )
        from expcli.collect.resume import resume_settings, resume_summary
        from expcli.files.output_lock import OutputLock

        if _from_command_line(ctx, "config"):
            given["config"] = config
        # held from the first read of the folder: a writer still at work is named before
        # anything of its folder is judged (the job takes the same lock again)
        with OutputLock(resume):
            settings = resume_settings(resume, given=given, trust=trust_settings, quiet=quiet)
            if not quiet:
                typer.echo(resume_summary(settings), err=True)
            return _run(CollectJob(settings))
    if trust_settings:
        raise ConfigError("--trust-settings applies to --resume only")
    if config is not None:  # the file's values, where the command line gives none
        from_file = {k: v for k, v in read_config(config).items() if k not in given}
        options = dataclasses.replace(options, **from_file)
        options.env_id = options.env_id or ""
    if str(options.output) == "-":
        raise ConfigError("collect cannot write to stdout (-o -); name a file, then convert it")
    if layout is Layout.EXPCLI:
        _run(CollectJob(options))
    else:
        _collect_in_layout(options, layout, to)


def _collect_in_layout(options: CollectSettings, layout: Layout, to: str | None) -> None:
    """Collect into a folder of shards beside the target, then convert it to ``layout``.

    The folder (``TARGET-collecting``, dots made dashes) is what a collect to a folder is:
    bounded in memory, kept by a kill, resumable. It is removed once the layout is written;
    when the run or the conversion fails, a line says where the rows are and how to finish.
    """
    import shutil

    from expcli.cli._console import err_console
    from expcli.cli.convert_cmd import convert_and_report
    from expcli.collect.job import CollectJob
    from expcli.formats.checked_write import check_target
    from expcli.formats.layouts import layout_format
    from expcli.formats.rows import WritePlan

    if options.output is None:
        raise ConfigError(f"--layout {layout} needs --output, the dataset to write")
    target = Path(options.output)
    fmt = layout_format(layout, target, to)
    check_target(WritePlan(target, fmt, layout, overwrite=options.overwrite))  # before the envs
    staging = target.with_name(target.name.replace(".", "-") + "-collecting")  # no suffix
    finish = (
        f"`expcli collect --resume {staging}` finishes the run; "
        f"`expcli convert {staging} {target} --layout {layout}"
        f"{'' if to is None else f' --to {to}'}` writes the layout"
    )
    if staging.exists():
        raise ConfigError(f"{staging} holds an earlier run: {finish}; or remove it")
    settings = dataclasses.replace(options, output=staging, spool=None, compression=None)
    try:
        _run(CollectJob(settings), staged=True)
        convert_and_report(
            staging, target, layout=layout, to=fmt, overwrite=options.overwrite,
            compression=options.compression, quiet=options.quiet, frames=options.frames,
        )  # fmt: skip
    except BaseException:
        if staging.exists():
            err_console().print(
                f"the rows collected are in {staging}: {finish}", soft_wrap=True, markup=False
            )
        raise
    shutil.rmtree(staging)


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
