"""The fuzzer's seed corpus: one small, valid file per format and layout.

Run ``python -m tests.fuzz.seeds [FOLDER]`` to rebuild ``tests/fuzz/corpus`` (the default
folder). Every format (pt, npz, csv, h5, parquet) is written in expcli's own layout (and
all but CSV once more with next observations stored once, ``frames.*``), and
every foreign layout (skrl, tianshou, minari in hdf5, parquet and arrow storage, d4rl) as
its writer lays it out, and a Parquet table expcli did not write (``table.parquet``); a
partly filled skrl export and a tianshou VectorReplayBuffer come from the real libraries.
The datasets are tiny (a few rows, a few envs), so that the whole corpus stays far below a
megabyte, yet they carry what the readers look at: spaces, circular state, episode ends,
infos and layout metadata. Tables of other writers' column types (HF images, an Arrow
tensor) are there too.
"""

from __future__ import annotations

import shutil
import sys
import warnings
from pathlib import Path

import numpy as np

from expcli.formats import Dataset, write_dataset
from expcli.formats.layouts import write_layout
from expcli.formats.rows import Layout
from expcli.formats.table import layout_named
from expcli.spec import CircularState
from tests.format_catalogue import LAYOUT_FILES, SUFFIXES, frames_once, suffix_of

CORPUS = Path(__file__).with_name("corpus")


def _cartpole() -> Dataset:
    """Two envs, wrapped, Box observations and Discrete actions."""
    rng = np.random.default_rng(0)
    rows, envs = 12, 2
    observations = rng.normal(size=(rows, envs, 4)).astype(np.float32)
    next_observations = np.roll(observations, -1, axis=0)
    terminated = np.zeros((rows, envs, 1), dtype=bool)
    terminated[[3, 8], 0] = True
    terminated[5, 1] = True
    truncated = np.zeros((rows, envs, 1), dtype=bool)
    truncated[10, 1] = True
    high = [4.8, 3.4e38, 0.42, 3.4e38]
    metadata = {
        "env_id": "CartPole-v1",
        "observation_space": {
            "type": "Box",
            "low": [-h for h in high],
            "high": high,
            "shape": [4],
            "dtype": "float32",
        },
        "action_space": {"type": "Discrete", "n": 2, "start": 0},
        "collector": {"mode": "dummy", "policy": "random", "steps": 30},
        "seed": 0,
    }
    return Dataset(
        {
            "observations": observations,
            "next_observations": next_observations,
            "actions": rng.integers(0, 2, size=(rows, envs, 1)),
            "rewards": np.ones((rows, envs, 1), dtype=np.float32),
            "terminated": terminated,
            "truncated": truncated,
        },
        CircularState(5, 1, True),
        metadata,
    )


def _pixels() -> Dataset:
    """One env, not filled, uint8 image observations, Box actions and an info tensor."""
    rng = np.random.default_rng(1)
    rows = 10
    observations = rng.integers(0, 256, size=(rows, 1, 2, 3), dtype=np.uint8)
    terminated = np.zeros((rows, 1, 1), dtype=bool)
    terminated[4] = True
    metadata = {
        "env_id": "Pixels-v0",
        "observation_space": {
            "type": "Box",
            "low": 0,
            "high": 255,
            "shape": [2, 3],
            "dtype": "uint8",
        },
        "action_space": {"type": "MultiDiscrete", "nvec": [3, 2], "start": [0, 0]},
        "collector": {"mode": "subproc", "policy": "random", "steps": 7},
    }
    return Dataset(
        {
            "observations": observations,
            "next_observations": np.roll(observations, -1, axis=0),
            "actions": rng.integers(0, 2, size=(rows, 1, 2)).astype(np.int32),
            "rewards": rng.normal(size=(rows, 1, 1)),
            "terminated": terminated,
            "truncated": np.zeros((rows, 1, 1), dtype=bool),
            "infos/lives": np.arange(rows, dtype=np.int16).reshape(rows, 1, 1),
        },
        CircularState(7, 0, False),
        metadata,
    )


def _skrl_partial(folder: Path) -> None:
    """A partly filled export written by skrl itself (its unwritten rows are NaN)."""
    import torch
    from skrl.memories.torch import RandomMemory

    memory = RandomMemory(memory_size=8, num_envs=2, device="cpu")
    for name, size, dtype in (
        ("states", 3, torch.float32),
        ("actions", 1, torch.int64),
        ("rewards", 1, torch.float32),
        ("terminated", 1, torch.bool),
    ):
        memory.create_tensor(name, size=size, dtype=dtype)
    generator = torch.Generator().manual_seed(0)
    for _ in range(5):
        memory.add_samples(
            states=torch.randn(2, 3, generator=generator),
            actions=torch.randint(0, 3, (2, 1), generator=generator),
            rewards=torch.randn(2, 1, generator=generator),
            terminated=torch.rand(2, 1, generator=generator) < 0.3,
        )
    scratch = folder / ".skrl"
    memory.save(str(scratch), format="pt")
    [path] = (scratch / "memories").iterdir()
    shutil.move(path, folder / "skrl-partial.pt")
    shutil.rmtree(scratch)


def _tianshou_vector(folder: Path) -> None:
    """A VectorReplayBuffer saved by tianshou (its pickled parts are never unpickled)."""
    from tianshou.data import Batch, VectorReplayBuffer

    buffer = VectorReplayBuffer(total_size=8, buffer_num=2)
    rng = np.random.default_rng(2)
    for step in range(5):
        buffer.add(
            Batch(
                obs=rng.normal(size=(2, 3)),
                act=rng.integers(0, 2, size=2),
                rew=rng.normal(size=2),
                terminated=np.array([step == 2, False]),
                truncated=np.array([False, step == 3]),
                obs_next=rng.normal(size=(2, 3)),
                info={},
            )
        )
    buffer.save_hdf5(str(folder / "tianshou-vector.h5"))


def _d4rl_plain(folder: Path) -> None:
    """A D4RL file as D4RL ships them: no next_observations, file-level metadata."""
    import h5py

    rng = np.random.default_rng(3)
    rows = 9
    with h5py.File(folder / "d4rl-plain.h5", "w") as h5:
        h5["observations"] = rng.normal(size=(rows, 3)).astype(np.float32)
        h5["actions"] = rng.normal(size=(rows, 2)).astype(np.float32)
        h5["rewards"] = rng.normal(size=rows).astype(np.float32)
        h5["terminals"] = np.eye(1, rows, 4, dtype=bool)[0]
        h5["timeouts"] = np.eye(1, rows, 7, dtype=bool)[0]
        h5["infos/qpos"] = rng.normal(size=(rows, 2))
        h5["metadata/algorithm"] = "SAC"
        h5["metadata/iteration"] = 1000
        h5["metadata/policy/fc0/weight"] = rng.normal(size=(2, 3))


def _foreign_table(folder: Path) -> None:
    """A Parquet table expcli did not write, as HF ``datasets`` writes one (variable lists,
    Minari's names), episodes by an episode column over two row groups: read from its
    columns (``formats.foreign_table``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(4)
    rows = 10
    table = pa.table(
        {
            "episode_id": [0] * 4 + [1] * 6,
            "step": list(range(4)) + list(range(6)),
            "observations": rng.normal(size=(rows, 3)).round(3).tolist(),
            "actions": rng.integers(0, 2, rows),
            "rewards": rng.normal(size=rows).astype(np.float32),
            "terminations": [False] * 3 + [True] + [False] * 6,
            "truncations": [False] * 9 + [True],
        }
    )
    pq.write_table(table, folder / "table.parquet", row_group_size=6)


def _foreign_ipc(folder: Path) -> None:
    """The same table as an Arrow IPC file of three record batches (``table.arrow``), and a
    table of one row per episode (``episodes.parquet``, lists as long as each episode, two
    row groups): read from their columns (``formats.ipc_format``, ``_table_episodes``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(folder / "table.parquet")
    with pa.OSFile(str(folder / "table.arrow"), "wb") as sink:
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=4)
    rng = np.random.default_rng(5)
    lengths = (3, 5, 2)
    episodes = pa.table(
        {
            "observations": [rng.normal(size=(n, 2)).round(3).tolist() for n in lengths],
            "actions": [rng.integers(0, 2, n).tolist() for n in lengths],
            "rewards": [rng.normal(size=n).astype(np.float32).tolist() for n in lengths],
            "terminals": [[False] * (n - 1) + [True] for n in lengths],
        }
    )
    pq.write_table(episodes, folder / "episodes.parquet", row_group_size=2)


def _foreign_types(folder: Path) -> None:
    """Column types of tables by other writers: HF ``Image`` PNGs with Minari's names
    (``images.parquet``, the struct and ``huggingface`` features HF ``datasets`` writes, two
    row groups) and an Arrow ``fixed_shape_tensor`` (``tensor.parquet``)."""
    import io
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    rng = np.random.default_rng(6)
    rows = 6
    blobs = []
    for frame in rng.integers(0, 256, (rows, 4, 4, 3), dtype=np.uint8):
        buffer = io.BytesIO()
        Image.fromarray(frame).save(buffer, "PNG")
        blobs.append(buffer.getvalue())
    images = pa.StructArray.from_arrays(
        [pa.array(blobs, pa.binary()), pa.nulls(rows, pa.string())], ["bytes", "path"]
    )
    features = {"observations": {"_type": "Image"}, "actions": {"_type": "Value", "dtype": "int64"}}
    table = pa.table(
        {
            "observations": images,
            "actions": rng.integers(0, 2, rows),
            "rewards": rng.normal(size=rows).astype(np.float32),
            "terminations": [False, False, True, False, False, False],
            "truncations": [False] * (rows - 1) + [True],
        }
    ).replace_schema_metadata({"huggingface": json.dumps({"info": {"features": features}})})
    pq.write_table(table, folder / "images.parquet", row_group_size=4)
    values = rng.normal(size=(rows, 2, 3)).astype(np.float32).round(3)
    tensors = pa.FixedShapeTensorArray.from_numpy_ndarray(values)
    table = pa.table(
        {"obs": tensors, "action": rng.integers(0, 2, rows), "done": table["terminations"]}
    )
    pq.write_table(table, folder / "tensor.parquet", row_group_size=4)


def _frames() -> Dataset:
    """Two envs of 64-byte frames in episodes: next observations stored once (``frames``)."""
    rng = np.random.default_rng(2)
    rows, envs = 6, 2
    observations = rng.integers(0, 256, size=(rows, envs, 8, 8), dtype=np.uint8)
    next_observations = np.roll(observations, -1, axis=0)
    terminated = np.zeros((rows, envs, 1), dtype=bool)
    terminated[2, 0] = terminated[3, 1] = True
    next_observations[terminated[..., 0]] = 255 - next_observations[terminated[..., 0]]
    metadata = {
        "env_id": "Frames-v0",
        "observation_space": {
            "type": "Box",
            "low": 0,
            "high": 255,
            "shape": [8, 8],
            "dtype": "uint8",
        },
        "action_space": {"type": "Discrete", "n": 4, "start": 0},
    }
    return Dataset(
        {
            "observations": observations,
            "next_observations": next_observations,
            "actions": rng.integers(0, 4, size=(rows, envs, 1)),
            "terminated": terminated,
        },
        CircularState(0, 0, True),
        metadata,
    )


def frame_seeds(folder: Path) -> None:
    """The once form (schema ``expcli/2``) in each native format but CSV, which stores all."""
    frames = _frames()
    for fmt in frames_once():
        write_dataset(frames, folder / f"frames{suffix_of(fmt)}", frames="once")


def build(folder: Path) -> list[Path]:
    """Write the corpus into ``folder`` (emptied first); returns the seeds written."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    cartpole, pixels = _cartpole(), _pixels()
    for name, dataset in (("cartpole", cartpole), ("pixels", pixels)):
        for suffix in SUFFIXES:
            write_dataset(dataset, folder / f"{name}{suffix}")
    frame_seeds(folder)
    for layout, fmt in LAYOUT_FILES:
        write_layout(cartpole, folder / f"{layout}{suffix_of(fmt)}", layout, overwrite=True)
    write_layout(pixels, folder / "d4rl-pixels.h5", "d4rl", overwrite=True)
    # the corpus keeps its folder names: a Minari folder is written under a dataset id
    write_layout(cartpole, folder / "minari-v0", "minari", overwrite=True)
    (folder / "minari-v0").rename(folder / "minari")
    write_layout(pixels, folder / "lerobot", "lerobot", overwrite=True)
    made = Path(__file__).parents[1] / "data" / "lerobot_made"  # written by LeRobot itself
    shutil.copytree(made, folder / "lerobot-made")
    shutil.copytree(made.with_name("lerobot_video"), folder / "lerobot-video")  # an AV1 MP4
    for storage in layout_named(Layout.MINARI).storages[1:]:  # the loss warning is expected
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            written = folder / f"minari-{storage}-v0"
            write_layout(cartpole, written, "minari", overwrite=True, format=storage)
            written.rename(folder / f"minari-{storage}")
    _skrl_partial(folder)
    _tianshou_vector(folder)
    _d4rl_plain(folder)
    _foreign_table(folder)
    _foreign_ipc(folder)
    _foreign_types(folder)
    return seeds(folder)


def seeds(folder: Path = CORPUS) -> list[Path]:
    """The seeds of a corpus folder, in name order: files, and Minari dataset folders."""
    return sorted(
        p for p in folder.iterdir() if not p.name.startswith(".") and not p.name.endswith(".json")
    )


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else CORPUS
    for seed in build(target):
        print(seed)
