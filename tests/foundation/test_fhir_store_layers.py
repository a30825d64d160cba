"""The FHIR store and search are layered one way: `services/fhir_api/search` (the parameter table, value
parsing, parameter keys, index extraction) imports nothing of `services/fhir_api/store` (tables, the as-of
rule, the query compiler and its execution, sessions), which stands on it. Imports inside functions count:
a lazy import back down would be the same two-way dependency, only hidden (tests/foundation/imports.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.foundation.imports import ImportGraph, build

REPO = Path(__file__).resolve().parents[2]
STORE, SEARCH = "services.fhir_api.store", "services.fhir_api.search"


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _edges(graph: ImportGraph, source: str, target: str) -> list[str]:
    """`module -> imported` for every import (module level, type-checking or inside a function) from a
    module of package `source` to one of package `target`."""
    return sorted(
        f"{module} -> {imported}"
        for module in graph.modules
        if _in(module, source)
        for imported in graph.eager[module] | graph.lazy[module]
        if _in(imported, target)
    )


def test_search_imports_nothing_of_the_store() -> None:
    graph = build(REPO)
    assert f"{SEARCH}.extract" in graph.modules and f"{STORE}.asof" in graph.modules  # both scanned
    assert _edges(graph, SEARCH, STORE) == []
    assert _edges(graph, STORE, SEARCH), "the store stands on search (else the test checks nothing)"


def test_a_lazy_import_back_is_seen(tmp_path: Path) -> None:
    """The check counts an import inside a function as a dependency, as the layering forbids it."""
    root = tmp_path / "services" / "fhir_api"
    for package, text in (("store", "from services.fhir_api.search import low\n"),
                          ("search", "def f():\n    from services.fhir_api.store import high\n")):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
        (root / package / ("high.py" if package == "store" else "low.py")).write_text(text)
    for init in (tmp_path / "services", root):
        (init / "__init__.py").write_text("")
    graph = build(tmp_path, ("services",))
    assert _edges(graph, SEARCH, STORE) == [f"{SEARCH}.low -> {STORE}.high"]
    assert _edges(graph, STORE, SEARCH) == [f"{STORE}.high -> {SEARCH}.low"]


def test_the_store_uses_only_the_public_names_of_search() -> None:
    """What the store shares with search is search's public API: a private helper imported across the layer
    would be changed by search as its own, unaware of the store depending on it."""
    private = []
    for path in (REPO / "services" / "fhir_api" / "store").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(SEARCH):
                private += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert private == []
