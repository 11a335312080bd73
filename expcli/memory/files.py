"""A Memory's files: ``save`` (skrl's export layout or any path), ``load`` and ``from_file``.

A mixin of ``Memory``: what goes into a file is ``Memory.to_dataset()``, and what comes out
of one becomes a memory with ``Memory.from_dataset()``; the formats themselves live in
``expcli.formats``, which never imports the memory (``Dataset`` is imported here for
typing only).
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import TYPE_CHECKING, Self

from expcli.errors import InvalidValueError

if TYPE_CHECKING:
    import torch

    from expcli.formats.dataset import Dataset

__all__ = ["EXPORT_FORMATS", "MemoryFiles"]

EXPORT_FORMATS = ("pt", "npz", "csv")


class MemoryFiles:
    """``save``, ``load`` and ``from_file`` for ``Memory``."""

    export_directory: str
    num_envs: int

    if TYPE_CHECKING:

        def __init__(
            self, memory_size: int, num_envs: int = 1, device: str | torch.device | None = None
        ) -> None: ...

        def to_dataset(self) -> Dataset:
            """See ``Memory.to_dataset``."""

        def _adopt(self, dataset: Dataset) -> None: ...

    def save(self, directory: str | os.PathLike[str] = "", format: str | None = None) -> str:
        """Write the memory to a file atomically and return its path.

        As in skrl, the file goes to ``<directory>/memories/<timestamp>_memory_<id>.<format>``
        (``export_directory`` when ``directory`` is empty). A ``directory`` that ends in
        ``.pt``, ``.npz``, ``.csv`` or ``.h5`` is taken as the file path itself. The file follows
        the expcli dataset schema: tensors, circular state and metadata.

        Raises:
            ValueError: The format is not one of pt, npz, csv.
            SchemaError: A tensor's dtype cannot be stored (bfloat16, complex).
            OutputLockedError: Another process writes that file.
        """
        from expcli.formats import format_from_suffix, write_dataset
        from expcli.formats.output_lock import OutputLock

        target = Path(directory or self.export_directory)
        suffix = format_from_suffix(target)
        if suffix is not None and not target.is_dir():
            if format is not None and format != suffix:
                raise InvalidValueError(
                    f"format {format!r} contradicts the file suffix of {str(target)!r}"
                )
            format = suffix
            target.parent.mkdir(parents=True, exist_ok=True)
        else:
            format = format or "pt"
            if format not in EXPORT_FORMATS:
                raise InvalidValueError(
                    f"Unsupported export format: {format!r}; expected one of {EXPORT_FORMATS}"
                )
            stamp = datetime.datetime.now().strftime("%y-%m-%d_%H-%M-%S-%f")
            target = target / "memories" / f"{stamp}_memory_{hex(id(self))}.{format}"
            target.parent.mkdir(parents=True, exist_ok=True)
        with OutputLock(target):  # one writer of the file at a time, as every save
            return str(write_dataset(self.to_dataset(), target, format=format))

    def load(self, path: str | os.PathLike[str]) -> None:
        """Replace tensors, sizes, circular state and metadata with those of a saved file.

        Reads pt, npz, csv and HDF5 (skrl's own exports too) without ever unpickling.

        Raises:
            FormatError: The file is unknown, corrupt or unsafe.
            SchemaError: Its tensors disagree in shape or dtype.
        """
        from expcli.formats import read_dataset

        dataset = read_dataset(path, num_envs=self.num_envs)
        self._adopt(dataset)

    @classmethod
    def from_dataset(cls, dataset: Dataset, device: str | torch.device | None = None) -> Self:
        """A new memory holding a ``Dataset``'s tensors.

        Copied to ``device``; circular state and metadata, sized as the dataset (at least one row
        and one column).
        """
        memory = cls(max(dataset.memory_size, 1), max(dataset.num_envs, 1), device=device)
        memory._adopt(dataset)
        return memory

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], device: str | torch.device | None = None
    ) -> Self:
        """A new memory holding what ``path`` holds (sizes taken from the file)."""
        from expcli.formats import read_dataset

        return cls.from_dataset(read_dataset(path), device)
