"""A reader that goes away (``expcli inspect FILE | head``): exit 141 and print nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from expcli import RandomMemory


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    memory = RandomMemory(3000, 2, device="cpu")
    memory.create_tensor("observations", 6, torch.float32)
    memory.create_tensor("rewards", 1, torch.float32)
    memory.create_tensor("terminated", 1, torch.bool)
    rng = np.random.default_rng(0)
    memory.write_rows(
        {
            "observations": rng.normal(size=(3000, 2, 6)).astype(np.float32),
            "rewards": rng.normal(size=(3000, 2, 1)).astype(np.float32),
            "terminated": rng.random((3000, 2, 1)) < 0.02,
        }
    )
    path = tmp_path_factory.mktemp("pipe") / "big.npz"
    memory.save(path)
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "{}", "--head", "3000"],  # a rich table
        ["inspect", "{}", "--json", "--head", "3000"],  # one echoed line
        ["sample", "{}", "--json", "-b", "3000", "--rows", "3000"],
    ],
    ids=["inspect", "inspect-json", "sample-json"],
)
def test_a_closed_pipe_exits_quietly(dataset: Path, args: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as users run it
    command = [sys.executable, "-m", "expcli", *(a.format(dataset) for a in args)]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        assert child.stdout.read(10)  # like `head -c 10`: read a little, then go away
        child.stdout.close()
        stderr = child.stderr.read()
        code = child.wait(timeout=120)
    assert (code, stderr.decode()) == (141, "")  # 128 + SIGPIPE, as the README says
