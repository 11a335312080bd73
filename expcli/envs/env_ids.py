"""Env ids: is one registered, and if not, what would make it so (the one home of these checks).

``check_env_id`` is what ``ParallelEnv``, the collect job and its mode choice call; the
catalog (``expcli envs``) imports its modules and suggests ids through the same functions.

Many env packages register their ids with Gymnasium only once imported (``ale_py`` the
``ALE/`` ones, ``minigrid`` the ``MiniGrid-`` ones), which Gymnasium's ``module:id``
syntax does. An id that belongs to such a package is answered with the id to use, or
with what to install.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import re
import sys

import gymnasium as gym

from expcli.errors import ConfigError, quoted

__all__ = [
    "bare_id",
    "check_env_id",
    "import_registering",
    "registering_package",
    "similar_ids",
]

# How an id starts -> the module that registers it when imported, and its pip name.
_PACKAGES: dict[str, tuple[str, str]] = {
    "ALE/": ("ale_py", "ale-py"),
    "MiniGrid-": ("minigrid", "minigrid"),
    "BabyAI-": ("minigrid", "minigrid"),
    "MiniWorld-": ("miniworld", "miniworld"),
    "Fetch": ("gymnasium_robotics", "gymnasium-robotics"),
    "HandManipulate": ("gymnasium_robotics", "gymnasium-robotics"),
    "AdroitHand": ("gymnasium_robotics", "gymnasium-robotics"),
    "PointMaze_": ("gymnasium_robotics", "gymnasium-robotics"),
    "AntMaze_": ("gymnasium_robotics", "gymnasium-robotics"),
    "FrankaKitchen": ("gymnasium_robotics", "gymnasium-robotics"),
    "Panda": ("panda_gym", "panda-gym"),
    "highway-": ("highway_env", "highway-env"),
    "merge-": ("highway_env", "highway-env"),
    "roundabout-": ("highway_env", "highway-env"),
    "parking-": ("highway_env", "highway-env"),
    "intersection-": ("highway_env", "highway-env"),
    "racetrack-": ("highway_env", "highway-env"),
}


# The games ale_py registers (as ALE/<Game>-v5, and <Game>-v0/-v4 without a namespace):
# an id such as Pong-v5 (EnvPool's spelling) is told to be Atari without ale_py installed.
_ATARI_GAMES = frozenset(
    (
        "Adventure",
        "AirRaid",
        "Alien",
        "Amidar",
        "Assault",
        "Asterix",
        "Asteroids",
        "Atlantis",
        "Atlantis2",
        "Backgammon",
        "BankHeist",
        "BasicMath",
        "BattleZone",
        "BeamRider",
        "Berzerk",
        "Blackjack",
        "Bowling",
        "Boxing",
        "Breakout",
        "Carnival",
        "Casino",
        "Centipede",
        "ChopperCommand",
        "CrazyClimber",
        "Crossbow",
        "Darkchambers",
        "Defender",
        "DemonAttack",
        "DonkeyKong",
        "DoubleDunk",
        "Earthworld",
        "ElevatorAction",
        "Enduro",
        "Entombed",
        "Et",
        "FishingDerby",
        "FlagCapture",
        "Freeway",
        "Frogger",
        "Frostbite",
        "Galaxian",
        "Gopher",
        "Gravitar",
        "Hangman",
        "HauntedHouse",
        "Hero",
        "HumanCannonball",
        "IceHockey",
        "Jamesbond",
        "JourneyEscape",
        "Kaboom",
        "Kangaroo",
        "KeystoneKapers",
        "KingKong",
        "Klax",
        "Koolaid",
        "Krull",
        "KungFuMaster",
        "LaserGates",
        "LostLuggage",
        "MarioBros",
        "MiniatureGolf",
        "MontezumaRevenge",
        "MrDo",
        "MsPacman",
        "NameThisGame",
        "Othello",
        "Pacman",
        "Phoenix",
        "Pitfall",
        "Pitfall2",
        "Pong",
        "Pooyan",
        "PrivateEye",
        "Qbert",
        "Riverraid",
        "RoadRunner",
        "Robotank",
        "Seaquest",
        "SirLancelot",
        "Skiing",
        "Solaris",
        "SpaceInvaders",
        "SpaceWar",
        "StarGunner",
        "Superman",
        "Surround",
        "Tennis",
        "Tetris",
        "TicTacToe3D",
        "TimePilot",
        "Trondead",
        "Turmoil",
        "Tutankham",
        "UpNDown",
        "Venture",
        "VideoCheckers",
        "VideoChess",
        "VideoCube",
        "VideoPinball",
        "WizardOfWor",
        "WordZapper",
        "YarsRevenge",
        "Zaxxon",
    )
)
_ATARI_ID = re.compile(
    r"(?P<game>[A-Za-z0-9]+?)(NoFrameskip|Deterministic)?(-ram)?-v(?P<version>\d+)"
)


def bare_id(env_id: str) -> str:
    """The id without its module: ``"ale_py:ALE/Pong-v5"`` -> ``"ALE/Pong-v5"``."""
    return env_id.rpartition(":")[2]


def import_registering(module: str, *, context: str = "", hint: str = "") -> None:
    """Import ``module``, which registers its envs with Gymnasium as it is imported.

    Args:
        module: The module to import.
        context: Prefix of the error message (what was being done).
        hint: Suffix of the error message (how to install what is missing).

    Raises:
        ConfigError: The module cannot be imported.
    """
    try:
        imported = importlib.import_module(module)
    except Exception as e:
        raise ConfigError(
            f"{context}cannot import module {quoted(module)} to register its envs: {e}{hint}"
        ) from e
    register = getattr(gym, "register_envs", None)
    if register is not None:
        register(imported)  # a no-op that keeps linters from calling the import unused


def similar_ids(text: str, limit: int = 3) -> list[str]:
    """Registered ids closest to ``text`` (case-insensitive), for "did you mean"."""
    by_lower = {env_id.lower(): env_id for env_id in gym.envs.registry}
    close = difflib.get_close_matches(text.lower(), list(by_lower), n=limit, cutoff=0.5)
    return [by_lower[c] for c in close]


def registering_package(env_id: str) -> tuple[str, str] | None:
    """The module that registers ``env_id`` when imported, and its pip name, if known."""
    name = bare_id(env_id)
    for start, package in _PACKAGES.items():
        if name.startswith(start):
            return package
    return None


def check_env_id(env_id: str) -> str:
    """The registered id of ``env_id``, or ``ConfigError`` (with a suggestion).

    ``"module:EnvName-v0"`` (Gymnasium's syntax) imports ``module`` first, which is where
    a user's own envs register themselves.

    Raises:
        ConfigError: The module cannot be imported, or Gymnasium does not know the id.
    """
    module, _, name = env_id.rpartition(":")
    if module:
        import_registering(module, context=f"env id {quoted(env_id)}: ")
    if name in gym.registry:
        return name
    try:
        gym.spec(name)  # versions and namespaces
    except Exception as e:
        raise ConfigError(f"unknown env id {quoted(env_id)}{_hint(env_id, name)}") from e
    return name


def _hint(env_id: str, name: str) -> str:
    """What to do about an unknown id: the module to import or install, or a close id."""
    atari = _atari_hint(name)
    if atari is not None:
        return atari
    package = registering_package(name)
    if package is not None and package[0] not in sys.modules:
        module, pip_name = package
        if importlib.util.find_spec(module) is None:
            return (
                f"; {name} is an env of {module}, which is not installed: pip install "
                f"{pip_name}, then use {module}:{name}"
            )
        try:
            importlib.import_module(module)  # it registers its envs
        except Exception as e:
            return f"; {name} is an env of {module}, which cannot be imported: {e}"
        if name in gym.registry or _known_version(name):
            return f"; {module} registers it when imported: use {module}:{name}"
        close = difflib.get_close_matches(name, list(gym.registry), n=1)
        if close and registering_package(close[0]) == package:
            return f"; did you mean {module}:{close[0]}?"
    close = difflib.get_close_matches(name, list(gym.registry), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _known_version(name: str) -> bool:
    try:
        gym.spec(name)
    except Exception:
        return False
    return True


def _atari_hint(name: str) -> str | None:
    """How to make an Atari game named without ``ALE/`` (``Pong-v5``) known, or None.

    ale_py registers ``ALE/<Game>-v5`` and the older ``<Game>-v0``/``-v4`` ids (with
    ``NoFrameskip``...) without a namespace; EnvPool calls the v5 game ``Pong-v5``.
    """
    match = _ATARI_ID.fullmatch(name)
    if match is None or match["game"] not in _ATARI_GAMES or match["version"] not in "045":
        return None
    modern = match["version"] == "5"
    use = f"ALE/{name}" if modern else name
    what = f"Gymnasium calls Atari's {match['game']} {use}" if modern else f"{name} is an Atari env"
    envpool = f" ({name} is EnvPool's id: --mode envpool)" if modern else ""
    if importlib.util.find_spec("ale_py") is None:
        return (
            f"; {what}, an env of ale_py, which is not installed: pip install ale-py, then use "
            f"ale_py:{use}{envpool}"
        )
    try:
        importlib.import_module("ale_py")  # it registers its envs
    except Exception:
        return None  # the general answer says why it cannot be imported
    if use not in gym.registry:
        return None
    return f"; {what}, registered when ale_py is imported: use ale_py:{use}{envpool}"
