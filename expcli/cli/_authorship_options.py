"""``--author``, ``--author-email``, ``--algorithm-name``, ``--code-permalink``: Minari's metadata.

``convert`` and ``collect`` take them where they write the minari layout
(``formats.authorship.Authorship``, in the write plan); with another layout they are
refused in one line (``FileLayout.refuse_target``). ``collect`` names its policy's spec
as the algorithm where ``--algorithm-name`` is not given.

``--license`` goes beside them: the license that a folder's dataset card states
(``formats.dataset_card``), for any folder with a card.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from expcli.formats.authorship import Authorship

__all__ = [
    "AlgorithmNameOption",
    "AuthorEmailOption",
    "AuthorOption",
    "CodePermalinkOption",
    "LicenseOption",
    "authorship_of",
]


def _repeated(flag: str, metavar: str, help: str) -> Any:
    """A ``--layout minari`` option that may be given several times (a Minari set)."""
    return typer.Option(
        flag,
        metavar=metavar,
        help=f"--layout minari: {help}; repeat for several.",
        show_default=False,
    )


AuthorOption = Annotated[
    list[str] | None, _repeated("--author", "NAME", "the dataset's author (Minari's author)")
]
AuthorEmailOption = Annotated[
    list[str] | None,
    _repeated("--author-email", "EMAIL", "how to reach the author (author_email)"),
]
AlgorithmNameOption = Annotated[
    str | None,
    typer.Option(
        "--algorithm-name",
        metavar="NAME",
        help="--layout minari: the algorithm that collected the data (algorithm_name).",
        show_default="the policy's spec, where the data records it",
    ),
]
CodePermalinkOption = Annotated[
    str | None,
    typer.Option(
        "--code-permalink",
        metavar="URL",
        help="--layout minari: a link to the code that made the data (code_permalink).",
        show_default=False,
    ),
]
LicenseOption = Annotated[
    str | None,
    typer.Option(
        "--license",
        metavar="ID",
        help="The license a folder's dataset card (README.md) states, as the Hub names "
        "them (mit, apache-2.0, cc-by-4.0, ...).",
        show_default="other, or the one the run recorded",
    ),
]


def authorship_of(
    authors: list[str] | None,
    emails: list[str] | None,
    algorithm_name: str | None,
    code_permalink: str | None,
) -> Authorship | None:
    """The options as one ``Authorship``; None when none is given."""
    from expcli.formats.authorship import Authorship

    given = Authorship(tuple(authors or ()), tuple(emails or ()), algorithm_name, code_permalink)
    return given if given else None
