"""One home for the tests that measure memory: run code in a fresh interpreter, read its
peak resident memory, and decide whether an operation's memory grows with its data.

A process's peak RSS is noisy: the allocator keeps freed buffers, a read-ahead thread
holds one more slice when the machine is busy, and a pipeline's fixed buffers (slices of
16 MB, one read ahead, a writer's) fill the first hundred MB or so. A fixed bound a few
MB above that flakes. So ``assert_flat`` runs an operation on a small and a large data
size, far apart, each in a fresh child; takes each child's peak above its own resident
memory once its imports are done; and bounds the difference by ``FRACTION`` of the extra
data. A reader that holds whole arrays grows by the extra data at least, ``1 / FRACTION``
times the bound; the noise does not scale with the data, and the small size already fills
the fixed buffers. ``tests/test_memory_probe.py`` shows that whole-array readers fail it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MIB = 2**20

# The data sizes of a streaming test, in MiB: the small one about fills a conversion's
# fixed buffers (a test whose buffers take more picks larger sizes), the large one adds 4
# times as much, so that the bound (a quarter of the extra data: 48 MiB) lies well above
# the noise once the buffers are full (under 20 MiB) and far below a whole-array reader's
# growth (the 192 MiB added, at least).
SMALL_MIB, LARGE_MIB = 48, 240
FRACTION = 0.25


@dataclass(frozen=True)
class Run:
    """How a child ended: its exit code (None: killed at the time limit), its output, its
    resident memory once its imports were done, the largest it reached, and how long it
    took."""

    returncode: int | None
    stdout: str
    stderr: str
    peak_mb: float
    baseline_mb: float
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def lines(self) -> list[str]:
        """The non-empty lines of stderr."""
        return [line for line in self.stderr.splitlines() if line.strip()]

    @property
    def growth_mb(self) -> float:
        """How far the peak rose above the resident memory after the imports."""
        return self.peak_mb - self.baseline_mb


def run_child(
    args: list[str],
    timeout: float = 60.0,
    env: dict[str, str] | None = None,
    imports: tuple[str, ...] = (),
) -> Run:
    """Run ``python ARGS`` (``-c CODE ARGV...`` or ``-m MODULE ARGV...``) with this checkout
    first on the path, after importing ``imports`` (its baseline is taken then); kill it
    after ``timeout`` seconds. Its output is read as UTF-8, strictly."""
    environ = dict(os.environ if env is None else env)
    paths = (str(ROOT), environ.get("PYTHONPATH"))
    environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    environ.setdefault("COLUMNS", "120")
    # glibc moves its threshold for mapping a large block up to the largest block freed
    # (to 32 MiB): from then on a read's 16 MiB slices come from heaps that keep their
    # pages, one heap a thread, and a run's peak varied by 30-70 MiB from one run to the
    # next with no data added. Fixed, blocks of 4 MiB and more are mapped and given back
    # when freed: the peak is what was held (the same reader: +/- 5 MiB).
    environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(4 * MIB))
    # Threads that decode (read-ahead, decode-ahead) each get a heap of their own, whose
    # freed blocks under 4 MiB stay with it: two heaps, so that how the threads happened to
    # interleave on a loaded machine does not show as growth (a folder of episode-ordered
    # shards read back peaked 248 MiB alone and 396 MiB once in the full suite).
    environ.setdefault("MALLOC_ARENA_MAX", "2")
    environ.setdefault("PYTHONIOENCODING", "utf-8:strict")  # a strict terminal
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r") as memory,
    ):
        started = time.monotonic()
        command = [sys.executable, "-c", _BOOT, memory.name, ",".join(imports), *args]
        child = subprocess.Popen(command, stdout=out, stderr=err, env=environ)
        try:
            returncode: int | None = child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            returncode = None
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
        kib = json.loads(memory.read() or '{"peak": 0, "baseline": 0}')
    return Run(returncode, stdout, stderr, kib["peak"] / 1024, kib["baseline"] / 1024, seconds)


# The child measures itself: a fork's rusage would count the parent's pages. Its baseline
# is its resident memory after the imports named; the peak is written at exit. pyarrow is
# imported through expcli, which picks Arrow's pool when it imports pyarrow first: imported
# before, pyarrow kept its own, and a test measured that pool or expcli's depending on
# whether an earlier test in its worker had left ARROW_DEFAULT_MEMORY_POOL set.
_BOOT = """
import atexit, gc, importlib, json, runpy, sys
memory_file, imports, mode, target, *rest = sys.argv[1:]
def _kib(field):
    with open("/proc/self/status") as status:
        return next((int(l.split()[1]) for l in status if l.startswith(field)), 0)
for name in filter(None, imports.split(",")):
    if name == "pyarrow":  # as expcli imports it, so that its pool is the one users get
        importlib.import_module("expcli.formats._parquet_open").pyarrow_parquet()
    importlib.import_module(name)
gc.collect()
_baseline = _kib("VmRSS:")
def _write():
    with open(memory_file, "w") as out:
        json.dump({"peak": _kib("VmHWM:"), "baseline": _baseline}, out)
atexit.register(_write)
if mode == "-m":
    sys.argv = [target, *rest]
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    sys.argv = ["-c", *rest]
    exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})
"""


@dataclass(frozen=True)
class Growth:
    """An operation's peak growth (MiB) on a small and a large amount of data (MiB)."""

    small_data: float
    large_data: float
    small: float
    large: float

    @property
    def grew(self) -> float:
        """How much more the large data took than the small one."""
        return self.large - self.small

    @property
    def bound(self) -> float:
        """The most a streaming operation may grow: ``FRACTION`` of the extra data."""
        return FRACTION * (self.large_data - self.small_data)

    @property
    def flat(self) -> bool:
        return self.grew < self.bound

    def __str__(self) -> str:
        return (
            f"peak grew {self.small:.0f} MiB on {self.small_data:.0f} MiB of data, "
            f"{self.large:.0f} MiB on {self.large_data:.0f}: {self.grew:+.0f} MiB "
            f"against a bound of {self.bound:.0f} MiB"
        )


def growth(measure: Callable[[float], Run], small: float, large: float) -> Growth:
    """Run ``measure(mib)``, a child that handles ``mib`` MiB of data, on both sizes."""
    grew = []
    for mib in (small, large):
        run = measure(mib)
        assert run.returncode == 0, run.stderr[-2000:]
        grew.append(run.growth_mb)
    result = Growth(small, large, grew[0], grew[1])
    print(result)
    return result


def assert_flat(
    measure: Callable[[float], Run], small: float = SMALL_MIB, large: float = LARGE_MIB
) -> Growth:
    """``measure(mib)`` on ``small`` and ``large`` MiB of data does not grow with the data."""
    result = growth(measure, small, large)
    assert result.flat, str(result)
    return result


def assert_grows(
    measure: Callable[[float], Run], small: float = SMALL_MIB, large: float = LARGE_MIB
) -> Growth:
    """The harness's own check: ``measure`` (a reader holding whole arrays) fails
    ``assert_flat``, and by a wide margin: it grows by most of the extra data."""
    result = growth(measure, small, large)
    assert result.grew > 2 * result.bound, str(result)
    return result


def frames_data(mib: float, compressible: bool) -> dict[str, np.ndarray]:
    """``frames`` of 4 envs x 4096 bytes (``mib`` MiB in all) and a few small tensors."""
    rows = int(mib * MIB) // (4 * 4096)
    rng = np.random.default_rng(int(mib))
    if compressible:  # mostly zeros, as frames with a plain background: gzip shrinks them
        frames = np.zeros((rows, 4, 4096), np.uint8)
        frames[:, :, ::64] = rng.integers(0, 255, (rows, 4, 64), dtype=np.uint8)
    else:
        frames = np.frombuffer(rng.bytes(rows * 4 * 4096), np.uint8).reshape(rows, 4, 4096)
    return {
        "frames": frames,
        "rewards": rng.random((rows, 4, 1), dtype=np.float32),
        "terminated": rng.random((rows, 4, 1)) < 0.02,
    }


# What a conversion imports before it reads: not the data.
CONVERT_IMPORTS = ("expcli.conversion", "expcli.formats.npz_format", "expcli.formats.hdf5_format")

_CONVERT = """
import sys
from expcli.conversion import convert
source, target, layout, num_envs, verify, shards = sys.argv[1:]
convert(source, target, overwrite=True, layout=layout, num_envs=int(num_envs) or None,
        verify=verify == "verify", shard_format=None if shards == "-" else shards)
"""

# The same conversion by a reader that holds whole arrays: the harness must flag it.
_CONVERT_WHOLE = """
import sys
import numpy as np
from expcli.conversion import load, save
source, target, layout, num_envs, verify, shards = sys.argv[1:]
data = load(source, num_envs=int(num_envs) or None)
data.tensors.update({name: np.array(tensor) for name, tensor in data.tensors.items()})
save(data, target, overwrite=True)
"""


def convert_run(
    source: Path,
    target: Path,
    layout: str = "expcli",
    num_envs: int = 0,
    verify: bool = False,
    whole: bool = False,
    imports: tuple[str, ...] = (),
    shard_format: str | None = None,
) -> Run:
    """Convert ``source`` to ``target`` in a child (``whole``: by reading whole arrays).

    ``shard_format``: a folder target's shards' format (None: the default).
    """
    code = _CONVERT_WHOLE if whole else _CONVERT
    argv = [str(source), str(target), layout, str(num_envs), "verify" if verify else "-"]
    argv.append(shard_format or "-")
    return run_child(["-c", code, *argv], 600, imports=CONVERT_IMPORTS + imports)


_SAMPLE = """
import sys
from expcli.replay import DatasetStorage, RandomSampler, ReplayBuffer
source, cache_bytes, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
storage = DatasetStorage.open(source, cache_bytes=cache_bytes) if cache_bytes >= 0 else source
buffer = ReplayBuffer(storage, sampler=RandomSampler(), seed=0)
for _ in range(batches):
    assert buffer.sample(256)["frames"].shape == (256, 4096)
"""

_SAMPLE_WHOLE = """
import sys
import numpy as np
from expcli.conversion import load
frames = np.array(load(sys.argv[1]).tensors["frames"]).reshape(-1, 4096)
assert frames[np.random.default_rng(0).integers(0, len(frames), 256)].shape == (256, 4096)
"""


def sample_run(
    source: Path, whole: bool = False, cache_bytes: int | None = None, batches: int = 1
) -> Run:
    """Draw ``batches`` batches of 256 frames from ``source`` in a child (``whole``: one, from
    whole arrays), through a block cache of ``cache_bytes`` (None: the default)."""
    code = _SAMPLE_WHOLE if whole else _SAMPLE
    imports = ("torch", "h5py", "expcli.replay", *CONVERT_IMPORTS)
    cache = -1 if cache_bytes is None else cache_bytes
    argv = [source.as_posix(), str(cache), str(batches)]
    return run_child(["-c", code, *argv], 600, imports=imports)


def cli_run(*args: str, timeout: float = 600) -> Run:
    """``expcli ARGS`` in a child, its baseline taken after the CLI's imports."""
    return run_child(["-m", "expcli", *args], timeout, imports=("expcli.cli",))
