"""``--fps``, ``--task``, ``--robot-type``, ``--next-observations``: a LeRobot folder's words.

``convert`` takes them where it writes the lerobot layout (``LeRobotSettings``, written
into the dataset's ``lerobot`` metadata section by ``conversion.with_lerobot_settings``);
with another layout, or to stdout, they are refused in one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from expcli.formats.layouts.lerobot.settings import LeRobotSettings

__all__ = [
    "FpsOption",
    "NextObservationsOption",
    "RobotTypeOption",
    "TaskOption",
    "lerobot_settings_of",
]

FpsOption = Annotated[
    int | None,
    typer.Option(
        "--fps",
        min=1,
        help="--layout lerobot: frames per second; default: the env's render_fps, "
        "recorded or looked up from its id (1, with a warning, where there is none).",
    ),
]
TaskOption = Annotated[
    str | None,
    typer.Option(
        "--task",
        help="--layout lerobot: every episode's task; default: the env id without its module.",
    ),
]
RobotTypeOption = Annotated[
    str | None,
    typer.Option(
        "--robot-type", help="--layout lerobot: info.json's robot_type; default: the source's."
    ),
]
NextObservationsOption = Annotated[
    bool | None,
    typer.Option(
        "--next-observations/--no-next-observations",
        help="--layout lerobot: write next.observation.* features; default: only where "
        "they are not the next frame's observation (frames once keeps them apart).",
        show_default=False,
    ),
]


def lerobot_settings_of(
    fps: int | None, task: str | None, robot_type: str | None, next_observations: bool | None
) -> LeRobotSettings | None:
    """The options as one ``LeRobotSettings``; None when none is given.

    Raises:
        ConfigError: An fps below 1 or an empty task (``LeRobotSettings``).
    """
    if (fps, task, robot_type, next_observations) == (None, None, None, None):
        return None
    from expcli.formats.layouts.lerobot.settings import LeRobotSettings

    return LeRobotSettings(fps, task, robot_type, next_observations)
