"""What a LeRobot folder says that an expcli dataset does not: fps, task, robot type.

The writer reads them from the dataset's metadata: its ``lerobot`` section (what a LeRobot
folder that was read said, or what ``LeRobotSettings.applied`` put there from the options
``--fps``, ``--task``, ``--robot-type``, ``--next-observations``), else what expcli recorded
(``render_fps``: the env's ``metadata["render_fps"]``, recorded at collect time or found by
``convert``), else a default: fps 1 (said in one warning), the env id without its module
(``ale_py:ALE/Pong-v5`` -> ``ALE/Pong-v5``), robot type unknown (``null``, as LeRobot writes
for a dataset of no robot).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from expcli.errors import ConfigError

__all__ = [
    "SECTION",
    "LeRobotSettings",
    "fps_of",
    "next_observations_of",
    "robot_type_of",
    "task_of",
]

SECTION = "lerobot"
"""The metadata's section of LeRobot's words (``layout.read_lerobot`` fills it too)."""
NO_FPS = 1
"""The fps written when neither the options nor the metadata give one."""


@dataclass(frozen=True, slots=True)
class LeRobotSettings:
    """Options of a LeRobot folder to write; None leaves each to the metadata or its default.

    Attributes:
        fps: Frames per second (``info.json``'s ``fps``; ``timestamp`` is frame / fps).
        task: Every episode's task string.
        robot_type: ``info.json``'s ``robot_type``.
        next_observations: Write ``next.observation.*`` features; None: only where they are
            not the next frame's observation (frames once does not derive them).
    """

    fps: int | None = None
    task: str | None = None
    robot_type: str | None = None
    next_observations: bool | None = None

    def __post_init__(self) -> None:
        """Refuse an fps below 1 and an empty task.

        Raises:
            ConfigError: A value LeRobot cannot take.
        """
        if self.fps is not None and (type(self.fps) is not int or self.fps < 1):
            raise ConfigError(f"--fps must be a whole number of at least 1; got {self.fps!r}")
        if self.task is not None and not self.task.strip():
            raise ConfigError("--task must not be empty")

    def applied(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """``metadata`` with the settings given written over its ``lerobot`` section."""
        given = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        if not given:
            return dict(metadata)
        section = metadata.get(SECTION)
        return {**metadata, SECTION: {**(section if isinstance(section, dict) else {}), **given}}


def _section(metadata: Mapping[str, Any]) -> Mapping[str, Any]:
    section = metadata.get(SECTION)
    return section if isinstance(section, dict) else {}


def fps_of(metadata: Mapping[str, Any]) -> int | None:
    """The fps to write: the ``lerobot`` section's, else ``render_fps``; None: neither says."""
    for fps in (_section(metadata).get("fps"), metadata.get("render_fps")):
        if type(fps) is int and fps > 0:
            return fps
        if type(fps) is float and fps >= 0.5:  # MuJoCo's is 1 / dt, a float
            return round(fps)
    return None


def task_of(metadata: Mapping[str, Any]) -> str:
    """The task: the section's, else the env id without its module, else ``"expcli"``."""
    task = _section(metadata).get("task")
    if isinstance(task, str) and task:
        return task
    env_id = metadata.get("env_id")
    bare = env_id.rpartition(":")[2] if isinstance(env_id, str) else ""
    return bare or "expcli"


def robot_type_of(metadata: Mapping[str, Any]) -> str | None:
    """The robot type the section gives (a LeRobot source's or ``--robot-type``), else None."""
    robot = _section(metadata).get("robot_type")
    return robot if isinstance(robot, str) and robot else None


def next_observations_of(metadata: Mapping[str, Any]) -> bool | None:
    """Whether ``--next-observations`` asked for them (True), against them (False), or neither."""
    given = _section(metadata).get("next_observations")
    return given if isinstance(given, bool) else None
