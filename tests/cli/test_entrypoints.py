"""`expcli --help`, `--version`, `python -m expcli`, and a light start-up."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

import expcli
from expcli.cli import app

HEAVY = {"torch", "gymnasium", "h5py", "ray", "pyarrow", "polars", "duckdb", "datasets",
         "matplotlib", "PIL"}  # fmt: skip


def test_help_and_version_in_process() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "Usage" in result.output
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"expcli {expcli.__version__}"


def test_python_dash_m_runs_the_cli() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "expcli", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"expcli {expcli.__version__}"


def test_help_imports_no_heavy_module() -> None:
    code = (
        "import json, sys\n"
        "from expcli.cli import main\n"
        "sys.argv = ['expcli', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = {m.split(".")[0] for m in json.loads(out.stdout.splitlines()[-1])}
    assert "typer" in loaded  # the harness really ran the CLI
    assert not loaded & HEAVY, loaded & HEAVY


def test_importing_expcli_is_light_until_a_name_is_used() -> None:
    code = (
        "import json, sys, expcli\n"
        "before = sorted(sys.modules)\n"
        "expcli.Memory\n"
        "memory = sorted(sys.modules)\n"
        "expcli.DictBatch\n"
        "print(json.dumps([before, memory, sorted(sys.modules)]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, memory, after = ({m.split(".")[0] for m in mods} for mods in json.loads(out.stdout))
    assert not before & HEAVY
    assert "torch" not in memory  # a CPU Memory is numpy until torch is asked for
    assert "torch" in after


def test_library_packages_import_only_what_they_own() -> None:
    code = (
        "import json, sys\n"
        "import expcli.envs, expcli.formats\n"
        "bare = sorted(sys.modules)\n"
        "expcli.envs.ParallelEnv\n"
        "print(json.dumps([bare, sorted(sys.modules)]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    bare, loaded = (
        {m.split(".")[0] for m in mods} for mods in json.loads(out.stdout.splitlines()[-1])
    )
    assert (
        "gymnasium" not in bare
    )  # the mode enums come without gymnasium (the CLI types with them)
    assert "gymnasium" in loaded
    assert not loaded & {"torch", "ray", "h5py"}, loaded & {"torch", "ray", "h5py"}


def test_a_command_imports_its_own_module_and_no_other_command() -> None:
    """Commands are built when looked up: ``expcli inspect`` loads no other command's module."""
    from expcli.cli.app import COMMANDS

    code = (
        "import json, sys\n"
        "from expcli.cli import main\n"
        "sys.argv = ['expcli', 'inspect', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    modules = {f"expcli.cli.{module}" for module, _ in COMMANDS.values()}
    assert loaded & modules == {"expcli.cli.inspect_cmd"}
