"""DictBatch and TemporalBatch: rlstructures' DictTensor and TemporalDictTensor operations."""

from __future__ import annotations

import pytest
import torch

from expcli import DictBatch, TemporalBatch


def dict_batch() -> DictBatch:
    return DictBatch(
        {
            "agent/obs": torch.arange(12.0).reshape(4, 3),
            "agent/act": torch.arange(4),
            "r": torch.ones(4),
        }
    )


def test_dict_batch_slicing_and_keys() -> None:
    batch = dict_batch()
    assert (
        batch.n_elems() == 4 and len(batch) == 3 and set(batch) == {"agent/obs", "agent/act", "r"}
    )
    assert batch.slice(1, 3)["agent/act"].tolist() == [1, 2]
    assert batch.slice(2)["agent/act"].tolist() == [2]
    assert batch.index(3)["agent/obs"].tolist() == [[9.0, 10.0, 11.0]]
    assert list(batch.get(["r"])) == ["r"]
    assert batch.get("r") is batch["r"]
    cloned = batch.get(["r"], clone=True)
    cloned["r"][0] = 5
    assert batch["r"][0] == 1
    assert set(batch.truncate_key("agent/")) == {"obs", "act"}
    assert set(batch.truncate_key("agent/").prepend_key("x.")) == {"x.obs", "x.act"}
    with pytest.raises(KeyError, match="nope"):
        batch.get(["nope"])


def test_dict_batch_cat_unfold_and_device() -> None:
    batch = dict_batch()
    parts = batch.unfold()
    assert len(parts) == 4 and all(p.n_elems() == 1 for p in parts)
    again = DictBatch.cat(parts)
    assert all(torch.equal(again[k], batch[k]) for k in batch)
    assert batch.to("cpu").device() == torch.device("cpu")
    assert DictBatch.cat([]).n_elems() == 0
    with pytest.raises(ValueError, match="first"):
        DictBatch({"a": torch.zeros(2), "b": torch.zeros(3)})
    with pytest.raises(ValueError, match="batch size"):
        batch.set("c", torch.zeros(5))


def temporal() -> TemporalBatch:
    x = torch.arange(24.0).reshape(3, 4, 2)
    return TemporalBatch({"x": x, "y": x[..., 0].long()}, torch.tensor([4, 2, 1]))


def test_temporal_batch_mask_slices_and_index() -> None:
    batch = temporal()
    assert batch.mask().tolist() == [[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]]
    assert batch.mask().dtype == torch.float32
    part = batch.temporal_slice(1, 3)
    assert part.max_len == 2 and part.lengths.tolist() == [2, 1, 0]
    assert torch.equal(part["x"], batch["x"][:, 1:3])
    step = batch.temporal_index(1)
    assert isinstance(step, DictBatch) and step["y"].tolist() == [2, 10, 18]
    kept, where = batch.masked_temporal_index(1)
    assert where.tolist() == [0, 1] and kept["y"].tolist() == [2, 10]
    assert batch.slice(1, 3).lengths.tolist() == [2, 1]
    assert batch.index(0).n_elems() == 1
    assert list(batch.get(["y"])) == ["y"]


def test_temporal_batch_shorten_flatten_cat_unfold_to() -> None:
    batch = temporal().slice(1, 3)
    short = batch.shorten()
    assert short.max_len == 2 and torch.equal(short["x"], batch["x"][:, :2])
    flat = temporal().flatten()
    assert flat["y"].tolist() == [0, 2, 4, 6, 8, 10, 16]
    joined = TemporalBatch.cat([short, temporal()])
    assert joined.max_len == 4 and joined.lengths.tolist() == [2, 1, 4, 2, 1]
    assert (joined["x"][:2, 2:] == 0).all()
    assert [u.n_elems() for u in temporal().unfold()] == [1, 1, 1]
    assert temporal().to("cpu").lengths.device.type == "cpu"
    with pytest.raises(ValueError, match="lengths"):
        TemporalBatch({"x": torch.zeros(2, 3)}, torch.tensor([4, 1]))
    with pytest.raises(ValueError, match=r"0 <= 2 <= 1"):
        temporal().temporal_slice(2, 1)
    assert TemporalBatch({"x": torch.zeros(2, 3)}).lengths.tolist() == [3, 3]
