"""No import circle between the modules of ``src/``: runtime, ``TYPE_CHECKING`` or local.

Every module under ``src/`` is parsed (never imported) and every ``import`` statement in
it counts, wherever it stands: at the top, under ``if TYPE_CHECKING:``, inside a
function. A circle closed by a deferred import still ties the modules into one unit
that cannot be read, tested or moved apart, which is what this test is for.

How an import becomes an edge of the graph:

- ``pkg/__init__.py`` is the module ``pkg``.
- ``import a.b.c`` is an edge to ``a.b.c`` (to its longest prefix that is a module of
  ``src/``); the parent packages it also initialises are not counted.
- ``from a.b import name`` is an edge to ``a.b.name`` when that is a module (a submodule
  imported by name), else to ``a.b`` (a name taken from ``a/b/__init__.py``, or from
  ``a/b.py``). So a submodule that takes names from its own package's ``__init__``,
  which imports the submodule, is a circle and is reported.
- Relative imports are resolved against the importing module's package.
- Imports of modules outside ``src/`` are ignored.

A circle is a strongly connected component of more than one module, or a module that
imports itself.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def modules(root: Path) -> dict[str, Path]:
    """Every module under ``root``, by dotted name (``pkg/__init__.py`` is ``pkg``)."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts:
            found[".".join(parts)] = path
    return found


def _package_of(name: str, path: Path) -> str:
    """The package a module's relative imports are resolved against."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _longest_module(dotted: str, known: Mapping[str, Path]) -> str | None:
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def _targets(node: ast.AST, name: str, path: Path, known: Mapping[str, Path]) -> Iterator[str]:
    """The modules of ``known`` that one import statement imports."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = _longest_module(alias.name, known)
            if target is not None:
                yield target
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = _package_of(name, path).split(".")
            base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
            origin = ".".join([*base, node.module] if node.module else base)
        else:
            origin = node.module or ""
        for alias in node.names:
            submodule = f"{origin}.{alias.name}"
            if submodule in known:
                yield submodule
            else:
                target = _longest_module(origin, known)
                if target is not None:
                    yield target


def import_graph(root: Path) -> dict[str, set[str]]:
    """Each module of ``root`` and the modules of ``root`` it imports, anywhere in it."""
    known = modules(root)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            graph[name].update(_targets(node, name, path, known))
    return graph


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module, or with a self-loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # Tarjan's algorithm, iteratively: the package graph is deep enough to matter.
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph.get(node, ()):
                        found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(found)


def _describe(graph: Mapping[str, set[str]], component: list[str]) -> str:
    members = set(component)
    edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]
    return " <-> ".join(component) + "\n      " + "\n      ".join(edges)


def test_src_has_no_import_circle() -> None:
    graph = import_graph(SRC)
    assert {"blackboard", "buddhi", "pybb"} <= set(graph)  # it did find the packages
    found = cycles(graph)
    assert not found, f"{len(found)} import circle(s) in src/ (each with its edges):\n" + "\n".join(
        f"  {_describe(graph, c)}" for c in found
    )


# -- negative controls: a known circle in a tree of our own is found -----------------------


def _tree(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_circle_closed_by_type_checking_or_a_local_import_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/a.py": "from app.b import B\n",
            "app/b.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app.c import C\n"
            ),
            "app/c.py": "def f():\n    from . import a\n    return a\n",
            "app/d.py": "import app.a\nimport json\n",  # imports into the circle: not in it
        },
    )
    assert cycles(import_graph(root)) == [["app.a", "app.b", "app.c"]]


def test_names_from_the_own_package_init_close_a_circle(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg._part import Part\n",
            "pkg/_part.py": "from pkg import VERSION\n",  # a name from __init__: a circle
            "pkg/_other.py": "from pkg import _part\n",  # a submodule by name: not one
            "pkg/sub/__init__.py": "from ..sub import _x\n",
            "pkg/sub/_x.py": "from .. import _other\n",
            "pkg/self.py": "import pkg.self\n",
        },
    )
    graph = import_graph(root)
    assert graph["pkg._other"] == {"pkg._part"}
    assert graph["pkg.sub"] == {"pkg.sub._x"}
    assert graph["pkg.sub._x"] == {"pkg._other"}
    assert cycles(graph) == [["pkg", "pkg._part"], ["pkg.self"]]


def test_a_tree_without_circles_passes(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"a.py": "import b\n", "b.py": "import c\n", "c.py": "import os\n"})
    assert cycles(import_graph(root)) == []
