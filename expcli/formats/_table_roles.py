"""Which column of a foreign table plays which part, by the names its libraries write.

Recognised without flags: expcli's own columns (``index, episode_index, frame_index, env,
row`` and the tensors), Minari's (``observations, actions, rewards, terminations,
truncations``), D4RL's (``observations, actions, rewards, terminals, timeouts,
next_observations``) and the common singulars and variants (``obs, observation, state,
action, reward, done, dones, terminal, episode_id, step``). Any other column of numbers is
carried under its own name, as expcli carries ``infos/...`` or ``log_prob``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from expcli.errors import FormatError

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
    "rewards": ("rewards", "reward"),
    "terminated": ("terminated", "terminations", "terminals", "terminal"),
    "truncated": ("truncated", "truncations", "timeouts", "timeout"),
    "done": ("done", "dones"),
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

_CONVENTIONS = (
    ("expcli's columns", ("env", "row", "frame_index")),
    ("Minari's columns", ("terminations", "truncations")),
    ("D4RL's columns", ("terminals", "timeouts")),
)


@dataclass(frozen=True, slots=True)
class Roles:
    """The columns of a table by role, and the others carried as they are.

    Attributes:
        columns: Role -> the column that plays it (roles without one are absent).
        others: Columns of no role, to carry under their own names.
        convention: In words, whose column names the table follows.
    """

    columns: dict[str, str]
    others: tuple[str, ...]
    convention: str

    def described(self) -> str:
        """``convention (role=column, ...)`` for the warning line, renamed columns only."""
        renamed = [
            f"{r}={c}" for r, c in self.columns.items() if r != c and r not in BOOKKEEPING_ROLES
        ]
        return self.convention + (f" ({', '.join(renamed)})" if renamed else "")


def roles_of(names: list[str], path: Path) -> Roles:
    """The role of each of a table's columns, by name.

    Raises:
        FormatError: Two columns name one role, or none is observations nor actions.
    """
    columns: dict[str, str] = {}
    others = []
    for name in names:
        role = next((r for r, spelled in ROLE_NAMES.items() if name in spelled), None)
        if role is None:
            if name not in _IGNORED:
                others.append(name)
            continue
        if role in columns:
            raise FormatError(
                f"columns {columns[role]!r} and {name!r} would both be its {role}; keep one",
                path=path,
                key=name,
            )
        columns[role] = name
    if "observations" not in columns and "actions" not in columns:
        raise FormatError(
            "has no column expcli recognises as observations or actions (looked for "
            f"{', '.join(ROLE_NAMES['observations'] + ROLE_NAMES['actions'])})",
            path=path,
        )
    present = set(names)
    convention = next(
        (words for words, marks in _CONVENTIONS if present.intersection(marks)), "common names"
    )
    return Roles(columns, tuple(others), convention)
