"""Which column of a foreign table plays which part, by the names its libraries write.

Recognised without flags: expcli's own columns (``index, episode_index, frame_index, env,
row`` and the tensors), Minari's (``observations, actions, rewards, terminations,
truncations``), D4RL's (``observations, actions, rewards, terminals, timeouts,
next_observations``), LeRobot v3's (``observation.state``, ``observation.image``,
``observation.images.*``, ``action``, ``next.reward``, ``next.done``, ``episode_index``,
``frame_index``, ``index``, ``timestamp``, ``task_index``) and the common singulars and
variants (``obs, observation, state, action, reward, done, dones, terminal, episode_id,
step``). Any other column of numbers is carried under its own name, as expcli carries
``infos/...`` or ``log_prob``.

LeRobot's ``observation.*`` columns are the observations when there is one, else its Dict
leaves ``observations/<rest>`` (``observation.images.top`` is ``observations/images.top``),
as the LeRobot folder reader names them; ``action.*`` likewise. Its ``timestamp`` (the
frame's ``frame_index / fps``) and ``task_index`` are left out, as the folder reader leaves
them: LeRobot adds both to every frame, and a tensor of either name could not be written
back to a LeRobot folder.

A ``ColumnRoles`` mapping (``--columns``) gives the roles it names to the columns it names;
a column that names would give one of those roles is then left out, and said.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from expcli.errors import ConfigError, FormatError, quoted
from expcli.formats.column_roles import ColumnRoles

__all__ = ["BOOKKEEPING_ROLES", "FLAG_ROLES", "ROLE_NAMES", "TENSOR_ROLES", "Roles", "roles_of"]

ROLE_NAMES: dict[str, tuple[str, ...]] = {
    "observations": ("observations", "observation", "obs", "state", "states"),
    "next_observations": (
        "next_observations",
        "next_observation",
        "next_obs",
        "next_state",
        "next_states",
    ),
    "actions": ("actions", "action"),
    "rewards": ("rewards", "reward", "next.reward"),
    "terminated": ("terminated", "terminations", "terminals", "terminal", "next.terminated"),
    "truncated": ("truncated", "truncations", "timeouts", "timeout", "next.truncated"),
    "done": ("done", "dones", "next.done"),
    "episode": ("episode_index", "episode_id", "episode"),
    "step": ("frame_index", "step", "frame"),
    "env": ("env", "env_index"),
    "row": ("row",),
}
"""Each role and the column names that play it, as their libraries spell them."""

TENSOR_ROLES = ("observations", "next_observations", "actions", "rewards")
FLAG_ROLES = ("terminated", "truncated", "done")
BOOKKEEPING_ROLES = ("episode", "step", "env", "row")
"""Roles of integer columns that place rows (``row``: expcli's, where a row was written)."""
_IGNORED = ("index", "__index_level_0__")
"""Numbering columns that say nothing a tensor holds (expcli's, pandas' index)."""
_LEROBOT_PREFIXES = {
    "observation.": "observations",
    "next.observation.": "next_observations",
    "action.": "actions",
}
"""LeRobot's feature prefixes and the role of their columns (one: the role; more: leaves)."""
_LEROBOT_IGNORED = ("timestamp", "task_index")
"""LeRobot's bookkeeping that no tensor holds, left out of a table of LeRobot's columns."""

_EXPCLI_MARKS = ("env", "row", "frame_index")
"""Columns only expcli's own tables hold together (its ``timestamp`` is LeRobot's too)."""

_LEROBOT_MARKS = ("next.reward", "next.done", "task_index", "timestamp")
"""Columns of LeRobot's tables (``timestamp`` not, beside expcli's own marks)."""

_CONVENTIONS = (
    ("expcli's columns", _EXPCLI_MARKS),
    ("LeRobot's columns", _LEROBOT_MARKS),
    ("Minari's columns", ("terminations", "truncations")),
    ("D4RL's columns", ("terminals", "timeouts")),
)


@dataclass(frozen=True, slots=True)
class Roles:
    """The columns of a table by role, and the others carried as they are.

    Attributes:
        columns: Role -> the column that plays it (roles without one are absent); a Dict
            leaf's role is ``observations/NAME``.
        others: Columns of no role, to carry under their own names.
        convention: In words, whose column names the table follows.
        given: The roles a ``--columns`` mapping gave (role -> column).
        left_out: Columns that names gave a role the mapping gave another column.
        not_numbers: Columns of no role that hold no numbers (text, dates), left out, each
            with its type: ``name (type)``.
    """

    columns: dict[str, str]
    others: tuple[str, ...]
    convention: str
    given: dict[str, str] | None = None
    left_out: tuple[str, ...] = ()
    not_numbers: tuple[str, ...] = ()

    def described(self) -> str:
        """``convention (role=column, ...)`` for the warning line, renamed columns only."""
        renamed = [
            f"{r}={c}" for r, c in self.columns.items() if r != c and r not in BOOKKEEPING_ROLES
        ]
        return self.convention + (f" ({', '.join(renamed)})" if renamed else "")


def roles_of(names: list[str], path: Path, mapping: ColumnRoles | None = None) -> Roles:
    """The role of each of a table's columns, by ``mapping`` first, then by name.

    Raises:
        ConfigError: A column ``mapping`` names is not in the table.
        FormatError: Two columns name one role, or none is observations nor actions.
    """
    given = mapping.given if mapping is not None else {}
    for role, column in given.items():
        if column not in names:
            shown = ", ".join(map(quoted, names[:12])) + (", ..." if len(names) > 12 else "")
            raise ConfigError(
                f"has no column {quoted(column)} (given for {role}); its columns: {shown}",
                path=path,
                key=column,
            )
    lerobot = _is_lerobot(names)
    columns: dict[str, str] = dict(given)
    others: list[str] = []
    left_out: list[str] = []
    for role, name in _recognised(names, lerobot):
        if name in given.values():
            continue
        if mapping is not None and (mapping.names_role(role.partition("/")[0]) or role in given):
            left_out.append(name)
        elif role in columns:
            raise FormatError(
                f"columns {columns[role]!r} and {name!r} would both be its {role}; keep one "
                "(or say which with --columns)",
                path=path,
                key=name,
            )
        else:
            columns[role] = name
    placed = {*columns.values(), *left_out}
    expcli = set(_EXPCLI_MARKS) <= set(names)  # its timestamp: frame_index / fps, no tensor
    for name in names:
        ignored = (
            _IGNORED + (_LEROBOT_IGNORED if lerobot else ()) + (("timestamp",) if expcli else ())
        )
        if name not in placed and name not in ignored:
            others.append(name)
    if not any(r.partition("/")[0] in ("observations", "actions") for r in columns):
        raise FormatError(
            "has no column expcli recognises as observations or actions (looked for "
            f"{', '.join(ROLE_NAMES['observations'] + ROLE_NAMES['actions'])}, "
            "observation.*); say which with --columns observations=COLUMN",
            path=path,
        )
    convention = "LeRobot's columns" if lerobot else _convention(set(names))
    if given:
        convention = f"the columns given, the others by {convention}"
    return Roles(columns, tuple(others), convention, given or None, tuple(left_out))


def _recognised(names: list[str], lerobot: bool) -> list[tuple[str, str]]:
    """``(role, column)`` of each column a name gives a role, a role perhaps twice.

    LeRobot's prefixed columns (in a table of LeRobot's columns) as ``_LEROBOT_PREFIXES``.
    """
    found: list[tuple[str, str]] = []
    grouped: dict[str, list[str]] = {}
    for name in names:
        prefix = next((p for p in _LEROBOT_PREFIXES if name.startswith(p)), None)
        if prefix is not None and lerobot:
            grouped.setdefault(prefix, []).append(name)
            continue
        role = next((r for r, spelled in ROLE_NAMES.items() if name in spelled), None)
        if role is not None:
            found.append((role, name))
    for prefix, group in grouped.items():
        role = _LEROBOT_PREFIXES[prefix]
        found += [
            (role if len(group) == 1 else f"{role}/{name.removeprefix(prefix)}", name)
            for name in group
        ]
    return found


def _is_lerobot(names: list[str]) -> bool:
    """Whether the columns are LeRobot's: its marks, or its ``observation.*`` features."""
    present = set(names)
    marks = set(_LEROBOT_MARKS)
    if set(_EXPCLI_MARKS) <= present:  # expcli's table: its timestamp is its own
        marks.discard("timestamp")
    return bool(present & marks) or any(
        n.startswith(("observation.", "next.observation.")) for n in names
    )


def _convention(present: set[str]) -> str:
    found = (words for words, marks in _CONVENTIONS if present.intersection(marks))
    return next(found, "common names")
