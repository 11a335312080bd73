"""Commands that do not need torch do not import it (issue 42): a collect to a file or folder
with the random policy, convert, inspect, the editing verbs and sample (every sampler, from
every torch-free source), in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

CHILD = textwrap.dedent(
    """
    import json, sys
    from expcli.cli.app import app

    seen = {}
    for args in json.loads(sys.argv[1]):
        try:
            app(args, prog_name="expcli")
        except SystemExit as end:
            if end.code:
                raise SystemExit(f"expcli {' '.join(args)} exited {end.code}")
        seen[" ".join(args)] = "torch" in sys.modules
    print(json.dumps(seen))
    """
)


def test_collect_convert_inspect_edit_and_sample_never_import_torch(tmp_path: Path) -> None:
    run, folder = str(tmp_path / "run.npz"), str(tmp_path / "folder")
    commands = [
        ["collect", "CartPole-v1", "--steps", "100", "--mode", "dummy", "-q", "-o", run],
        [
            "collect",
            "CartPole-v1",
            "--steps",
            "60",
            "--envs",
            "2",
            "--mode",
            "dummy",
            "-q",
            "--shard-size",
            "10",
            "-o",
            folder,
        ],  # fmt: skip
        ["convert", run, str(tmp_path / "run.h5")],
        ["inspect", run, "--check", "--json"],
        ["merge", run, folder, "-o", str(tmp_path / "merged.parquet")],
        ["split", run, "-o", str(tmp_path / "a.npz"), "-o", str(tmp_path / "b.npz")],
        ["filter", run, "--top", "3", "-o", str(tmp_path / "top.npz")],
    ]
    sources = [run, folder, str(tmp_path / "run.h5"), str(tmp_path / "merged.parquet")]
    samplers = [["random"], ["prioritized"], ["slice", "--slice-len", "4"]]
    commands += [
        ["sample", source, "-b", "16", "--seed", "0", "--sampler", *sampler, *shown]
        for source in sources
        for sampler, shown in zip(samplers * 2, [[], ["--json"]] * 3, strict=False)
    ]
    child = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(commands)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    seen = json.loads(child.stdout.strip().splitlines()[-1])
    assert len(seen) == len(commands) and not any(seen.values()), seen


def test_a_cpu_memory_is_numpy_until_torch_is_asked_for_then_the_same_memory() -> None:
    child = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD], capture_output=True, text=True, check=False
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["numpy", "torch", "shared"]


MEMORY_CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from expcli.memory import RandomMemory

    memory = RandomMemory(3, 2, device="cpu")
    memory.create_tensor("observations", (2,), np.float32)
    memory.create_tensor("rewards", 1, np.float32)
    memory.add_samples(observations=np.ones((2, 2), np.float32), rewards=np.ones((2, 1)))
    view = memory.to_dataset().tensors["observations"]
    print("torch" if "torch" in sys.modules else "numpy")
    tensors = memory.tensors  # torch now, on the same memory
    assert memory.holds_torch and memory._tensor_rewards is tensors["rewards"]
    print("torch" if "torch" in sys.modules else "numpy")
    memory.add_samples(observations=np.full((2, 2), 7, np.float32), rewards=np.ones((2, 1)))
    assert (view[1] == 7).all() and (tensors["observations"][1] == 7).all()
    assert memory.packed is not None and memory.packed.names == {"observations", "rewards"}
    print("shared")
    """
)


def test_the_numpy_and_the_torch_memory_write_the_same_rows() -> None:
    from expcli.memory import RandomMemory

    made = []
    for device in ("cpu", None):
        memory = RandomMemory(4, 2, device=device or "cpu")
        if device is None:
            memory.tensors  # noqa: B018 (torch from the start)
        memory.create_tensor("observations", (3,), np.float32)
        memory.create_tensor("terminated", 1, np.bool_)
        memory.create_tensor("pixels", (20, 20), np.uint8, keep_dimensions=True)
        for step in range(6):
            memory.add_samples(
                observations=np.full((2, 3), step, np.float32),
                terminated=np.array([[step % 2], [0]], bool),
                pixels=np.full((2, 20, 20), step, np.uint8),
            )
        memory.grow(8)
        made.append(memory.to_dataset())
    numpy_made, torch_made = made
    assert numpy_made.state == torch_made.state
    for name, array in torch_made.tensors.items():
        assert np.array_equal(numpy_made.tensors[name], array, equal_nan=True), name
