"""The test catalogue follows the format table, and tests list no formats by hand (issue 41).

``tests/format_catalogue.py`` computes its lists from ``expcli.formats.table``: a format
registered at run time joins them, by what its object says, with no test list edited. The
guard below reads every test module and finds the lists, tuples, sets and dict keys that
name two or more of the table's formats (by name or suffix, ``"h5"`` and ``"npz shards"``
too). The few left are listed with the reason each is a choice and not a catalogue.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from expcli.formats.dataset import Dataset
from expcli.formats.table import formats_in_order, register_format
from tests import format_catalogue as catalogue
from tests.formats.tiny_plugin import Tiny

TESTS = Path(__file__).parents[1]


class Streamed(Tiny):
    """A plugin format that streams and takes two compressions."""

    name = "streamed"
    suffixes = (".streamed",)
    compressions = ("plain", "packed")

    def write_stream(self, dataset: Dataset, out: IO[bytes], source: object) -> None:
        raise NotImplementedError  # never called: what it overrides is what the table reads


def test_a_registered_format_joins_the_catalogue_by_what_it_says() -> None:
    before = catalogue.file_formats()
    unregister = register_format(Streamed())
    try:
        assert catalogue.file_formats() == (*before, "streamed")
        assert catalogue.suffixes()[-1] == ".streamed"
        assert (".streamed", "streamed") in catalogue.named_files()
        assert "streamed" in catalogue.binary_formats()
        assert "streamed" in catalogue.stream_formats() and "streamed" in catalogue.whole_streams()
        assert ("streamed", "packed") in catalogue.compressions()
        assert catalogue.other_compressions()[-1] == ("streamed", "packed")
        assert "streamed" not in catalogue.shard_formats()
        assert "streamed" not in catalogue.frames_once()  # written and read back: every cell
    finally:
        unregister()
    assert catalogue.file_formats() == before and "streamed" not in catalogue.stream_formats()


def test_the_constants_are_the_functions_values() -> None:
    assert catalogue.FILE_FORMATS == catalogue.file_formats()
    assert catalogue.SUFFIXES == tuple(catalogue.suffix_of(f) for f in catalogue.FILE_FORMATS)
    assert catalogue.COMPRESSIONS == catalogue.compressions()
    assert catalogue.OTHER_COMPRESSIONS == catalogue.other_compressions()
    assert catalogue.SHARD_FORMATS == catalogue.shard_formats()
    assert catalogue.STREAM_FORMATS == catalogue.stream_formats()
    assert catalogue.LAYOUT_FILES == catalogue.layout_files()
    assert catalogue.LAYOUT_FOLDERS == catalogue.layout_folders()
    assert set(catalogue.frames_once()) <= set(catalogue.FILE_FORMATS)


ALLOWED: dict[str, tuple[int, str]] = {
    "formats/test_detect.py": (1, "an exclusion: the formats whose reader is torch's or h5py's"),
    "cli/test_help_pages.py": (1, "a stand-in list of choices for the completion helper"),
    "cli/test_convert_stdout.py": (1, "refused argument lists, each with its message"),
    "cli/test_storage_option.py": (1, "refused storage options, each with its message"),
    "cli/test_write_signals.py": (1, "one killed write per verb, each a subprocess: a sample"),
    "collect/test_folder_collect.py": (1, "kill -9 runs, seconds each: a sample of seeds"),
    "collect/test_spooled_collect.py": (1, "3,001 steps twice a format: two formats, for time"),
    "collect/test_frames_real_envs.py": (1, "a spooled or wrapped run of a few: minutes each"),
    "formats/test_block_cache.py": (2, "the readers that decode blocks through a BlockCache"),
    "replay/test_block_cache_storage.py": (3, "the storages read through a BlockCache"),
    "formats/test_bombs.py": (1, "a bomb is built for each container (zip, HDF5 filter)"),
    "formats/test_format_table.py": (1, "one row of each SpaceEstimate, its numbers asserted"),
    "formats/test_parquet_shards.py": (1, "asserts the built-in table's shard formats"),
    "formats/test_read_whole_memory.py": (3, "which readers map and which read whole: asserted"),
    "fuzz/mutations.py": (1, "the mutators of each container, by format"),
    "replay/test_torch_dataset.py": (1, "HDF5's library state and CSV's scratch file in a fork"),
    "test_bounded_readers.py": (2, "bounded-memory runs of hundreds of MiB: a sample"),
    "test_memory_probe.py": (1, "a bounded-memory run of hundreds of MiB: a sample"),
    "test_streaming.py": (3, "bounded-memory conversions of hundreds of MiB: a sample"),
}
"""Test module -> (how many hand-written format lists it keeps, why)."""


def _format_of() -> dict[str, str]:
    """Every spelling of a file format expcli writes: name, suffixes with and without dot.

    A format it only reads is in no catalogue list (``ipc``: ``.arrow`` is also the name of a
    Minari storage, which tests name).
    """
    spelled = {}
    for fmt in formats_in_order():
        if fmt.folder or not fmt.writes:
            continue
        spelled[fmt.name] = fmt.name
        for suffix in fmt.suffixes:
            spelled[suffix] = spelled[suffix.lstrip(".")] = fmt.name
    return spelled


def _strings(node: ast.AST) -> Iterator[str]:
    """The string constants of a literal, those of the tuples and lists in it too."""
    elements = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", [])
    for element in elements:
        if isinstance(element, ast.Constant) and isinstance(element.value, str):
            yield element.value
        elif isinstance(element, ast.Tuple | ast.List):
            yield from _strings(element)


def hand_written_lists(source: str) -> list[int]:
    """The lines of the literals in ``source`` that name two or more formats (the outermost:
    a list of pairs is one, whatever its pairs name)."""
    spelled = _format_of()
    found = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict):
            named = {
                spelled[first]
                for text in _strings(node)
                if (first := text.replace("-", " ").split(" ")[0]) in spelled
            }
            if len(named) >= 2:
                found.append(node.lineno)
                return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return found


def test_the_guard_finds_a_hand_written_list() -> None:
    source = 'X = ["npz", ".h5"]\nY = [("pt", "npz"), ("parquet shards", 2)]\nZ = {"npz": 1}\n'
    assert hand_written_lists(source) == [1, 2]


def test_no_test_lists_formats_by_hand() -> None:
    counts: Counter[str] = Counter()
    for path in sorted(TESTS.rglob("*.py")):
        name = path.relative_to(TESTS).as_posix()
        if name in ("format_catalogue.py", "formats/test_format_catalogue.py"):
            continue
        counts[name] = len(hand_written_lists(path.read_text(encoding="utf-8")))
    unexpected = {n: c for n, c in counts.items() if c != ALLOWED.get(n, (0, ""))[0]}
    assert not unexpected, (
        "hand-written format lists (take them from tests/format_catalogue.py, or say why in "
        f"ALLOWED): {unexpected}"
    )
