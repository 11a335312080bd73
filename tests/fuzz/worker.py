"""The fuzzer's child: a long-lived process that runs one operation per request.

Started as ``python -m tests.fuzz.worker``, it imports expcli, torch and h5py once, then
reads one JSON request per line on stdin (``{"path": ..., "args": [...]}``: the command
line of an ``expcli`` command, or no ``args`` for ``expcli.load`` and ``Memory.from_dataset``) and
answers one JSON line per request on the stdout it was started with (its own file
descriptors 1 and 2 go to ``/dev/null``, so that nothing a library prints can garble the
answers). The parent enforces the time limit and watches memory; the worker measures its
own peak (``VmHWM``, reset before each request) and tells a clean error (an expcli error, or
the CLI's one-line message and exit code) from an escape (any other exception: what a user
would see as a traceback). Standard output is strict UTF-8, as a terminal's may be.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import json
import os
import resource
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

FILE_LIMIT = 2 << 30  # bytes a convert may write; beyond it a write fails (EFBIG)


def _peak_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _cause(error: BaseException) -> str:
    """The exception type and the innermost expcli frame it came through."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if "/expcli/" in f.filename] or frames
    where = ""
    if ours:
        frame = ours[-1]
        where = f" @ {frame.filename.rsplit('/expcli/', 1)[-1]}:{frame.name}"
    return f"{type(error).__name__}{where}"


def _load(path: str, marker: float | None = None) -> dict[str, Any]:
    import numpy as np

    from expcli import RandomMemory, load
    from expcli.errors import ExpcliError

    try:
        dataset = load(path)
        nbytes = sum(int(getattr(a, "nbytes", 0)) for a in dataset.tensors.values())
        if dataset.tensors:
            RandomMemory.from_dataset(dataset, device="cpu")
    except ExpcliError as e:
        return {"status": "error", "detail": str(e)[:300]}
    result: dict[str, Any] = {"status": "ok", "nbytes": nbytes}
    if marker is not None and nbytes < 1 << 28:
        floats = [np.asarray(a) for a in dataset.tensors.values() if a.dtype.kind == "f"]
        result["marker_seen"] = any(bool((a == marker).any()) for a in floats)
    return result


@functools.cache
def _command() -> Any:
    """The CLI's click command, built once: Typer builds it anew on every call (80 ms)."""
    import typer.main

    from expcli.cli.app import app

    return typer.main.get_command(app)


def _cli(args: list[str], markers: list[str] | None = None) -> dict[str, Any]:
    import click

    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", write_through=True)
    err = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = _command().main(args, prog_name="expcli", standalone_mode=False)
        except click.exceptions.Exit as e:
            code = e.exit_code
        except click.ClickException as e:
            code = e.exit_code
            err.write(e.format_message() + "\n")
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("warning:")]  # one line each
    result: dict[str, Any] = {"status": "ok" if not code else "error", "exit": code or 0}
    if lines:
        result["detail"] = "\n".join(lines)[:300]
    if markers:
        said = raw.getvalue().decode("utf-8", "replace") + err.getvalue()
        result["marker_seen"] = any(m in said for m in markers)
    # One line on failure; ``inspect --check`` may also fail quietly (a check failed).
    if len(lines) > 1 or (code and not lines and "--check" not in args):
        result["status"] = "messy"
    return result


def _handle(request: dict[str, Any]) -> dict[str, Any]:
    path, args = request["path"], request.get("args")
    beside = Path(path).parent
    # A writer (``collect --resume``) locks its output by a file beside it, made and removed
    # again (``formats.output_lock``): for it, what is left there counts; for a read, any write.
    writer = bool(args) and args[0] == "collect"
    before = _listing(beside) if writer else beside.stat().st_mtime_ns
    try:
        if args is None:
            result = _load(path, request.get("marker"))
        else:
            result = _cli(args, request.get("markers"))
    except BaseException as e:  # an escape is what this worker reports
        if isinstance(e, KeyboardInterrupt | SystemExit):
            raise
        lines = traceback.format_exception_only(type(e), e)
        result = {"status": "escape", "cause": _cause(e), "detail": lines[-1].strip()[:300]}
    if (_listing(beside) if writer else beside.stat().st_mtime_ns) != before:
        result["wrote_beside"] = True
    return result


def _listing(folder: Path) -> list[str]:
    return sorted(entry.name for entry in folder.iterdir())


def main() -> None:
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails, not kills
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
    os.environ.setdefault("COLUMNS", "120")
    import h5py  # noqa: F401 - loaded once here, not in the first request's time
    import torch  # noqa: F401

    _command()

    answers.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        gc.collect()  # what the last request left in reference cycles is not this one's
        # What survives (modules imported so far) is not looked at again: a full collection
        # over torch's objects took 80 ms, most of a request's time.
        gc.freeze()
        _reset_peak()
        started = time.perf_counter()
        result = _handle(request)
        result["seconds"] = round(time.perf_counter() - started, 3)
        result["peak_kb"] = _peak_kb()
        answers.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
