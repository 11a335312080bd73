"""A fuzz campaign: mutants of the seed corpus through ``load``, ``inspect --json``,
``inspect --check`` and ``convert``, each in a long-lived child with a time and memory limit.

    python -m tests.fuzz.campaign --files 2000 --workers 2 --report /tmp/fuzz.json
    python -m tests.fuzz.campaign --campaign 1 --only 3566   # that mutant again
    python -m tests.fuzz.campaign --folders --minutes 10 --timeout 20   # sharded folders

``--folders`` fuzzes sharded dataset folders instead (``folders``: the committed folder
seed, its manifest and its files made hostile) through ``load``, ``inspect --json``,
``inspect --check``, ``convert`` and ``sample`` (``--resume`` adds ``collect --resume``),
and also counts, per run:

* ``changed``: the folder is not byte for byte as it was (a read changed it, or a
  ``collect --resume`` that was refused did).
* ``read_outside``: a sentinel outside the folder was read (its access time moved, or its
  marker came out).
* ``code_run``: code named by the folder's settings ran.
* ``refused_valid``: a folder still valid (a manifest reformatted, a stray file) was refused.

Mutant ``i`` comes from seed ``i mod seeds`` (so every format and layout gets its share)
damaged by ``mutations.make_mutant``, and goes through the four operations. Outcomes:

* ``ok`` / ``error``: the operation succeeded, or failed with an expcli error (one line).
* ``escape``: any other exception, which a user sees as a traceback; counted by cause.
* ``messy``: the command failed with other than exactly one line on stderr.
* ``hang``: no answer within ``--timeout`` seconds (the child is killed and restarted).
* ``blowup``: the child's memory went past ``--mem-limit-mb`` (``load``, which holds the
  data by design, may also use twice what it loaded).
* ``crash``: the child died (a signal, a segfault, an abort).
* ``wrote_beside``: a read changed the folder holding the source (a scratch file there).

Children run ``python -m tests.fuzz.worker`` with the environment given (``PYTHONPATH``
names which expcli is fuzzed), so the same campaign measures any checkout.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tests.fuzz import folders as folder_fuzz
from tests.fuzz import header_ints
from tests.fuzz.mutations import make_mutant
from tests.fuzz.seeds import CORPUS, seeds

OPS = ("load", "inspect-json", "inspect-check", "convert")
FOLDER_OPS = ("load", "inspect-json", "inspect-check", "convert", "sample")
HEADER_OPS = ("inspect-json", "inspect-check", "convert")
_TARGETS = (  # convert's output, by mutant number: every format, then every layout
    ("out.npz", []),
    ("out.h5", []),
    ("out.csv", []),
    ("out.pt", []),
    ("out-skrl.pt", ["--layout", "skrl"]),
    ("out-tianshou.h5", ["--layout", "tianshou"]),
    ("out-d4rl.h5", ["--layout", "d4rl"]),
    ("out-minari-v0", ["--layout", "minari"]),
    ("out-lerobot", ["--layout", "lerobot"]),
)
_BAD = ("escape", "messy", "hang", "blowup", "crash")
_FOLDER_BAD = ("changed", "read_outside", "code_run", "refused_valid")
_RESTART_EVERY = 300  # requests per child, so that nothing it leaks piles up
_POLL = 0.05


@dataclass
class Settings:
    """What a campaign runs: how many mutants, which seed, which limits."""

    files: int = 200
    campaign: int = 0
    timeout: float = 10.0
    mem_limit_mb: int = 1024
    workers: int = 1
    corpus: Path = CORPUS
    keep: Path | None = None
    env: dict[str, str] | None = None
    only: tuple[int, ...] = ()  # these mutant numbers alone, to reproduce them
    folders: bool = False  # sharded folders (``folders``) instead of the file corpus
    resume: bool = False  # folders: also ``collect --resume``
    minutes: float | None = None  # run mutants until this time is up (``files`` ignored)
    header_ints: bool = False  # mutant i: header integer i at an edge (``header_ints``)


@dataclass
class Report:
    """Counts per outcome, and every run that went wrong."""

    files: int = 0
    runs: int = 0
    ops: int = len(OPS)
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    causes: collections.Counter[str] = field(default_factory=collections.Counter)
    failures: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    slowest: float = 0.0
    peak_kb: int = 0

    @property
    def bad(self) -> int:
        """Runs that escaped, hung, blew up, crashed or failed messily, plus scratch writes."""
        extra = sum(self.outcomes[k] for k in _FOLDER_BAD)
        return sum(self.outcomes[k] for k in _BAD) + self.outcomes["wrote_beside"] + extra

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "runs": self.runs,
            "outcomes": dict(self.outcomes),
            "distinct_escapes": len(self.causes),
            "causes": dict(self.causes.most_common()),
            "seconds": round(self.seconds, 1),
            "slowest_seconds": self.slowest,
            "peak_mb": self.peak_kb // 1024,
            "failures": self.failures,
        }

    def table(self) -> str:
        o = self.outcomes
        lines = [
            f"{self.files} mutants x {self.ops} operations = {self.runs} runs "
            f"in {self.seconds:.0f} s",
            f"  ok {o['ok']}, clean errors {o['error']}",
            f"  escapes (tracebacks) {o['escape']} ({len(self.causes)} distinct causes)",
            f"  hangs {o['hang']}, blow-ups {o['blowup']}, crashes {o['crash']}",
            f"  messy errors {o['messy']}, scratch writes beside the source {o['wrote_beside']}",
            f"  folders: changed {o['changed']}, reads outside {o['read_outside']}, "
            f"code run {o['code_run']}, valid ones refused {o['refused_valid']}",
            f"  slowest answer {self.slowest:.1f} s, largest peak {self.peak_kb // 1024} MB",
        ]
        lines += [f"    {n:5d}  {cause}" for cause, n in self.causes.most_common()]
        return "\n".join(lines)


class _Child:
    """One worker process, restarted after a hang, a blow-up, a crash or many requests."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.env, self.cwd = env, cwd
        self.process: subprocess.Popen[str] | None = None
        self.served = 0

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,
        )
        self.served = 0
        line = self._answer(120.0, None)
        if not line or not json.loads(line).get("ready"):
            raise RuntimeError(f"the fuzz worker did not start: {line!r}")

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                if stream is not None:
                    stream.close()
            self.process = None

    def run(self, request: dict[str, Any], timeout: float, limit_kb: int) -> dict[str, Any]:
        if self.process is None or self.served >= _RESTART_EVERY:
            self.stop()
            self.start()
        assert self.process is not None and self.process.stdin is not None
        self.served += 1
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        verdict: dict[str, Any] = {}
        line = self._answer(timeout, limit_kb, verdict)
        if line:
            return dict(json.loads(line))
        code = self.process.poll()
        self.stop()
        if verdict:
            return verdict
        return {"status": "crash", "detail": f"worker died with {code}"}

    def _answer(
        self, timeout: float, limit_kb: int | None, verdict: dict[str, Any] | None = None
    ) -> str:
        """The next line from the child, or '' after a timeout, a blow-up or its death."""
        assert self.process is not None and self.process.stdout is not None
        stdout: IO[str] = self.process.stdout
        deadline = time.monotonic() + timeout
        while True:
            ready, _, _ = select.select([stdout], [], [], _POLL)
            if ready:
                return stdout.readline()
            rss = _rss_kb(self.process.pid)
            if verdict is not None and limit_kb is not None and rss > limit_kb:
                verdict.update(status="blowup", detail=f"RSS {rss // 1024} MB", peak_kb=rss)
                return ""
            if time.monotonic() > deadline:
                if verdict is not None:
                    verdict.update(status="hang", detail=f"no answer in {timeout:.0f} s")
                return ""


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _requests(
    settings: Settings, corpus: list[Path], number: int, folder: Path
) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """Make mutant ``number`` in ``folder``; its recipe, and the four operations on it."""
    seed = corpus[number % len(corpus)]
    if settings.header_ints:
        every = _header_fields()
        edges = header_ints.EDGES
        value = edges[(number + number // len(every)) % len(edges)]
        mutant, recipe = header_ints.make(every[number % len(every)], value, folder / "src")
    else:
        mutant, recipe = make_mutant(seed, folder / "src", number, settings.campaign)
    out_name, flags = _TARGETS[(number // len(corpus)) % len(_TARGETS)]
    if "deflate bomb" in recipe and out_name.endswith(".csv"):
        # Its 1.2 GiB are real data: a minute of writing text is no hang. Write a binary.
        out_name, flags = _TARGETS[0]
    path = str(mutant)
    commands: dict[str, list[str] | None] = {
        "load": None,
        "inspect-json": ["inspect", path, "--json"],
        "inspect-check": ["inspect", path, "--check", "--head", "2"],
        "convert": ["convert", path, str(folder / "out" / out_name), *flags],
    }
    requests = []
    # header integers: --check reads what load reads and checks it; convert writes it
    for op in HEADER_OPS if settings.header_ints else OPS:
        request: dict[str, Any] = {"path": path}
        if commands[op] is not None:
            request["args"] = commands[op]
        requests.append((op, request))
    return recipe, requests


@functools.cache
def _header_fields() -> list[header_ints.Field]:
    return header_ints.fields()


def run_campaign(settings: Settings) -> Report:
    """Run the campaign; the report lists every run that went wrong."""
    env = dict(settings.env if settings.env is not None else os.environ)
    repo = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), repo) if p)
    report = Report(files=len(settings.only) or settings.files)
    if settings.folders:
        report.ops = len(FOLDER_OPS) + settings.resume
    elif settings.header_ints:
        report.ops = len(HEADER_OPS)
    started = time.monotonic()
    limit_kb = settings.mem_limit_mb * 1024
    with tempfile.TemporaryDirectory(prefix="expcli-fuzz-") as scratch:
        work = Path(scratch)
        children = [_Child(env, work) for _ in range(max(1, settings.workers))]
        try:
            _drive(settings, work, children, report, limit_kb)
        finally:
            for child in children:
                child.stop()
    report.seconds = time.monotonic() - started
    return report


Outcomes = list[tuple[str, dict[str, Any]]]


def _numbers(settings: Settings) -> Iterator[int]:
    """The mutants to make: those asked for, ``files`` of them, or as many as time allows."""
    if settings.only:
        yield from settings.only
        return
    if settings.minutes is None:
        yield from range(settings.files)
        return
    deadline = time.monotonic() + settings.minutes * 60
    number = 0
    while time.monotonic() < deadline:
        yield number
        number += 1


def _drive(
    settings: Settings, work: Path, children: list[_Child], report: Report, limit_kb: int
) -> None:
    """Each mutant's operations go to one child; the children take mutants in turn."""
    corpus = seeds(settings.corpus)
    numbers = _numbers(settings)
    lock = threading.Lock()

    def one_file(number: int, child: _Child) -> tuple[Path, str, Outcomes]:
        folder = work / f"{number:06d}"
        if settings.folders:
            recipe, outcomes = _folder_mutant(settings, number, folder, child, limit_kb)
            return folder, recipe, outcomes
        recipe, requests = _requests(settings, corpus, number, folder)
        outcomes = []
        # A bomb's 1.2 GiB are real data, which takes seconds to go through, not forever.
        timeout = settings.timeout * (6 if "deflate bomb" in recipe else 1)
        for op, request in requests:
            hard_kb = limit_kb * 4 if op == "load" else limit_kb * 3 // 2
            outcomes.append((op, child.run(request, timeout, hard_kb)))
        return folder, recipe, outcomes

    errors: list[BaseException] = []

    def serve(child: _Child) -> None:
        try:
            serve_all(child)
        except BaseException as e:  # the fuzzer's own failure: the campaign fails with it
            errors.append(e)

    def serve_all(child: _Child) -> None:
        while True:
            if errors:
                return
            with lock:
                number = next(numbers, None)
            if number is None:
                return
            folder, recipe, outcomes = one_file(number, child)
            with lock:
                if settings.minutes is not None:
                    report.files += 1
                for op, result in outcomes:
                    _tally(report, recipe, op, result, limit_kb, folder, settings.keep)
            shutil.rmtree(folder, ignore_errors=True)

    if settings.minutes is not None:
        report.files = 0
    threads = [threading.Thread(target=serve, args=(child,)) for child in children]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def _folder_mutant(
    settings: Settings, number: int, work: Path, child: _Child, limit_kb: int
) -> tuple[str, Outcomes]:
    """Make folder mutant ``number`` in ``work``; run each operation and check what it left."""
    data, outside, recipe, valid = folder_fuzz.make_folder_mutant(
        folder_fuzz.seed_for(number), work, number, settings.campaign
    )
    out = work / "out"
    out.mkdir()
    target = ("copy.npz", "copy.h5", "copy-folder")[number % 3]
    commands: dict[str, list[str] | None] = {
        "load": None,
        "inspect-json": ["inspect", str(data), "--json"],
        "inspect-check": ["inspect", str(data), "--check", "--head", "2"],
        "convert": ["convert", str(data), str(out / target)],
        "sample": ["sample", str(data), "-b", "3", "--json", "--seed", "1"],
    }
    if settings.resume:
        commands["resume"] = ["collect", "--resume", str(data), "-q"]
    markers = [folder_fuzz.TEXT_MARKER, repr(folder_fuzz.MARKER)]
    outcomes: Outcomes = []
    for op, args in commands.items():
        request: dict[str, Any] = {"path": str(data)}
        if args is None:
            request["marker"] = folder_fuzz.MARKER
        else:
            request.update(args=args, markers=markers)
        before = folder_fuzz.snapshot(data)
        times = folder_fuzz.sentinel_times(outside)
        result = child.run(request, settings.timeout, limit_kb * 3 // 2)
        if folder_fuzz.snapshot(data) != before and (op != "resume" or result["status"] != "ok"):
            result["changed"] = True
        if folder_fuzz.sentinel_times(outside) != times or result.get("marker_seen"):
            result["read_outside"] = True
        if op == "convert" and _holds_marker(out / target, markers):
            result["read_outside"] = True
        if (work / folder_fuzz.CODE_RAN).exists():
            result["code_run"] = True
        # a layout seed's own checks may fail (its observations lie outside their Box)
        checked = op == "inspect-check" and folder_fuzz.seed_for(number) in folder_fuzz.LAYOUT_SEEDS
        if valid and result["status"] != "ok" and op != "resume" and not checked:
            result["refused_valid"] = True
        outcomes.append((op, result))
    return recipe, outcomes


def _holds_marker(path: Path, markers: list[str]) -> bool:
    """Whether what convert wrote holds a sentinel's marker (its float bytes or its text)."""
    import numpy as np

    needles = [m.encode() for m in markers] + [
        np.float32(folder_fuzz.MARKER).tobytes(),
        np.float64(folder_fuzz.MARKER).tobytes(),
    ]
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    for file in files:
        if file.stat().st_size < 64 << 20:
            data = file.read_bytes()
            if any(needle in data for needle in needles):
                return True
    return False


def _tally(
    report: Report,
    recipe: str,
    op: str,
    result: dict[str, Any],
    limit_kb: int,
    folder: Path,
    keep: Path | None,
) -> None:
    report.runs += 1
    status = result["status"]
    allowed = limit_kb + (2 * result.get("nbytes", 0)) // 1024
    if status in ("ok", "error", "messy") and result.get("peak_kb", 0) > allowed:
        status = "blowup"
        result["detail"] = f"peak {result['peak_kb'] // 1024} MB; " + str(result.get("detail"))
    report.outcomes[status] += 1
    if status == "escape":
        report.causes[result["cause"]] += 1
    report.slowest = max(report.slowest, float(result.get("seconds", 0.0)))
    report.peak_kb = max(report.peak_kb, int(result.get("peak_kb", 0)))
    flags = [k for k in ("wrote_beside", *_FOLDER_BAD) if result.get(k)]
    for flag in flags:
        report.outcomes[flag] += 1
    if status in _BAD or flags:
        entry = {"mutant": recipe, "op": op, "status": status, **result}
        report.failures.append(entry)
        if keep is not None:
            target = keep / folder.name
            if not target.exists() and (folder / "src").exists():
                shutil.copytree(folder / "src", target, symlinks=True, ignore=_special)
                (target / "RECIPE.txt").write_text(recipe + "\n")


def _special(root: str, names: list[str]) -> list[str]:
    """What a copy leaves out: named pipes and devices (opening one would block)."""
    import stat

    kept = (stat.S_IFREG, stat.S_IFDIR, stat.S_IFLNK)
    return [n for n in names if stat.S_IFMT(os.lstat(os.path.join(root, n)).st_mode) not in kept]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200, help="mutants to make (default 200)")
    parser.add_argument("--campaign", type=int, default=0, help="seed of the mutations")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per operation")
    parser.add_argument("--mem-limit-mb", type=int, default=1024, help="memory per operation")
    parser.add_argument("--workers", type=int, default=1, help="children at once")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="seed folder")
    parser.add_argument("--keep", type=Path, help="copy mutants that went wrong here")
    parser.add_argument("--report", type=Path, help="write the JSON report here")
    parser.add_argument("--only", type=int, nargs="*", default=[], help="these mutants alone")
    parser.add_argument("--folders", action="store_true", help="fuzz sharded folders instead")
    parser.add_argument("--resume", action="store_true", help="folders: collect --resume too")
    parser.add_argument("--minutes", type=float, help="make mutants until this time is up")
    options = parser.parse_args()
    if options.keep is not None:
        options.keep.mkdir(parents=True, exist_ok=True)
    report = run_campaign(
        Settings(
            files=options.files,
            campaign=options.campaign,
            timeout=options.timeout,
            mem_limit_mb=options.mem_limit_mb,
            workers=options.workers,
            corpus=options.corpus,
            keep=options.keep,
            only=tuple(options.only),
            folders=options.folders,
            resume=options.resume,
            minutes=options.minutes,
        )
    )
    print(report.table())
    if options.report is not None:
        options.report.write_text(json.dumps(report.to_json(), indent=1))
    sys.exit(1 if report.bad else 0)


if __name__ == "__main__":
    main()
