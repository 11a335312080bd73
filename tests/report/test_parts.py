"""The report's parts on their own: which episodes it plays, what its pass keeps of each
tensor, how frames become pictures and PNGs within a budget."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("matplotlib")
from PIL import Image

from expcli.report._frames import encode_frames
from expcli.report.choice import choose_episodes
from expcli.report.leaves import Kind, Role, leaves
from expcli.report.player import as_bytes
from expcli.report.profile import MAX_VALUES, SAMPLE_ROWS, Profiler
from expcli.summary.chronology import Chunk
from expcli.summary.episodes import CompleteEpisodes


def records(returns: list[float], lengths: list[int] | None = None) -> CompleteEpisodes:
    n = len(returns)
    lengths = lengths or [3] * n
    return CompleteEpisodes(
        returns=np.asarray(returns, np.float64),
        lengths=np.asarray(lengths, np.int64),
        columns=np.arange(n, dtype=np.int32) % 2,
        last_rows=np.arange(n, dtype=np.int64) * 4 + 3,
        terminated=np.ones(n, bool),
    )


def test_best_worst_median_then_random_ones() -> None:
    chosen = choose_episodes(records([5, 1, 9, 3, 7, 2, 8]), 100, by_return=True, random=2)
    named = {c.names[0]: c.number for c in chosen}
    assert (named["best"], named["worst"], named["median"]) == (2, 1, 0)  # 9, 1 and 5
    randoms = [c for c in chosen if c.names == ("random",)]
    assert len(randoms) == 2 and not {c.number for c in randoms} & {0, 1, 2}
    again = choose_episodes(records([5, 1, 9, 3, 7, 2, 8]), 100, by_return=True, random=2)
    assert [c.number for c in again] == [c.number for c in chosen]  # seeded


def test_one_episode_is_played_once_under_every_name() -> None:
    (only,) = choose_episodes(records([4.0]), 100, by_return=True)
    assert only.names == ("best", "worst", "median") and only.number == 0


def test_ties_go_to_the_first_and_lengths_rank_without_rewards() -> None:
    chosen = choose_episodes(records([1, 1, 1], [2, 9, 4]), 100, by_return=False, random=0)
    named = {name: c.number for c in chosen for name in c.names}
    assert named == {"best": 1, "worst": 0, "median": 2}
    chosen = choose_episodes(records([3, 3, 3]), 100, by_return=True, random=0)
    assert {name: c.number for c in chosen for name in c.names}["best"] == 0


def test_an_episode_s_rows_wrap_past_row_zero() -> None:
    wrapped = CompleteEpisodes(np.zeros(1), np.array([4]), np.array([1], np.int32),
                               np.array([1]), np.ones(1, bool))  # fmt: skip
    (chosen,) = choose_episodes(wrapped, 6, by_return=True)
    assert chosen.rows.tolist() == [4, 5, 0, 1] and chosen.column == 1


def test_leaves_say_what_each_tensor_is() -> None:
    tensors = {
        "observations/image": np.zeros((2, 1, 7, 7, 3), np.uint8),
        "observations/direction": np.zeros((2, 1, 1), np.int64),
        "observations/mission": np.zeros((2, 1, 8), np.int32),
        "next_observations/image": np.zeros((2, 1, 7, 7, 3), np.uint8),
        "actions": np.zeros((2, 1, 1), np.int64),
        "rewards": np.zeros((2, 1, 1), np.float32),
        "terminated": np.zeros((2, 1, 1), bool),
        "infos/lives": np.zeros((2, 1), np.int64),
    }
    space = {"type": "Dict", "spaces": {
        "image": {"type": "Box", "low": 0, "high": 255, "shape": [7, 7, 3], "dtype": "uint8"},
        "direction": {"type": "Discrete", "n": 4},
        "mission": {"type": "Text", "max_length": 8, "min_length": 1, "charset": "ab"},
    }}  # fmt: skip
    found = leaves(tensors, {"observation_space": space, "action_space": {"type": "Discrete",
                                                                          "n": 3}})  # fmt: skip
    described = [(leaf.name, leaf.role, leaf.kind) for leaf in found]
    assert described == [
        ("observations/image", Role.OBSERVATION, Kind.IMAGE),
        ("observations/direction", Role.OBSERVATION, Kind.NUMBERS),
        ("observations/mission", Role.OBSERVATION, Kind.TEXT),
        ("actions", Role.ACTION, Kind.NUMBERS),
        ("rewards", Role.REWARD, Kind.NUMBERS),
        ("infos/lives", Role.OTHER, Kind.NUMBERS),
    ]
    assert found[0].bounds is not None and found[1].discrete and found[3].discrete


@pytest.mark.parametrize(
    ("feature", "picture"),
    [
        ((6, 5), lambda c: c),
        ((6, 5, 3), lambda c: c),
        ((6, 5, 1), lambda c: c[..., 0]),
        ((3, 6, 5), lambda c: c.transpose(0, 2, 3, 1)),
        ((4, 6, 5), lambda c: c[:, 3]),  # a stack of frames: the newest
        ((6, 5, 4), lambda c: c[..., 3]),  # a stack too, channels last
        ((6, 5, 2), lambda c: c[..., 1]),
        ((2, 6, 5), lambda c: c[:, 1]),
        ((8, 6, 5), lambda c: c[..., 4]),  # the smaller end axis is the stack
    ],
)
def test_image_views(feature: tuple[int, ...], picture) -> None:
    cells = np.random.default_rng(0).integers(0, 255, (2, *feature), dtype=np.uint8)
    (leaf,) = leaves({"observations": cells[:, None]}, {})
    assert leaf.kind is Kind.IMAGE and leaf.view is not None
    assert np.array_equal(leaf.view.picture(cells), picture(cells))


def test_large_images_show_every_kth_pixel_and_odd_shapes_are_numbers() -> None:
    (big,) = leaves({"observations": np.zeros((1, 1, 700, 50), np.uint8)}, {})
    assert big.view is not None and big.view.step == 3
    cells = np.arange(700 * 50, dtype=np.int64).reshape(1, 700, 50).astype(np.uint8)
    assert np.array_equal(big.view.picture(cells), cells[:, ::3, ::3])
    for shape in ((1, 1, 9), (1, 1, 1, 9), (1, 1, 2, 3, 4, 5)):
        (leaf,) = leaves({"observations": np.zeros(shape, np.float32)}, {})
        assert leaf.kind is Kind.NUMBERS


def chunk_of(name: str, values: np.ndarray) -> Chunk:
    return Chunk(0, values.shape[0], 0, values.shape[1], {name: values})


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 300),
    dims=st.integers(1, 40),
    cuts=st.lists(st.integers(0, 300), max_size=4),
    distinct=st.integers(1, 80),
)
def test_the_profile_is_exact_where_it_says_so_whatever_the_chunks(
    rows: int, dims: int, cuts: list[int], distinct: int
) -> None:
    rng = np.random.default_rng(rows * 41 + dims)
    values = rng.integers(0, distinct, (rows, 2, dims)).astype(np.float32)
    values[rng.random((rows, 2, dims)) < 0.05] = np.nan
    (leaf,) = leaves({"observations": values}, {})
    profiler = Profiler([leaf], seed=1)
    bounds = [0, *sorted(c for c in cuts if c <= rows), rows]
    for a, b in zip(bounds, bounds[1:], strict=False):
        profiler.update(chunk_of("observations", values[a:b]), None)
    profile = profiler.result()["observations"]
    flat = values.reshape(-1, dims)[:, :32]
    assert profile.seen == rows * 2
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(
            profile.low, np.nanmin(np.where(np.isnan(flat), np.inf, flat), axis=0)
        )
    assert profile.sample.shape == (min(rows * 2, SAMPLE_ROWS), min(dims, 32))
    sampled = {tuple(np.nan_to_num(row, nan=-1)) for row in profile.sample}
    assert sampled <= {tuple(np.nan_to_num(row.astype(np.float64), nan=-1)) for row in flat}
    if dims == 1:
        finite = flat[np.isfinite(flat[:, 0]), 0]
        uniques, counts = np.unique(finite, return_counts=True)
        if len(uniques) <= MAX_VALUES:
            assert profile.counts == dict(zip(uniques.tolist(), counts.tolist(), strict=True))
        else:
            assert profile.counts is None
    else:
        assert profile.counts is None


def test_the_sample_is_uniform_over_the_pass() -> None:
    rows = np.arange(40_000, dtype=np.float32).reshape(-1, 1, 1)
    (leaf,) = leaves({"observations": rows}, {})
    profiler = Profiler([leaf])
    for start in range(0, len(rows), 1000):  # the first chunks must not win
        profiler.update(chunk_of("observations", rows[start : start + 1000]), None)
    sample = profiler.result()["observations"].sample[:, 0]
    assert len(sample) == SAMPLE_ROWS and len(np.unique(sample)) == SAMPLE_ROWS
    halves = np.histogram(sample, bins=2, range=(0, 40_000))[0]
    assert abs(halves[0] - halves[1]) < 0.1 * SAMPLE_ROWS


def test_an_image_profile_counts_pixel_values_of_the_frames_it_looks_at() -> None:
    frames = np.zeros((10, 1, 4, 4, 3), np.uint8)
    frames[..., 0] = 7
    (leaf,) = leaves({"observations": frames}, {})
    profiler = Profiler([leaf])
    profiler.update(chunk_of("observations", frames), None)
    profile = profiler.result()["observations"]
    assert profile.pixels is not None and profile.pixels.shape == (3, 256)
    looked = profile.frames_summed * 16
    assert profile.pixels[0, 7] == looked and profile.pixels[1, 0] == looked
    assert profile.mean_frame is not None and (profile.mean_frame[..., 0] == 7).all()


def decode(uri: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))))


def test_frames_are_lossless_and_stay_within_their_budget() -> None:
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 256, (400, 24, 20, 3), dtype=np.uint8)  # does not compress

    def read(steps: np.ndarray) -> np.ndarray:
        return noise[steps]

    roomy = encode_frames(read, 400, budget=10**9, max_frames=100, to_bytes=lambda p: p)
    assert roomy.stride == 4 and roomy.steps == tuple(range(0, 400, 4))
    for step, uri in zip(roomy.steps, roomy.images, strict=True):
        assert np.array_equal(decode(uri), noise[step])
    budget = 40 * len(roomy.images[0])
    tight = encode_frames(read, 400, budget=budget, max_frames=100, to_bytes=lambda p: p)
    assert tight.size <= budget and len(tight.steps) >= 16
    assert tight.stride in (16, 32) and all(s % tight.stride == 0 for s in tight.steps)
    assert np.array_equal(decode(tight.images[-1]), noise[tight.steps[-1]])
    tiny = encode_frames(read, 400, budget=16 * 300, max_frames=100, to_bytes=lambda p: p)
    assert tiny.pixel_step > 1  # a frame too large for the budget shows every k-th pixel
    assert np.array_equal(decode(tiny.images[0]), noise[0, :: tiny.pixel_step, :: tiny.pixel_step])


def test_pictures_become_bytes() -> None:
    assert as_bytes(np.array([True, False]), None).tolist() == [255, 0]
    floats = np.array([[-1.0, 0.0, 1.0, np.nan]])
    assert as_bytes(floats, (-1.0, 1.0)).tolist() == [[0, 128, 255, 0]]
    same = np.arange(5, dtype=np.uint8)
    assert as_bytes(same, (0, 1)) is same
