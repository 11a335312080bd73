"""Every import in expcli runs down the layers; no package reaches another's private module.

The layers, top to bottom (docs/layering.md says why):

    4  cli, __main__
    3  collect, conversion, summary, replay, shaping, report
    2  memory, envs, formats
    1  spec, space_json, named_callables, host_memory, distribution, thread_pools, files
    0  errors, _version, _lazy_names

A module may import its own package, any package of a lower layer, and a package of its
own layer as long as the packages of a layer import each other without a circle. Lazy
imports inside functions count; imports under ``if TYPE_CHECKING:`` are for typing only
and may point anywhere, but never at another package's private module. ``expcli/__init__``
is the facade above everything: it names the public API lazily, by string.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "expcli"

LAYERS: dict[str, int] = {
    "errors": 0,
    "_version": 0,
    "_lazy_names": 0,
    "spec": 1,
    "space_json": 1,
    "named_callables": 1,
    "host_memory": 1,
    "distribution": 1,
    "thread_pools": 1,
    "files": 1,
    "memory": 2,
    "envs": 2,
    "formats": 2,
    "collect": 3,
    "conversion": 3,
    "summary": 3,
    "replay": 3,
    "shaping": 3,
    "report": 3,
    "cli": 4,
    "__main__": 4,
}


def _module_name(path: Path) -> str:
    if not path.is_relative_to(PACKAGE):
        return path.stem
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, bool]]:
    """Every ``expcli`` module that ``path`` imports, and whether only for typing."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    here = _module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # ``from expcli.files import atomic as _atomic`` names a module, not the package's names
            names = [f"{module}.{alias.name}" for alias in node.names]
            if not all(_is_module(name) for name in names):
                names.insert(0, module)
        else:
            continue
        found += [(n, id(node) in typing_only) for n in names if n.split(".")[0] == "expcli"]
    return found


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "expcli"


def _private_owner(module: str) -> str | None:
    """The package a private module (``_x``, or any module below one) belongs to."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def _is_module(module: str) -> bool:
    relative = Path(*module.split(".")[1:])
    return (PACKAGE / relative).with_suffix(".py").is_file() or (PACKAGE / relative).is_dir()


def _graph() -> tuple[list[str], dict[str, set[str]]]:
    """Broken rules, and the package graph of runtime imports."""
    problems: list[str] = []
    edges: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _module_name(path)
        mine = _package(source)
        for target, typing in _imports(path):
            if not _is_module(target):
                continue  # a name imported from a module, checked as that module
            theirs = _package(target)
            owner = _private_owner(target)
            if owner and not (source == owner or source.startswith(owner + ".")):
                problems.append(f"{source} imports {target}, private to {owner}")
            if theirs == mine or typing or mine == "expcli":
                continue
            if LAYERS[theirs] > LAYERS[mine]:
                problems.append(
                    f"{source} (layer {LAYERS[mine]}) imports {target} (layer "
                    f"{LAYERS[theirs]}): an arrow up"
                )
            edges[mine].add(theirs)
    return problems, edges


def test_every_package_has_a_layer() -> None:
    top = {_package(_module_name(p)) for p in PACKAGE.glob("*.py")}
    top |= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert top - {"expcli"} == set(LAYERS)


def test_imports_run_down_and_stay_out_of_private_modules() -> None:
    problems, _ = _graph()
    assert not problems, "\n".join(problems)


def test_no_circle_between_packages() -> None:
    _, edges = _graph()
    circles = []
    for start in edges:
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for nxt in edges.get(node, ()):
                if nxt == start:
                    circles.append(" -> ".join([*trail, nxt]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    assert not circles, "\n".join(sorted(set(circles)))


def _ran_first(source: str, target: str) -> list[str]:
    """The packages whose ``__init__`` importing ``target`` runs, that ``source`` is not in.

    ``import expcli.formats.layouts.kinds`` runs ``expcli/formats/layouts/__init__.py``
    first: an arrow to that package too. A module's own packages have run already.
    """
    parts = target.split(".")
    ancestors = [".".join(parts[:end]) for end in range(2, len(parts))]
    return [a for a in ancestors if not (source == a or source.startswith(a + "."))]


def _module_edges() -> dict[str, set[str]]:
    """Imports between modules of one package: lazy ones, typing ones and the ``__init__``
    of each package an import runs included."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _module_name(path)
        for target, _typing in _imports(path):
            if target == source or not _is_module(target):
                continue
            for module in [*_ran_first(source, target), target]:
                if _package(module) == _package(source) and module != source:
                    edges[source].add(module)
    return edges


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return groups


def test_no_circle_between_modules_of_a_package() -> None:
    """Inside a package too, imports form a tree: a factory does not sit in the module
    that the things it builds import, and two dispatchers do not call each other. Typing
    imports count (two modules that name each other's types are one), and so does the
    ``__init__`` that importing a module of a subpackage runs."""
    circles = _circles(_module_edges())
    assert not circles, "\n".join(" <-> ".join(group) for group in circles)


def test_the_circle_finder_finds_a_circle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(edges) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_importing_a_module_runs_its_packages_init() -> None:
    """The arrow that hid a circle: ``formats.table`` imported ``formats.layouts.kinds``,
    which ran ``formats/layouts/__init__.py``, which called back into the table."""
    layouts = "expcli.formats.layouts"
    assert _ran_first("expcli.formats.table", f"{layouts}.kinds") == [layouts]
    assert _ran_first(f"{layouts}.d4rl_layout", f"{layouts}._write") == []
    assert _ran_first(layouts, f"{layouts}.kinds") == []
    edges = {"expcli.formats.table": {layouts}, layouts: {"expcli.formats.table"}}
    assert _circles(edges) == [["expcli.formats.layouts", "expcli.formats.table"]]


def test_the_checker_sees_lazy_imports(tmp_path: Path) -> None:
    """The check itself: a lazy import inside a function is found, a typing one is marked."""
    module = tmp_path / "probe.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from expcli.memory import Memory\n"
        "def f():\n    from expcli.conversion import load\n    return load\n"
    )
    assert sorted(_imports(module)) == [
        ("expcli.conversion", False),
        ("expcli.conversion.load", False),
        ("expcli.memory", True),
        ("expcli.memory.Memory", True),
    ]
