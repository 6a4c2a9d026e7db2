"""The recall package imports one way (``artifacts/recall/__init__.py``): plumbing, then the shared query and the
write side, then the rankers side by side, then the planner, then the sources.

Read from the source files (every ``import``, at module level, inside a function or under ``TYPE_CHECKING``), so an
import that only runs when a function is first called counts too. No database; the modules are imported only to
check that each ranker's entry points take the contract's arguments (``artifacts/recall/base.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "artifacts.recall"
ROOT = Path(__file__).resolve().parents[3] / "artifacts" / "recall"

PLUMBING, SHARED, RANKERS, PLANNER, ENTRY = range(5)
LAYERS = {
    # SQL plumbing and the contract: what every ranker builds on.
    "sql": PLUMBING,
    "tables": PLUMBING,
    "tokenize": PLUMBING,
    "documents": PLUMBING,
    "base": PLUMBING,
    # Recall's settings, one typed accessor (infrastructure/conf.py).
    "conf": PLUMBING,
    # The machine-wide lock of the index builders (the lexical engine's and the dense index's).
    "locks": PLUMBING,
    # What the two index builders' indexes share (the lexical engine's and the dense index's), below both rankers.
    "index_files": PLUMBING,
    # The BM25 query the lexical rankers share; the write side and the topic memory projection.
    "bm25": SHARED,
    "index": SHARED,
    "generation": SHARED,
    "projection": SHARED,
    # How a lexical and a dense ranking become one (pure): what the planner merges with.
    "fusion": SHARED,
    "learned": SHARED,
    "calibration": SHARED,
    # Rankers, side by side (``vectors``: the dense ranker to come).
    "ranking": RANKERS,
    "resident": RANKERS,
    "engine": RANKERS,
    "vectors": RANKERS,
    # Picks a ranker per pair and merges.
    "planner": PLANNER,
    # What prepare calls, and the package itself.
    "sources": ENTRY,
    "hybrid": ENTRY,
    "__init__": ENTRY,
}
PLANNER_IMPORTERS = frozenset({"sources", "hybrid", "__init__"})


def _unit(path: Path, root: Path) -> str:
    """The package member a file belongs to: its module, or the subpackage it is in (``engine``)."""
    first = path.relative_to(root).parts[0]
    return first.removesuffix(".py")


def _module_name(path: Path, root: Path) -> list[str]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return [*PACKAGE.split("."), *(parts[:-1] if parts[-1] == "__init__" else parts)]


def _target(dotted: str, root: Path) -> str | None:
    """The package member ``dotted`` names (the package itself: ``__init__``), or None outside the package."""
    if dotted == PACKAGE:
        return "__init__"
    if dotted.startswith(PACKAGE + "."):
        return dotted[len(PACKAGE) + 1 :].split(".")[0]
    return None


def package_imports(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """``(importing member, imported member, file:line)`` of every import inside the package, at any depth."""
    found = []
    for path in sorted(root.rglob("*.py")):
        source = _unit(path, root)
        module = _module_name(path, root)
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the module's package, up level - 1 more
                    base = module if is_package else module[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    dotted = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    dotted = node.module or ""
                names = [dotted]
                if dotted == PACKAGE:  # ``from artifacts.recall import ranking``: each name a member, if one exists
                    names = [
                        f"{PACKAGE}.{alias.name}"
                        if (root / f"{alias.name}.py").exists() or (root / alias.name).is_dir()
                        else PACKAGE
                        for alias in node.names
                    ]
            for name in names:
                if (target := _target(name, root)) is not None:
                    found.append((source, target, f"{path.relative_to(root.parent.parent)}:{node.lineno}"))
    return found


def violations(imports: list[tuple[str, str, str]], layers: dict[str, int] = LAYERS) -> list[str]:
    """What breaks the layering: a member without a layer, an import of a higher layer, a ranker importing another
    ranker, the planner imported by anything but the sources and the package."""
    broken = []
    for source, target, where in imports:
        if source == target:
            continue  # inside one module or one ranker's package
        if source not in layers or target not in layers:
            broken.append(f"{where}: {source} -> {target}: give the new module a layer in this test")
        elif layers[target] > layers[source]:
            broken.append(f"{where}: {source} (layer {layers[source]}) imports {target} (layer {layers[target]})")
        elif layers[source] == layers[target] == RANKERS:
            broken.append(f"{where}: the ranker {source} imports the ranker {target}")
        elif target == "planner" and source not in PLANNER_IMPORTERS:
            broken.append(f"{where}: {source} imports the planner (only the sources and hybrid recall do)")
    return broken


def test_every_module_of_the_package_has_a_layer():
    members = {_unit(path, ROOT) for path in ROOT.rglob("*.py")}

    assert members - LAYERS.keys() == set()


def test_no_module_imports_a_higher_layer_rankers_never_import_one_another_and_only_the_sources_use_the_planner():
    imports = package_imports()

    assert ("hybrid", "planner") in {(source, target) for source, target, _ in imports}  # the walk sees imports
    assert violations(imports) == []


def test_an_import_inside_a_function_counts_like_any_other(tmp_path):
    # Today's shape before the layers: the engine imported the planner (then ``batch``) inside a function, and the SQL
    # ranker imported the engine.
    root = tmp_path / "artifacts" / "recall"
    (root / "engine").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "engine" / "__init__.py").write_text("")
    (root / "engine" / "query.py").write_text(
        "def ranked_by_index():\n    from artifacts.recall.planner import top_of_parts_sql\n"
    )
    (root / "ranking.py").write_text("from artifacts.recall import engine, sql\n")
    (root / "resident.py").write_text("from .ranking import score_sql\n")
    (root / "bm25.py").write_text("from artifacts.recall import resident\n")
    (root / "planner.py").write_text("from artifacts.recall import bm25\n")
    (root / "sql.py").write_text("")

    found = violations(package_imports(root))

    assert [line.split(": ", 1)[1] for line in found] == [
        "bm25 (layer 1) imports resident (layer 2)",
        "engine (layer 2) imports planner (layer 3)",
        "the ranker ranking imports the ranker engine",
        "the ranker resident imports the ranker ranking",
    ]


def test_each_ranker_answers_the_one_contract():
    import inspect

    from artifacts.recall import engine, ranking, resident

    for ranker in (ranking.ranked_by_sql, resident.ranked_in_memory, engine.ranked_by_index):
        inspect.signature(ranker).bind({}, limits={})  # base.Ranker
    inspect.signature(engine.rescoring_by_index).bind({}, limits={})  # base.StatementRanker
    inspect.signature(engine.settled).bind(("memory", 1), None, [], limit=16)
