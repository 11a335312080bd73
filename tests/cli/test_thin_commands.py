"""The command line stays thin: no function of ``expcli/cli`` runs over 80 lines.

A command parses its options and hands them to the library; what grows past a screen is
work the library should do (issue 41: collect's 288-line command became 70).
"""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "expcli" / "cli"
MOST_LINES = 80  # from the def line to the last line, as the AST counts them


def test_no_function_of_the_cli_is_over_80_lines() -> None:
    long = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MOST_LINES:
                    long.append(f"{path.name}:{node.lineno} {node.name}: {lines} lines")
    assert not long, "\n".join(long)
