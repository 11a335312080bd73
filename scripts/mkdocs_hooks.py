"""MkDocs hooks: the reference pages are made from the code each time the site is built.

Two markers, each alone on a line of a page, are replaced before the page is rendered:

- ``<!-- cli-help -->`` by ``expcli --help`` and then each command's ``--help``, in the
  order the app registers them, as the Typer app prints them (called in this process
  through click's test runner, 100 columns wide, colours off);
- ``<!-- api-reference -->`` by one mkdocstrings block (``::: expcli.NAME``) per name of
  ``expcli._EXPORTS``, the public API, under a heading per module in the table's order.

So a new command, option or export reaches the reference without anyone copying text, and
a docstring mkdocstrings cannot read fails ``mkdocs build --strict``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

CLI_MARKER = "<!-- cli-help -->"
API_MARKER = "<!-- api-reference -->"
HELP_COLUMNS = 100
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def on_config(config: Any) -> Any:
    """Put the project's root first on ``sys.path``: the code documented is this tree's."""
    root = str(Path(config.config_file_path).resolve().parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the markers of a page by the help pages or the API blocks."""
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_help_markdown())
    if API_MARKER in markdown:
        markdown = markdown.replace(API_MARKER, api_reference_markdown())
    return markdown


def help_text(args: list[str]) -> str:
    """What ``expcli ARGS --help`` prints, without colours."""
    from typer.testing import CliRunner

    from expcli.cli.app import app

    result = CliRunner().invoke(
        app,
        [*args, "--help"],
        prog_name="expcli",
        env={"COLUMNS": str(HELP_COLUMNS), "FORCE_COLOR": None, "NO_COLOR": "1"},
        terminal_width=HELP_COLUMNS,
    )
    if result.exit_code != 0:
        raise RuntimeError(f"expcli {' '.join(args)} --help exited {result.exit_code}")
    lines = _ANSI.sub("", result.output).splitlines()
    return "\n".join(line.rstrip() for line in lines).strip("\n")


def command_names() -> list[str]:
    """The app's commands, in the order it registers them."""
    import typer

    from expcli.cli.app import app

    group: Any = typer.main.get_command(app)  # a click group (the click Typer vendors)
    with group.context_class(group, info_name="expcli") as context:
        return list(group.list_commands(context))


def cli_help_markdown() -> str:
    """A section per command: its name and its help page in a text block."""
    sections = [_help_section("expcli", [])]
    sections += [_help_section(f"expcli {name}", [name]) for name in command_names()]
    return "\n\n".join(sections)


def _help_section(title: str, args: list[str]) -> str:
    return f"## `{title}`\n\n```text\n{help_text(args)}\n```"


def api_reference_markdown() -> str:
    """A heading per module of ``_EXPORTS``, then a mkdocstrings block per name it exports."""
    import expcli

    by_module: dict[str, list[str]] = {}
    for name, module in expcli._EXPORTS.items():
        by_module.setdefault(module, []).append(name)
    sections = []
    for module, names in by_module.items():
        blocks = "\n\n".join(f"::: expcli.{name}" for name in names)
        sections.append(f"## `{module}`\n\n{blocks}")
    return "\n\n".join(sections)
