"""``--help`` of the app and of every command: no type metavars, plain names, clean punctuation."""

from __future__ import annotations

import re

import pytest
import typer.main
from rich.text import Text
from typer.testing import CliRunner

from expcli.cli import app

COMMANDS = ["collect", "convert", "envs", "inspect", "sample"]
TYPE_METAVARS = re.compile(r"<(bool|int|float|str|path|list|text)|\[x[<>]=|<=x")
USAGE = {
    "collect": "Usage: expcli collect [OPTIONS] [ENV_ID]",
    "convert": "Usage: expcli convert [OPTIONS] SRC DST",
    "envs": "Usage: expcli envs [OPTIONS] [FILTER]",
    "inspect": "Usage: expcli inspect [OPTIONS] [FILE]",
    "sample": "Usage: expcli sample [OPTIONS] FILE",
}


def _help(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_shows_no_type_metavars_or_stray_punctuation(command: str) -> None:
    text = _help(*([command] if command else []))
    assert not TYPE_METAVARS.findall(text), TYPE_METAVARS.findall(text)
    assert "{" not in text and "[[" not in text
    assert not re.search(r"\s\.(\s|$)", text, re.MULTILINE)  # "past it ." where markup ate "[...]"
    for flag in ("--help", "--json", "--overwrite", "--version"):
        for line in text.splitlines():
            # a flag stands alone: its help follows straight after it
            if re.search(rf"│ {flag}\s", line):
                after = line.split(flag, 1)[1].split()
                assert after and after[0][0].isupper(), line


@pytest.mark.parametrize("command", COMMANDS)
def test_arguments_are_named_in_upper_case(command: str) -> None:
    text = _help(command)
    assert USAGE[command] in text
    arguments = text.split("Arguments")[1].split("╰")[0]
    names = re.findall(r"^│ {1,5}\*? {0,5}(\S+)", arguments, re.MULTILINE)
    assert names and all(name.isupper() for name in names), names


def test_value_options_show_one_upper_case_word_and_defaults_in_brackets() -> None:
    text = _help("collect")
    assert re.search(r"--envs\s+-n\s+INTEGER\s+Parallel envs", text)
    assert re.search(r"--step-timeout\s+SECONDS\s", text)
    flat = " ".join(text.replace("│", " ").split())
    assert "Transitions to store in all. [default: 10000]" in flat
    assert "[default: fits the run]" in flat and "[default: 128MB]" in flat
    assert re.search(r"--sampler\s+\[random\|prioritized\|slice\]\s", _help("sample"))


def test_policy_help_names_every_kind_of_policy() -> None:
    text = " ".join(_help("collect").replace("│", " ").split())
    assert "file.py:CALLABLE" in text.split("--policy")[1].split("--seed")[0]
    assert ".pt2" in text.split("--policy")[1].split("--seed")[0]


def test_no_help_string_is_eaten_by_rich_markup() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    for name, command in group.commands.items():
        for param in command.params:
            help_text = getattr(param, "help", None) or ""
            assert Text.from_markup(help_text).plain == help_text, (name, param.name)
            assert not help_text.rstrip().endswith(" ."), (name, param.name)


CHOICES = {
    ("collect", "--mode"): "[auto|dummy|subproc|ray|ray-subproc|vector|envpool]",
    ("collect", "--async"): "[none|idle|restart|continue]",
    ("collect", "--layout"): "[expcli|skrl|tianshou|minari|d4rl|lerobot]",
    ("collect", "--to"): "[pt|npz|csv|hdf5]",
    ("collect", "--storage"): "[hdf5|parquet|arrow|video]",
    ("collect", "--shard-format"): "[npz|parquet]",
    ("collect", "--frames"): "[full|once]",
    ("collect", "--compression"): "[none|gzip|lzf|zstd|snappy]",
    ("convert", "--to"): "[pt|npz|csv|hdf5|parquet|folder]",
    ("convert", "--storage"): "[hdf5|parquet|arrow|video]",
    ("convert", "--layout"): "[expcli|skrl|tianshou|minari|d4rl|lerobot]",
    ("convert", "--compression"): "[none|gzip|lzf|zstd|snappy]",
    ("convert", "--shard-format"): "[npz|parquet]",
    ("convert", "--frames"): "[full|once]",
    ("merge", "--incomplete"): "[keep|drop]",
    ("merge", "--to"): "[pt|npz|csv|hdf5|parquet|folder]",
    ("split", "--incomplete"): "[drop|OUTPUT]",
    ("filter", "--incomplete"): "[drop|keep]",
    ("filter", "--shard-format"): "[npz|parquet]",
    ("sample", "--sampler"): "[random|prioritized|slice]",
}


@pytest.mark.parametrize(("command", "option"), sorted(CHOICES))
def test_choices_are_shown_in_brackets(command: str, option: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "240", "NO_COLOR": "1"})
    assert re.search(
        rf"{option}\s+(-\S+\s+)?{re.escape(CHOICES[command, option])}\s", result.output
    )


def test_collect_mode_help_is_short_and_no_spool_sits_beside_spool() -> None:
    collect = typer.main.get_command(app).commands["collect"]  # type: ignore[attr-defined]
    [mode] = [p for p in collect.params if p.name == "mode"]
    assert len(mode.help) <= 240, mode.help  # was ten lines of Ray internals
    result = CliRunner().invoke(app, ["collect", "--help"], env={"COLUMNS": "240", "NO_COLOR": "1"})
    assert re.search(r"│ --spool/--no-spool\s{5,}File output", result.output)


@pytest.mark.parametrize("command", ["merge", "split", "filter", "convert", "collect"])
def test_compression_help_names_parquets_gzip_and_none(command: str) -> None:
    text = " ".join(_help(command).replace("│", " ").split())
    assert "HDF5: none, gzip or lzf; Parquet: zstd, snappy, gzip or none" in text


def test_choices_complete_in_the_shell() -> None:
    from expcli.cli._read_options import completing

    assert completing(["ray", "ray-subproc", "dummy"])("ra") == ["ray", "ray-subproc"]
    assert "parquet" in completing(lambda: ["npz", "parquet"])("p")
