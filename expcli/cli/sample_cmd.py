"""``expcli sample``: print one batch as a trainer would receive it from a ReplayBuffer.

The batch is drawn as ``ReplayBuffer.sample`` draws it, as numpy arrays
(``ReplayBuffer.sample_arrays``): the command never imports torch, unless the file is a
``.pt`` (which only torch reads).
"""

from __future__ import annotations

import enum
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from expcli.cli._console import err_console, out_console
from expcli.cli._errors import reports_errors
from expcli.cli._read_options import (
    ColumnsOption,
    DoneMeansOption,
    NumEnvs,
    warn_unrecorded_envs,
)
from expcli.errors import ConfigError, printable
from expcli.host_memory import check_fits

if TYPE_CHECKING:
    import numpy as np

MAX_ROW_VALUES = 64
"""Rows of more values than this (images) are summarised (min, max, mean), not printed."""


class SamplerName(enum.StrEnum):
    """The samplers the command offers."""

    random = "random"
    prioritized = "prioritized"
    slice = "slice"


@reports_errors
def sample_cmd(
    file: Annotated[Path, typer.Argument(help="Dataset to sample ({sources}).")],
    batch_size: Annotated[
        int, typer.Option("--batch-size", "-b", min=1, help="Transitions per batch.")
    ] = 256,
    sampler: Annotated[
        SamplerName, typer.Option("--sampler", help="How to draw the batch.")
    ] = SamplerName.random,
    slice_len: Annotated[
        int | None,
        typer.Option("--slice-len", min=1, help="Steps per sequence (with --sampler slice)."),
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the sampler.")] = None,
    rows: Annotated[int, typer.Option("--rows", min=0, help="Leading rows to print.")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="Print the batch as JSON.")] = False,
    num_envs: NumEnvs = None,
    columns: ColumnsOption = None,
    done_means: DoneMeansOption = None,
) -> None:
    """Draw one batch from a dataset and print its tensors' shapes and first rows."""
    from expcli.replay import PrioritizedSampler, RandomSampler, ReplayBuffer, SliceSampler
    from expcli.replay.storages import DatasetStorage

    if (sampler is SamplerName.slice) != (slice_len is not None):
        raise ConfigError(
            "--slice-len is needed with --sampler slice"
            if slice_len is None
            else "--slice-len only applies to --sampler slice"
        )
    size = batch_size
    chosen: Any
    if sampler is SamplerName.slice:
        assert slice_len is not None
        size = max(1, batch_size // slice_len) * slice_len
        chosen = SliceSampler(slice_len=slice_len)
    elif sampler is SamplerName.prioritized:
        chosen = PrioritizedSampler()
    else:
        chosen = RandomSampler()
    warn_unrecorded_envs(file, num_envs)
    storage = DatasetStorage.open(  # rows are read as drawn
        file, num_envs=num_envs, columns=columns, done_means=done_means
    )
    buffer = ReplayBuffer(storage, sampler=chosen, seed=seed)
    _check_batch_fits(buffer, size)
    batch, info = buffer.sample_arrays(size)
    if size != batch_size:
        assert slice_len is not None
        err_console().print(
            f"note: batch size {size} ({size // slice_len} slices of {slice_len} steps)",
            highlight=False,
        )
    report = _report(file, sampler.value, seed, len(buffer), batch, info, rows)
    if as_json:
        typer.echo(json.dumps(report))
    else:
        _print(report, batch, rows)


def _check_batch_fits(buffer: Any, size: int) -> None:
    """Refuse, before drawing, a batch larger than the memory this machine has available."""
    import math

    arrays = buffer.storage.arrays().values()
    per = sum(a.dtype.itemsize * math.prod(a.shape[2:]) for a in arrays)
    per += 32  # the drawn indexes and the sampler's own arrays
    check_fits(
        size * per, f"--batch-size {size:,} ({per:,} bytes per transition)", "draw a smaller batch"
    )


def _report(
    file: Path,
    sampler: str,
    seed: int | None,
    held: int,
    batch: dict[str, np.ndarray],
    info: dict[str, Any],
    rows: int,
) -> dict[str, Any]:
    """What the command shows, as plain JSON-ready values."""
    index = info["index"]
    report: dict[str, Any] = {
        "file": str(file),
        "sampler": sampler,
        "seed": seed,
        "transitions": held,
        "batch_shape": list(index.shape),
        "index": index[:rows].tolist(),
        "tensors": {name: _tensor_report(tensor, rows) for name, tensor in batch.items()},
    }
    if "priority_weight" in info:
        report["priority_weight"] = _plain(info["priority_weight"][:rows].tolist())
    return report


def _tensor_report(tensor: np.ndarray, rows: int) -> dict[str, Any]:
    """A tensor's dtype, shape and first rows, for printing.

    For rows of many values (images), the batch's min, max and mean instead of the rows.
    The dtype is named as numpy and torch both name it (``float32``, ``bool``, ``uint8``).
    """
    out: dict[str, Any] = {
        "dtype": str(tensor.dtype),
        "shape": list(tensor.shape),
    }
    per_row = math.prod(tensor.shape[1:])
    if per_row <= MAX_ROW_VALUES:
        out["first"] = _plain(tensor[:rows].tolist())
        return out
    values = tensor.astype("float64")  # a batch (never empty): a small copy
    out["summary"] = {
        "values_per_row": per_row,
        "min": _plain(float(values.min())),
        "max": _plain(float(values.max())),
        "mean": _plain(float(values.mean())),
    }
    return out


def _plain(value: Any) -> Any:
    """Non-finite floats as strings, so that the JSON is valid everywhere."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _print(report: dict[str, Any], batch: dict[str, np.ndarray], rows: int) -> None:
    import numpy as np
    from rich.markup import escape
    from rich.table import Table

    console = out_console()
    shape = " x ".join(map(str, report["batch_shape"]))
    console.print(
        f"{escape(printable(report['file']))}: {report['transitions']:,} transitions; "
        f"one {report['sampler']} "
        f"batch of {shape}" + (f" (seed {report['seed']})" if report["seed"] is not None else ""),
        highlight=False,
        soft_wrap=True,
    )
    table = Table("tensor", "dtype", "shape", "first rows")
    for name, tensor in report["tensors"].items():
        if "summary" in tensor:
            summary = tensor["summary"]
            first = f"{summary['values_per_row']:,} values per row; batch " + ", ".join(
                f"{k} {float(summary[k]):.4g}" for k in ("min", "max", "mean")
            )
        else:
            head = batch[name][:rows]
            first = "\n".join(
                np.array2string(row, precision=4, separator=", ", max_line_width=60) for row in head
            )
        dims = str(tuple(tensor["shape"]))
        table.add_row(escape(printable(name)), tensor["dtype"], dims, escape(first))
    console.print(table)
    console.print(f"index: {report['index']}", highlight=False, soft_wrap=True)
    if "priority_weight" in report:
        console.print(f"priority_weight: {report['priority_weight']}", highlight=False)
