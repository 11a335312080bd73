"""Which Parquet files a folder or a glob names, read as one table, in which order.

A source that is a folder without a manifest (expcli's sharded folder) and that no layout
claims (LeRobot's ``meta/info.json``, Minari's ``metadata.json``), or a glob
(``'data/train-*.parquet'``), is the Parquet files it holds, whoever wrote them: HF
``datasets``' ``data/train-00000-of-00003.parquet`` tree, a flat folder of ``*.parquet``,
polars' and duckdb's folders. ``table_files`` finds them:

- Files named ``*.parquet`` (any case), in the folder or any folder below; other files
  (``README.md``, ``.gitattributes``, ``dataset_infos.json``) are never read, nor names
  starting with ``.`` or ``_`` (``.cache/``, Spark's ``_SUCCESS``), as pyarrow's datasets
  pass them over.
- In natural order of their paths below the root: ``train-2`` before ``train-10``,
  ``episode=2/`` before ``episode=10/``.
- Nothing is reached through a link (the rule of ``_guards.open_inside``): a link named
  ``*.parquet``, or one leading to a folder, is refused in one line, as is a folder too
  full (``MAX_FILES``, ``EXPCLI_MAX_PARQUET_FILES``).
- HF's split names: where a folder's files are of two splits or more (``train-*``,
  ``test-*``; HF ``datasets``' file and folder keywords), the ``train`` files are read and
  the warning says which were left out, as ``load_dataset(..., split="train")`` reads;
  without a ``train`` split, reading refuses and asks for a glob. A glob reads every file
  it matches: it is the user's choice of files.
- Hive folders (``episode=3/``, what duckdb's ``PARTITION_BY`` and polars'
  ``partition_by`` write) give each file's rows a column of their integer value, unless the
  file holds that column itself (polars keeps it); a value that is not an integer
  (``split=train/``) is refused, asking for a glob of one partition.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path

from expcli.errors import ConfigError, FormatError
from expcli.formats._folder_members import member

__all__ = [
    "FILES_VARIABLE",
    "MAX_FILES",
    "TableFiles",
    "holds_parquet",
    "is_pattern",
    "max_files",
    "source_size",
    "table_files",
]

MAX_FILES = 10_000
"""The most Parquet files read as one table (each footer is read when opened: ~0.2 ms)."""
FILES_VARIABLE = "EXPCLI_MAX_PARQUET_FILES"
_MAX_ENTRIES = 1 << 20  # folder entries looked at while finding the files
_SUFFIX = ".parquet"
_LAYOUT = "Parquet"  # how ``member``'s refusals name the folder
_WILDCARDS = re.compile(r"[*?[]")
_SHARD = re.compile(r"(?P<split>.+?)-\d{5}-of-\d{5}")
_KEYWORDS = {
    "train": ("train", "training"),
    "validation": ("validation", "valid", "dev", "val"),
    "test": ("test", "testing", "eval", "evaluation"),
}
"""HF ``datasets``' split keywords (``data_files.SPLIT_KEYWORDS``)."""
_WORD = "(?:^|[-._ 0-9]){}(?:[-._ 0-9]|$)"
_PARTITION = re.compile(r"(?P<key>[^=]+)=(?P<value>.*)")
_INTEGER = re.compile(r"-?\d{1,18}")


@dataclass(frozen=True, slots=True)
class TableFiles:
    """The Parquet files of a folder or a glob, in the order read.

    Attributes:
        source: The folder or the glob, as named.
        root: The folder the files lie below (a glob's part without wildcards).
        paths: The files, in natural order of their paths below ``root``.
        partitions: Each file's hive values (``episode=3/``: ``{"episode": 3}``).
        left_out: What the split rule left out, said in the warning (empty: nothing).
        split: The split read where the folder holds several, else None.
    """

    source: Path
    root: Path
    paths: tuple[Path, ...]
    partitions: tuple[dict[str, int], ...]
    left_out: str = ""
    split: str | None = None

    @property
    def described(self) -> str:
        """What was read, for the warning: "3 Parquet files read as one table (...)"."""
        split = f", split {self.split!r} ({self.left_out} left out)" if self.split else ""
        return f"{len(self.paths):,} Parquet files read as one table{split}"


def is_pattern(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a glob (``*``, ``?``, ``[``) naming no existing file or folder."""
    return bool(_WILDCARDS.search(os.fspath(path))) and not os.path.lexists(path)


def max_files() -> int:
    """The most files read as one table: ``MAX_FILES``, or ``EXPCLI_MAX_PARQUET_FILES``."""
    text = os.environ.get(FILES_VARIABLE, "")
    return int(text) if text.isdigit() and int(text) > 0 else MAX_FILES


def holds_parquet(folder: str | os.PathLike[str]) -> bool:
    """Whether a folder holds a ``*.parquet`` entry, in it or below (links not followed).

    A link to a folder counts as one: reading the folder then refuses it, naming it.
    """
    seen = 0
    stack = [Path(folder)]
    while stack and seen < _MAX_ENTRIES:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    seen += 1
                    if _hidden(entry.name):
                        continue
                    if entry.name.lower().endswith(_SUFFIX):
                        return True
                    if entry.is_symlink() and os.path.isdir(entry.path):
                        return True
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
        except OSError:
            continue
    return False


def table_files(source: str | os.PathLike[str]) -> TableFiles:
    """The Parquet files of a folder or a glob, checked, in the order read.

    Raises:
        ConfigError: A glob that matches no Parquet file, or a folder of several splits
            and none named ``train``.
        FormatError: A file or folder on the way is a link (or a pipe, a device), more
            files than ``max_files()``, none, or a hive value that is not an integer.
    """
    path = Path(source)
    if is_pattern(path):
        root = _root(path)
        paths = _matches(path)
        if not paths:
            raise ConfigError(
                "matches no Parquet file (*.parquet); quote the glob so that the shell "
                "does not expand it",
                path=path,
            )
        found = [member(root, p, _LAYOUT) for p in paths]
        split, left_out = None, ""
    else:
        root, found = path, _walk(path)
        if not found:
            raise FormatError("holds no Parquet file (*.parquet)", path=path)
        found, split, left_out = _split(path, found)
    found.sort(key=lambda p: (_natural(p.relative_to(root)), p))
    partitions = tuple(_partitions(root, p) for p in found)
    if len({tuple(sorted(p)) for p in partitions}) > 1:
        first = next(p for p, keys in zip(found, partitions, strict=True) if keys != partitions[0])
        raise FormatError(
            f"lies in other hive folders ({_keys(partitions[0])}) than "
            f"{found[0].relative_to(root)} ({_keys(_partitions(root, first))}); expected "
            "one partitioning",
            path=first,
        )
    return TableFiles(path, root, tuple(found), partitions, left_out, split)


def source_size(path: str | os.PathLike[str]) -> int | None:
    """The bytes of the files a glob reads, or None: ``path`` is no glob."""
    if not is_pattern(path):
        return None
    return sum(os.lstat(p).st_size for p in table_files(path).paths)


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def _root(pattern: Path) -> Path:
    """The folder a glob's files lie below: its leading parts without wildcards."""
    parts = []
    for part in pattern.parts[:-1]:
        if _WILDCARDS.search(part):
            break
        parts.append(part)
    return Path(*parts) if parts else Path(".")


def _matches(pattern: Path) -> list[Path]:
    """The ``*.parquet`` names a glob matches (``**``: any folders deep).

    Raises:
        FormatError: More than ``max_files()`` of them.
    """
    found = []
    for name in glob.iglob(os.fspath(pattern), recursive=True, include_hidden=False):
        if name.lower().endswith(_SUFFIX):
            found.append(Path(name))
            _count(found, pattern, "matches")
    return found


def _walk(folder: Path) -> list[Path]:
    """The ``*.parquet`` files below ``folder``, refusing a link on the way to one.

    Raises:
        FormatError: A link named ``*.parquet``, or leading to a folder; a pipe or device
            named ``*.parquet``; more than ``max_files()`` files or ``_MAX_ENTRIES``
            entries.
    """
    found: list[Path] = []
    seen = 0
    stack = [folder]
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as scan:
                entries = list(scan)
        except OSError as e:
            raise FormatError(f"cannot be listed ({e.strerror})", path=here) from None
        seen += len(entries)
        if seen > _MAX_ENTRIES:
            raise FormatError(
                f"holds more than {_MAX_ENTRIES:,} entries; expected a dataset folder",
                path=folder,
            )
        for entry in entries:
            if _hidden(entry.name):
                continue
            data = entry.name.lower().endswith(_SUFFIX)
            if entry.is_symlink() and (data or os.path.isdir(entry.path)):
                member(folder, Path(entry.path), _LAYOUT)  # refuses it, in its words
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif data:
                found.append(member(folder, Path(entry.path), _LAYOUT))
                _count(found, folder, "holds")
    return found


def _count(found: list[Path], source: Path, verb: str) -> None:
    """Refuse a source of more files than ``max_files()`` ("holds", "matches" ``verb``)."""
    if len(found) > max_files():
        raise FormatError(
            f"{verb} more than {max_files():,} Parquet files, the most read as one table; "
            f"set {FILES_VARIABLE} to read more",
            path=source,
        )


def _split(folder: Path, paths: list[Path]) -> tuple[list[Path], str | None, str]:
    """The files to read of a folder of HF splits: ``train``'s where there are several.

    Returns the files, the split read (None: one split or none) and what was left out.

    Raises:
        ConfigError: Several splits, none of them ``train``: a glob of the first is named.
    """
    found = {p: _split_of(p.relative_to(folder)) for p in paths}
    splits = {p: split for p, (split, _) in found.items()}
    named = sorted({s for s in splits.values() if s is not None})
    if len(named) < 2:
        return paths, None, ""
    if "train" not in named:
        example = next(pattern for split, pattern in found.values() if split == named[0])
        raise ConfigError(
            f"holds the splits {', '.join(map(repr, named))} and no 'train'; name the files "
            f"of one with a quoted glob, e.g. '{folder / example}'",
            path=folder,
        )
    others = [s for s in named if s != "train"]
    count = sum(1 for s in splits.values() if s != "train")
    left = f"{', '.join(map(repr, others))}: {count:,} file{'s' if count != 1 else ''}"
    return [p for p in paths if splits[p] == "train"], "train", left


def _split_of(relative: Path) -> tuple[str | None, Path]:
    """A file's HF split, and a glob of its split's files (relative as ``relative``).

    The split is its shard name's (``test-00000-of-00002``), else a keyword's, looked for
    in its folders' names, then its own, as whole words (bounded by ``-._ `` or digits), as
    HF ``datasets`` finds splits.
    """
    shard = _SHARD.fullmatch(relative.name.split(".")[0])
    if shard:
        return shard["split"], relative.parent / f"{shard['split']}-*{_SUFFIX}"
    for at, name in enumerate(relative.parts):
        word = name[: -len(_SUFFIX)] if at == len(relative.parts) - 1 else name
        for split, words in _KEYWORDS.items():
            if any(re.search(_WORD.format(re.escape(w)), word.lower()) for w in words):
                if at < len(relative.parts) - 1:  # a folder's name: every file below it
                    return split, Path(*relative.parts[: at + 1], "**", f"*{_SUFFIX}")
                return split, relative.parent / re.sub(r"\d+", "*", relative.name)
    return None, relative


def _natural(relative: Path) -> tuple[list[str | int], ...]:
    """Natural sort key: each part's runs of digits compared as numbers."""
    return tuple(
        [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", part)] for part in relative.parts
    )


def _partitions(root: Path, path: Path) -> dict[str, int]:
    """The hive values of the folders from ``root`` to ``path`` (``episode=3``).

    Raises:
        FormatError: A value that is not an integer.
    """
    found = {}
    for part in path.relative_to(root).parts[:-1]:
        match = _PARTITION.fullmatch(part)
        if match is None:
            continue
        if not _INTEGER.fullmatch(match["value"]):
            raise FormatError(
                f"lies in the hive folder {part!r}, whose value is not an integer; expcli "
                "reads integer partitions (episode=3/) as a column: name one partition's "
                f"files with a quoted glob, e.g. '{root / part}/*.parquet'",
                path=path,
            )
        found[match["key"]] = int(match["value"])
    return found


def _keys(partition: dict[str, int]) -> str:
    return ", ".join(partition) or "none"
