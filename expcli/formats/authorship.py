"""Who made a dataset, and with what: the fields Minari's ``metadata.json`` names so.

``convert`` and ``collect`` take them as options (``--author``, ``--author-email``,
``--algorithm-name``, ``--code-permalink``) into the write plan (``rows.WritePlan``); the
layouts whose files keep them (``FileLayout.keeps_authorship``: Minari) write them, the
others refuse a plan that gives them. A leaf module: it imports nothing of expcli.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Authorship"]


@dataclass(frozen=True, slots=True)
class Authorship:
    """Minari's descriptive metadata of a dataset; what is not given is left out.

    Attributes:
        authors: Who made it (Minari's ``author``, a set of names).
        author_emails: How to reach them (``author_email``, a set).
        algorithm_name: The algorithm or policy that collected it (``algorithm_name``).
        code_permalink: A link to the code that made it (``code_permalink``).
    """

    authors: tuple[str, ...] = ()
    author_emails: tuple[str, ...] = ()
    algorithm_name: str | None = None
    code_permalink: str | None = None

    def __bool__(self) -> bool:
        """Whether any field is given."""
        return bool(self.minari_fields())

    def minari_fields(self) -> dict[str, Any]:
        """The fields given, under Minari's keys; authors and emails as lists (JSON sets)."""
        fields: dict[str, Any] = {}
        if self.authors:
            fields["author"] = list(dict.fromkeys(self.authors))
        if self.author_emails:
            fields["author_email"] = list(dict.fromkeys(self.author_emails))
        if self.algorithm_name is not None:
            fields["algorithm_name"] = self.algorithm_name
        if self.code_permalink is not None:
            fields["code_permalink"] = self.code_permalink
        return fields
