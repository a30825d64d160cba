"""One name, one concept: the names below, each once two different things (the store's asking context and the
SMART scope's and the synthesizer's state; the scenario builder's chart and the baseline's FHIR client; the
scorer's record value and the sandbox state's wire form), are each defined once in the tree."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("events", "contracts", "services", "fhir_mapper", "rounds")
ONCE = {
    "Context": "services/fhir_api/store/interface.py",
    "Chart": "services/simulator/scenarios/chart.py",
    "RecordValue": "services/consumers/scoring/check_inputs.py",
}


def _names(node: ast.stmt) -> list[str]:
    """The names a module-level statement defines as a class or a type alias."""
    if isinstance(node, ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _definitions() -> dict[str, list[str]]:
    """Module-level classes and type aliases by name, with the files defining them."""
    found: dict[str, list[str]] = defaultdict(list)
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                for name in _names(node):
                    found[name].append(path.relative_to(REPO).as_posix())
    return found


def test_each_of_these_names_is_defined_once() -> None:
    found = _definitions()
    assert {name: found[name] for name in ONCE} == {name: [where] for name, where in ONCE.items()}
