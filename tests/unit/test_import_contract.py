"""The product's packages import one way, and no module imports itself back (issue 53, item 1).

``LAYERS`` below is the contract, bottom first; docs/architecture.md shows the same table (a test compares them). A
module may import its own layer and the layers under it, never one above; and the import graph of the whole tree has
no circle (two modules importing each other through any chain), late imports inside functions and imports under
``TYPE_CHECKING`` included: an import that only runs when a function is first called still ties the two modules.
Read from the source files (no module is imported). ``artifacts/recall`` has a finer contract of its own
(``tests/unit/recall/test_layering.py``).

Nor does a module import another's private name (``from artifacts.admin.display import _visible``; issue 53, item 3):
a name other modules use is its module's interface, and is named so.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("vocabulary", "infrastructure", "artifacts", "assembly", "operator_tools", "powercontext")

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("vocabulary", ("vocabulary",)),
    ("infrastructure", ("infrastructure",)),
    ("storage and recall", ("artifacts",)),
    ("assembly", ("assembly",)),
    ("operator tools", ("operator_tools",)),
    ("project wiring", ("powercontext",)),
)
"""Each layer's name and the modules or packages in it (a package holds everything under it), bottom first."""


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_of(path): path
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    }


def _imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The product modules ``module`` imports: ``from package import submodule`` names the submodule, not the
    package, so a package's ``__init__`` is not tied to every module that imports a sibling through it."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {module: _imported(module, path, known) for module, path in modules.items()}


def layer_of(module: str) -> int:
    """The index of ``module``'s layer: the layer naming the longest prefix of it."""
    best, best_length = None, -1
    for index, (_, members) in enumerate(LAYERS):
        for member in members:
            if (module == member or module.startswith(member + ".")) and len(member) > best_length:
                best, best_length = index, len(member)
    if best is None:
        raise LookupError(f"{module} is in no layer: add it to LAYERS (and docs/architecture.md)")
    return best


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in graph.items()
        for target in targets
        if layer_of(target) > layer_of(module)
    )


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.append(sorted(members))
    return found


def test_every_product_module_is_in_a_layer():
    assert [module for module in _modules() if _lookup_failed(module)] == []


def _lookup_failed(module: str) -> bool:
    try:
        layer_of(module)
    except LookupError:
        return True
    return False


def test_no_module_imports_a_layer_above_its_own():
    assert upward_imports(_graph()) == []


def test_no_modules_import_each_other_through_any_chain():
    assert circles(_graph()) == []


def private_imports(sources: dict[str, str]) -> list[str]:
    """Each ``from <product module> import _name`` in ``sources`` (a module's name and its text): the leading
    underscore says no other module uses the name."""
    return sorted(
        f"{module} imports {node.module}.{alias.name}"
        for module, source in sources.items()
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in PACKAGES)
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    )


def test_no_module_imports_another_modules_private_name():
    sources = {module: path.read_text(encoding="utf-8") for module, path in _modules().items()}
    assert private_imports(sources) == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("from artifacts.admin.display import ReadOnlyAdmin, _visible", 1),
        ("from .routing import _routed_to", 1),
        ("from django.db.models import _lookup\nfrom artifacts import __version__", 0),
    ],
)
def test_the_check_catches_a_private_import(source, found):
    assert len(private_imports({"operator_tools.example": source})) == found


@pytest.mark.parametrize(
    ("graph", "upward", "circular"),
    [
        ({"vocabulary.text": {"artifacts.models"}, "artifacts.models": set()}, 1, 0),
        (
            {
                "infrastructure.errors": {"infrastructure.failover"},
                "infrastructure.failover": {"infrastructure.errors"},
            },
            0,
            1,
        ),
        ({"infrastructure.metrics": {"artifacts.recall.vectors.lag"}, "artifacts.recall.vectors.lag": set()}, 1, 0),
        ({"assembly.runtime": {"artifacts.models", "vocabulary.text"}, "artifacts.models": set()}, 0, 0),
    ],
)
def test_the_checks_catch_an_upward_import_and_a_circle(graph, upward, circular):
    assert (len(upward_imports(graph)), len(circles(graph))) == (upward, circular)


def test_the_architecture_page_shows_the_same_layers():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| ([^|]+?) \| ([^|]+?) \|$", section, flags=re.MULTILINE)
    shown = [(name, tuple(re.findall(r"`([\w.]+)`", members))) for _, name, members in rows]
    assert shown == [(name, members) for name, members in LAYERS]
