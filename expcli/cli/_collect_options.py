"""The options of ``expcli collect``, each declared once as an ``Annotated`` type.

``collect_cmd`` names them in its signature, in the order its help lists them; their help
texts, metavars, parsers and completers are here. A value that is none of a choice option's
spellings is reported as every config error is (one red line, exit 2), in the words
``CollectSettings`` uses for a config file's value.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from expcli.cli._errors import _report
from expcli.cli._help import choices_shown, layout_file_formats, shard_choices
from expcli.cli._read_options import completing, typed_choice
from expcli.collect.engines import CollectMode
from expcli.envs.modes import AsyncMode
from expcli.errors import ConfigError
from expcli.formats.rows import Layout
from expcli.spec import Compression

__all__ = [
    "AsyncOption",
    "ChunkStepsOption",
    "ChunkTimeoutOption",
    "CompressionOption",
    "ConfigOption",
    "EnvIdArgument",
    "EnvKwargsOption",
    "EnvsOption",
    "EpisodesOption",
    "ForceModeOption",
    "InfosOption",
    "LayoutOption",
    "MemorySizeOption",
    "ModeOption",
    "NumCpusOption",
    "OutputOption",
    "OverwriteOption",
    "PolicyOption",
    "QuietOption",
    "RayAddressOption",
    "RestartOnErrorOption",
    "ResumeOption",
    "RewardsDtypeOption",
    "SeedOption",
    "ShardFormatOption",
    "ShardSizeOption",
    "SpoolOption",
    "StepTimeoutOption",
    "StepsOption",
    "ToOption",
    "TrustSettingsOption",
    "WrapperOption",
]

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


EnvIdArgument = Annotated[
    str | None,
    typer.Argument(
        help="Gymnasium env id, e.g. CartPole-v1 (see `expcli envs`); with --mode envpool, "
        "EnvPool's id (see `expcli envs --envpool`)."
    ),
]
EnvsOption = Annotated[int, typer.Option("--envs", "-n", help="Parallel envs (at most 65,536).")]
StepsOption = Annotated[
    int | None,
    typer.Option("--steps", help="Transitions to store in all.", show_default="10000"),
]
EpisodesOption = Annotated[
    int | None, typer.Option("--episodes", help="Run until this many episodes complete.")
]
MemorySizeOption = Annotated[
    int | None,
    typer.Option(
        "--memory-size",
        help="Memory rows; older rows are overwritten past it.",
        show_default="fits the run",
    ),
]
ModeOption = Annotated[
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
]
ForceModeOption = Annotated[
    bool,
    typer.Option(
        "--force-mode",
        help="With --mode vector: use it even where its spec differs from gym.make's env.",
    ),
]
AsyncOption = Annotated[
    AsyncMode,
    typer.Option(
        "--async",
        metavar=choices_shown(AsyncMode),
        parser=_spelling("--async", AsyncMode, any_case=True),
        autocompletion=completing(AsyncMode),
        help="What an ended env does: none, idle, restart or continue.",
    ),
]
PolicyOption = Annotated[
    str,
    typer.Option(
        "--policy",
        help="random, MODULE:CALLABLE, file.py:CALLABLE, or a TorchScript or torch.export "
        "file (.pt, .pt2).",
    ),
]
SeedOption = Annotated[
    int | None, typer.Option("--seed", help="Seed of envs and policy (0 or more).")
]
EnvKwargsOption = Annotated[
    str | None,
    typer.Option(
        "--env-kwargs",
        help="JSON object passed to gym.make (to envpool.make with --mode envpool).",
    ),
]
RayAddressOption = Annotated[
    str | None, typer.Option("--ray-address", help="Ray cluster to join (ray modes).")
]
NumCpusOption = Annotated[
    int | None, typer.Option("--num-cpus", help="Worker processes or Ray actors.")
]
StepTimeoutOption = Annotated[
    str,
    typer.Option(
        "--step-timeout",
        metavar="SECONDS",
        help="An env whose step takes longer is reported hung (0 or none: no limit).",
    ),
]
ChunkStepsOption = Annotated[
    int | None,
    typer.Option(
        "--chunk-steps",
        help="Ray rollout actors: steps per call.",
        show_default="about 50 ms of env work, measured",
    ),
]
ChunkTimeoutOption = Annotated[
    str | None,
    typer.Option(
        "--chunk-timeout",
        metavar="SECONDS",
        help="Ray rollout actors: one that sends nothing for this long is reported lost.",
        show_default="--step-timeout",
    ),
]
RestartOnErrorOption = Annotated[
    bool,
    typer.Option(
        "--restart-on-error",
        help="Ray rollout actors: replace a lost actor (new recorded seed; its episodes "
        "in flight end truncated) instead of stopping with an error.",
    ),
]
InfosOption = Annotated[
    bool, typer.Option("--infos", help="Also store numeric scalar infos as infos/<key>.")
]
WrapperOption = Annotated[
    list[str] | None,
    typer.Option(
        "--wrapper",
        help="MODULE:CALLABLE or file.py:CALLABLE applied to each env after gym.make "
        "(repeatable; e.g. minigrid.wrappers:ImgObsWrapper).",
    ),
]
RewardsDtypeOption = Annotated[
    str,
    typer.Option("--rewards-dtype", help="Stored rewards: float32 or float64."),
]
OutputOption = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Dataset file (.pt, .npz, .csv, .h5, .parquet), or a folder of shards (no "
        "suffix). Missing folders on its path are made.",
        show_default="runs/ENV_ID-TIME.pt",
    ),
]
LayoutOption = Annotated[
    Layout,
    typed_choice(
        "--layout",
        "Write for another library (the run goes to a folder OUTPUT-collecting first, "
        "then is converted).",
        Layout.parse,
        Layout,
    ),
]
ToOption = Annotated[
    str | None,
    typer.Option(
        "--to",
        metavar="{layout_file_choices}",
        autocompletion=completing(layout_file_formats),
        help="With --layout: the format of the file a layout writes (skrl: pt, npz or csv); "
        "a layout kept in a folder takes --storage.",
        show_default=False,
    ),
]
CompressionOption = Annotated[
    Compression | None,
    typer.Option(
        "--compression",
        metavar=choices_shown(Compression),
        parser=_spelling("--compression", Compression),
        autocompletion=completing(Compression),
        help="The output's compression ({by_format}); default: none, Parquet's zstd.",
        show_default=False,
    ),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", help="TOML file of options; the command line wins."),
]
OverwriteOption = Annotated[
    bool, typer.Option("--overwrite", help="Replace the output if it exists.")
]
QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="No progress or summary; print the path only.")
]
ShardSizeOption = Annotated[
    str | None,
    typer.Option(
        "--shard-size",
        help="Folder output: rows per shard (5000) or bytes (256MB).",
        show_default="128MB",
    ),
]
ShardFormatOption = Annotated[
    str | None,
    typer.Option(
        "--shard-format",
        metavar="{shard_choices}",
        autocompletion=completing(shard_choices),
        help="Folder output: the shards' format.",
        show_default="npz",
    ),
]
SpoolOption = Annotated[
    bool | None,
    typer.Option(
        "--spool/--no-spool",
        help="File output: stream to shards beside it, then merge (bounded memory).",
        show_default="when the run may exceed 256 MB",
    ),
]
ResumeOption = Annotated[
    Path | None,
    typer.Option(
        "--resume",
        metavar="FOLDER",
        help="Continue the run stored in a folder output (after a kill or Ctrl-C).",
    ),
]
TrustSettingsOption = Annotated[
    bool,
    typer.Option(
        "--trust-settings",
        help="With --resume: run the policy, wrappers or env module the folder's "
        "recorded settings name without giving them again.",
    ),
]
