"""npz and pt files whose arrays declare what they do not hold: refused before allocating.

Each case was a traceback, a hang or a blow-up (issue 13): a negative or huge shape in a
member header, a deflate bomb, a big-endian member under ``Memory.from_dataset`` and sampling, a
meta-device tensor, a tensor whose strides repeat one value over a huge shape.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from expcli import RandomMemory, load
from expcli.errors import FormatError, SchemaError
from expcli.formats import Dataset, read_dataset, write_dataset
from expcli.formats.header import header_specs
from expcli.replay import ReplayBuffer
from expcli.spec import CircularState
from tests.memory_probe import run_child


def small() -> Dataset:
    rng = np.random.default_rng(0)
    return Dataset(
        {
            "observations": rng.normal(size=(6, 2, 3)).astype(np.float32),
            "actions": rng.integers(0, 4, size=(6, 2, 1)),
            "rewards": rng.normal(size=(6, 2, 1)).astype(np.float32),
            "terminated": np.eye(6, 2, dtype=bool)[:, :, None],
        },
        CircularState(0, 0, True),
    )


def npz_with(path: Path, name: str, header: dict[str, object], data: bytes, deflate: bool) -> Path:
    """A skrl-style npz (no metadata) whose member ``name`` has this header and data."""
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, header)
    member.write(data)
    method = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as archive:
        archive.writestr(f"{name}.npy", member.getvalue())
        archive.writestr("rewards.npy", _npy(np.zeros((6, 1, 1), np.float32)))
    return path


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def test_negative_shape_in_a_member_header_is_refused(tmp_path: Path) -> None:
    header = {"descr": "<f4", "fortran_order": False, "shape": (-1, 1, 1)}
    path = npz_with(tmp_path / "neg.npz", "observations", header, bytes(24), deflate=False)
    with pytest.raises(FormatError, match=r"shape \(-1, 1, 1\)") as info:
        load(path)
    assert info.value.key == "observations.npy"


@pytest.mark.parametrize("deflate, fortran", [(True, False), (False, True), (True, True)])
def test_huge_shape_in_a_member_header_is_refused_before_allocating(
    tmp_path: Path, deflate: bool, fortran: bool
) -> None:
    header = {"descr": "<f4", "fortran_order": fortran, "shape": (2**40, 1, 3)}
    path = npz_with(tmp_path / "huge.npz", "observations", header, bytes(96), deflate)
    with pytest.raises(FormatError, match="holds 96 bytes") as info:
        load(path)
    assert info.value.path == str(path)


def test_a_deflate_bomb_is_inspected_and_converted_in_bounded_memory(tmp_path: Path) -> None:
    inflated = 400 << 20
    header = {"descr": "<f4", "fortran_order": False, "shape": (inflated // 4096, 1, 1024)}
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, header)
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        with z.open("observations.npy", "w") as out:
            out.write(member.getvalue())
            zeros = bytes(16 << 20)
            for _ in range(inflated // len(zeros)):
                out.write(zeros)
    bomb = tmp_path / "bomb.npz"
    assert bomb.stat().st_size < 1 << 20
    inspected = run_child(["-m", "expcli", "inspect", str(bomb), "--json"])
    converted = run_child(["-m", "expcli", "convert", str(bomb), str(tmp_path / "o.h5")])
    for run in (inspected, converted):
        assert run.returncode == 0, (run.seconds, run.stderr[-2000:])
        assert run.peak_mb < 300, run.peak_mb  # the member alone is 400 MB
    assert read_dataset(tmp_path / "o.h5").tensors["observations"].shape == header["shape"]


def test_a_big_endian_member_loads_natively_for_memories_and_sampling(tmp_path: Path) -> None:
    dataset = small()
    swapped = {k: v.astype(v.dtype.newbyteorder(">")) for k, v in dataset.tensors.items()}
    path = tmp_path / "big.npz"
    np.savez(path, **swapped)
    loaded = load(path)
    for name, array in dataset.tensors.items():
        assert loaded.tensors[name].dtype == array.dtype  # native order
        np.testing.assert_array_equal(loaded.tensors[name], array)
    memory = RandomMemory.from_dataset(loaded, device="cpu")
    assert torch.equal(memory.tensors["actions"], torch.from_numpy(dataset.tensors["actions"]))
    batch = ReplayBuffer(loaded, seed=0).sample(8)
    assert batch["observations"].dtype == torch.float32


def test_a_meta_device_tensor_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "meta.pt"
    torch.save({"observations": torch.empty((6, 2, 3), device="meta")}, path)
    with pytest.raises(FormatError, match="meta device") as info:
        load(path)
    assert info.value.key == "observations"


def test_a_tensor_repeating_one_value_over_a_huge_shape_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "expanded.pt"
    torch.save({"observations": torch.zeros(1, 1, 1).expand(10**6, 10**5, 4)}, path)
    with pytest.raises(FormatError, match="strides repeat") as info:
        load(path)
    assert info.value.key == "observations"


def test_a_non_contiguous_tensor_that_holds_its_values_is_read(tmp_path: Path) -> None:
    values = torch.arange(24, dtype=torch.float32).reshape(6, 2, 2)
    path = tmp_path / "t.pt"
    torch.save({"observations": values.transpose(0, 1).contiguous().transpose(0, 1)}, path)
    np.testing.assert_array_equal(load(path).tensors["observations"], values.numpy())


def test_a_tensor_entry_whose_dtype_is_not_a_name_is_a_schema_error() -> None:
    header = {"tensors": {"observations": {"dtype": ["float32"], "shape": [3]}}}
    with pytest.raises(SchemaError, match="malformed tensor entry"):
        header_specs(header, "x.npz")


def test_npz_written_compressed_by_numpy_still_round_trips(tmp_path: Path) -> None:
    dataset = small()
    path = write_dataset(dataset, tmp_path / "plain.npz")
    packed = tmp_path / "packed.npz"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    again = load(packed)
    assert again.state == dataset.state
    for name, array in dataset.tensors.items():
        np.testing.assert_array_equal(again.tensors[name], array)
