"""A collect run kept in memory, written as one file at the end (the in-memory output kind)."""

from __future__ import annotations

from pathlib import Path

from expcli.collect.saved_file import SavedFile
from expcli.collect.settings import CollectSettings
from expcli.errors import OutputError, OutputExistsError
from expcli.formats.dataset import Dataset

__all__ = ["save_file"]


def save_file(dataset: Dataset, output: Path, settings: CollectSettings) -> SavedFile | None:
    """Write ``dataset`` atomically to ``output``; None (nothing written) when it is empty.

    Raises:
        OutputError: ``output`` could not be written; what was collected is saved
            elsewhere (``rescue``) and the error says where.
    """
    from expcli.conversion import save

    if len(dataset) == 0:
        return None
    compression = None if settings.compression is None else str(settings.compression)
    try:
        path = save(
            dataset,
            output,
            overwrite=settings.overwrite,
            compression=compression,
            frames=settings.frames,
        )
    except OutputError as error:
        if isinstance(error, OutputExistsError):
            raise
        from expcli.collect.rescue import save_elsewhere

        raise save_elsewhere(dataset, output, compression, error) from error
    episodes = dataset.metadata["collector"]["complete_episodes_in_file"]
    return SavedFile(path, path.stat().st_size, len(dataset), episodes)
