"""A collect run kept in memory, written as one file at the end (the in-memory output kind)."""

from __future__ import annotations

from expcli.collect.saved_file import SavedFile
from expcli.errors import OutputError, OutputExistsError
from expcli.formats.dataset import Dataset
from expcli.formats.rows import WritePlan

__all__ = ["save_file"]


def save_file(dataset: Dataset, plan: WritePlan) -> SavedFile | None:
    """Write ``dataset`` atomically as ``plan`` says; None (nothing written) when it is empty.

    Raises:
        OutputError: ``plan.target`` could not be written; what was collected is saved
            elsewhere (``rescue``) and the error says where.
    """
    from expcli.formats.checked_write import check_target, write_checked

    if len(dataset) == 0:
        return None
    try:
        check_target(plan)
        write_checked(dataset, plan, None)
    except OutputError as error:
        if isinstance(error, OutputExistsError):
            raise
        from expcli.collect.rescue import save_elsewhere

        raise save_elsewhere(dataset, plan, error) from error
    path = plan.target
    episodes = dataset.metadata["collector"]["complete_episodes_in_file"]
    return SavedFile(path, path.stat().st_size, len(dataset), episodes)
