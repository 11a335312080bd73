"""`expcli sample`: one batch printed as text or JSON; errors as one line and an exit code."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from expcli.cli import app
from tests.replay.episode_data import make_memory


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    memory = make_memory(40, 4, [4] * 50, seed=0, p_done=0.05)
    return memory.save(tmp_path_factory.mktemp("sample") / "run.pt")


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"NO_COLOR": "1", "COLUMNS": "120"})


def test_text_output_shows_shapes_and_first_rows(dataset) -> None:
    result = run("sample", dataset, "--batch-size", "256", "--seed", "3")
    assert result.exit_code == 0, result.output
    assert "160 transitions; one random batch of 256 (seed 3)" in result.stdout
    assert "observations" in result.stdout and "(256, 2)" in result.stdout
    assert "index: [" in result.stdout


def test_json_output_is_the_batch_the_library_draws(dataset) -> None:
    from expcli import ReplayBuffer, SliceSampler

    result = run(
        "sample",
        dataset,
        "-b",
        "32",
        "--sampler",
        "slice",
        "--slice-len",
        "8",
        "--seed",
        "1",
        "--json",
        "--rows",
        "2",
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    batch, info = ReplayBuffer(dataset, sampler=SliceSampler(slice_len=8), seed=1).sample(
        32, return_info=True
    )
    assert report["batch_shape"] == [4, 8]
    assert report["index"] == info["index"][:2].tolist()
    assert report["tensors"]["clock"]["shape"] == [4, 8, 1]
    assert report["tensors"]["clock"]["first"] == batch["clock"][:2].tolist()


def test_prioritized_output_has_weights(dataset) -> None:
    report = json.loads(run("sample", dataset, "--sampler", "prioritized", "--json").stdout)
    assert report["priority_weight"] == [1.0, 1.0, 1.0]


def test_slice_batch_size_rounds_to_whole_slices(dataset) -> None:
    result = run("sample", dataset, "-b", "10", "--sampler", "slice", "--slice-len", "4", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["batch_shape"] == [2, 4]
    assert "batch size 8" in result.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--sampler", "slice"], 2, "--slice-len is needed"),
        (["--slice-len", "3"], 2, "--slice-len only applies"),
        (["--sampler", "slice", "--slice-len", "100"], 2, "no slice of 100 steps"),
        (["--batch-size", str(10**13)], 2, "--batch-size 10,000,000,000,000 ("),
    ],
)
def test_bad_options_are_one_line_errors(dataset, args, code, message) -> None:
    result = run("sample", dataset, *args)
    assert result.exit_code == code
    assert message in result.stderr and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_missing_or_broken_file_is_an_error(tmp_path) -> None:
    result = run("sample", str(tmp_path / "none.pt"))
    assert result.exit_code == 1 and "no such file" in result.stderr
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"PK\x03\x04 not a zip")
    result = run("sample", str(bad))
    assert result.exit_code == 1 and str(bad) in result.stderr
