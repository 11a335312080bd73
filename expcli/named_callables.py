"""Objects named on the command line as ``MODULE:NAME`` or ``path/to/file.py:NAME``.

``collect --policy`` and ``collect --wrapper`` name Python objects this way. A module is
imported with the current folder importable (as ``python -m`` would have it); a file is
imported by its path under a name made from that path, so the same file imported twice is
one module. Everything here is the standard library; messages name the role (``policy``,
``wrapper``) and the spec as given.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from expcli.errors import ConfigError

__all__ = ["file_sha256", "is_file_target", "load_named"]


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes (recorded so a dataset names the exact code it ran)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_file_target(target: str) -> bool:
    """Whether the part before ``:`` names a file rather than a module."""
    return target.endswith(".py") or "/" in target or os.sep in target


def load_named(spec: str, role: str) -> tuple[Any, dict[str, Any]]:
    """Import ``MODULE:NAME`` or ``file.py:NAME`` (``NAME`` may be dotted).

    Args:
        spec: What the user wrote.
        role: ``policy`` or ``wrapper``: the option's name, used in messages.

    Returns:
        The object and its description: ``spec``, ``name`` and either ``module`` or
        ``file`` (absolute) with its ``sha256``.

    Raises:
        ConfigError: A malformed spec, a missing module, file or attribute, or an import
            that failed (the message says which).
    """
    target, _, name = spec.rpartition(":")
    if not target or not name:
        raise ConfigError(f"{role} {spec!r} must be MODULE:CALLABLE or path/to/file.py:CALLABLE")
    description: dict[str, Any] = {"spec": spec, "name": name}
    if is_file_target(target):
        path = Path(target)
        if not path.is_file():
            raise ConfigError(f"{role} file {target!r} not found (from --{role} {spec!r})")
        module = _import_file(path, spec, role)
        description.update(file=str(path.resolve()), sha256=file_sha256(path))
    else:
        module = _import_module(target, spec, role)
        description["module"] = target
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            import difflib

            close = difflib.get_close_matches(part, [n for n in dir(obj) if not n.startswith("_")])
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{role} {spec!r}: {target!r} has no attribute {part!r}{hint}")
        obj = getattr(obj, part)
    return obj, description


@contextmanager
def _cwd_on_path() -> Iterator[None]:
    """The current folder importable, as ``python -m`` would have it (console scripts don't)."""
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def _import_module(target: str, spec: str, role: str) -> Any:
    try:
        with _cwd_on_path():
            return importlib.import_module(target)
    except ModuleNotFoundError as e:
        if e.name and (target == e.name or target.startswith(e.name + ".")):
            raise ConfigError(
                f"{role} {spec!r}: no module named {target!r} (not on PYTHONPATH nor in "
                "the current folder)"
            ) from e
        raise ConfigError(f"{role} {spec!r}: importing {target!r} failed: {e}") from e
    except Exception as e:
        raise ConfigError(
            f"{role} {spec!r}: importing {target!r} failed: {type(e).__name__}: {e}"
        ) from e


def _import_file(path: Path, spec: str, role: str) -> Any:
    resolved = path.resolve()
    tag = hashlib.sha1(str(resolved).encode()).hexdigest()[:8]
    name = f"_expcli_{role}_{resolved.stem}_{tag}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, resolved)
    if module_spec is None or module_spec.loader is None:
        raise ConfigError(f"{role} {spec!r}: cannot import {str(path)!r} as a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise ConfigError(
            f"{role} {spec!r}: importing {str(path)!r} failed: {type(e).__name__}: {e}"
        ) from e
    return module
