"""Which column of a table plays which role, as the user says it: ``--columns``, ``--done-means``.

A table expcli did not write is read by its column names (``_table_roles`` lists the
conventions recognised). Where the names are no library's that expcli knows,
``--columns observations=obs_vec,rewards=r`` (``columns={"observations": "obs_vec"}`` in
Python) says which column plays which role; Dict leaves are ``observations/NAME=COLUMN``.
A mapping replaces name recognition for the roles it names; the roles it does not name are
still recognised by name. ``--done-means terminated|truncated`` says what a ``done`` column
without the terminated/truncated split stands for (terminated when not said). Both travel
as one frozen ``ColumnRoles``, from the command down to the table's reader
(``foreign_table.open_table``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from expcli.errors import ConfigError, quoted
from expcli.spec import STANDARD_NAMES

__all__ = ["LEAF_ROLES", "MAPPED_ROLES", "ColumnRoles", "DoneMeans", "column_roles"]

MAPPED_ROLES = (*STANDARD_NAMES, "done", "episode", "step", "env")
"""The roles a mapping may give a column (``episode``, ``step``, ``env``: integers placing rows)."""
LEAF_ROLES = ("observations", "next_observations", "actions")
"""Roles whose Dict leaves a mapping may name: ``observations/NAME``."""


class DoneMeans(StrEnum):
    """What a ``done`` column without the terminated/truncated split is taken as."""

    TERMINATED = "terminated"
    TRUNCATED = "truncated"


@dataclass(frozen=True, slots=True)
class ColumnRoles:
    """How a table is read: the columns given for roles, and what a lone ``done`` means.

    Attributes:
        columns: ``(role, column)`` pairs, in the order given; each role and column once.
        done_means: What a ``done`` column without the split stands for; None: not said
            (taken as terminated, and the warning says how to choose).
    """

    columns: tuple[tuple[str, str], ...] = ()
    done_means: DoneMeans | None = None

    def __bool__(self) -> bool:
        """Whether it says anything: a column given or ``done_means`` chosen."""
        return bool(self.columns) or self.done_means is not None

    @property
    def given(self) -> dict[str, str]:
        """Role -> the column given for it."""
        return dict(self.columns)

    def names_role(self, role: str) -> bool:
        """Whether the mapping gives ``role`` a column, itself or one of its Dict leaves."""
        return any(r == role or r.startswith(role + "/") for r, _ in self.columns)

    def described(self) -> str:
        """``role=column,...``, as ``--columns`` takes it."""
        return ",".join(f"{r}={c}" for r, c in self.columns)


def column_roles(
    columns: ColumnRoles | Mapping[str, str] | str | None = None,
    done_means: DoneMeans | str | None = None,
) -> ColumnRoles | None:
    """The ``ColumnRoles`` that ``columns`` and ``done_means`` say; None when they say nothing.

    Args:
        columns: Role -> column, or the text ``--columns`` takes (``ROLE=COLUMN,...``), or
            a ``ColumnRoles`` (its ``done_means`` kept unless ``done_means`` is given).
        done_means: ``terminated`` or ``truncated``: what a ``done`` column without the
            split stands for.

    Raises:
        ConfigError: An unknown role, a role or a column given twice, a role with no
            column, ``observations`` given with its own leaves, or an unknown
            ``done_means``.
    """
    if isinstance(columns, ColumnRoles):
        done_means = columns.done_means if done_means is None else done_means
        pairs = list(columns.columns)
    else:
        pairs = _pairs(columns) if isinstance(columns, str) else list((columns or {}).items())
    seen: dict[str, str] = {}
    taken: dict[str, str] = {}
    for role, column in pairs:
        if not isinstance(role, str) or not isinstance(column, str):
            raise ConfigError(f"--columns: expected role -> column name strings, got {role!r}")
        _check_role(role)
        if not column:
            raise ConfigError(f"--columns: role {quoted(role)} has no column; expected ROLE=COLUMN")
        if role in seen:
            raise ConfigError(
                f"--columns: role {quoted(role)} given twice ({quoted(seen[role])} and "
                f"{quoted(column)}); give each role one column"
            )
        if column in taken:
            raise ConfigError(
                f"--columns: column {quoted(column)} given for {taken[column]} and {role}; "
                "give each column one role"
            )
        seen[role], taken[column] = column, role
    for role in LEAF_ROLES:
        if role in seen and any(r.startswith(role + "/") for r in seen):
            raise ConfigError(
                f"--columns: {role} given both whole and by leaves ({role}/NAME); give one"
            )
    means = _done_means(done_means)
    roles = ColumnRoles(tuple(seen.items()), means)
    return roles if roles else None


def _pairs(text: str) -> list[tuple[str, str]]:
    """``ROLE=COLUMN,...`` as pairs (a column name may hold ``=``, not ``,``).

    Raises:
        ConfigError: An item without ``=``.
    """
    pairs = []
    for item in text.split(","):
        if not item.strip():
            continue
        role, sep, column = item.partition("=")
        if not sep:
            raise ConfigError(
                f"--columns: {quoted(item.strip())} is not ROLE=COLUMN; e.g. "
                "observations=obs_vec,rewards=r"
            )
        pairs.append((role.strip(), column.strip()))
    return pairs


def _check_role(role: str) -> None:
    """Refuse a role that is none of ``MAPPED_ROLES`` nor a leaf of one of ``LEAF_ROLES``.

    Raises:
        ConfigError: It is not, naming the roles there are.
    """
    whole, sep, leaf = role.partition("/")
    if (not sep and role in MAPPED_ROLES) or (sep and whole in LEAF_ROLES and leaf):
        return
    raise ConfigError(
        f"--columns: unknown role {quoted(role)}; expected one of {', '.join(MAPPED_ROLES)}, "
        "or a Dict leaf observations/NAME"
    )


def _done_means(value: DoneMeans | str | None) -> DoneMeans | None:
    """``value`` as a ``DoneMeans``.

    Raises:
        ConfigError: It is none, naming those there are.
    """
    if value is None or isinstance(value, DoneMeans):
        return value
    for means in DoneMeans:
        if value == means.value:
            return means
    choices = ", ".join(m.value for m in DoneMeans)
    raise ConfigError(f"unknown --done-means {quoted(str(value))}; expected one of {choices}")
