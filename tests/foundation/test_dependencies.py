"""Dependencies point down: every module stands on a floor (tests/foundation/floors.py) and imports only from
its floor or below, the simulator and the consumers import nothing from each other, and no project modules
import each other in a cycle — counting imports inside functions and modules loaded by name
(tests/foundation/imports.py)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from tests.foundation.floors import FLOORS, KNOWN_EXCEPTIONS, SIBLINGS, floor_of, unit_of, upward_imports
from tests.foundation.imports import ImportGraph, build

REPO = Path(__file__).resolve().parents[2]


@cache
def repo_graph() -> ImportGraph:
    """The project's graph, read once for the tests that only look at it."""
    return build(REPO)


def test_events_import_nothing_from_services() -> None:
    graph = build(REPO)
    offenders = {
        module: sorted(t for t in graph.eager[module] | graph.lazy[module] if t.split(".")[0] == "services")
        for module in graph.modules
        if module == "events" or module.startswith("events.")
    }
    assert {m: t for m, t in offenders.items() if t} == {}
    assert "events.sql_log" in graph.modules and "events.projections.runner" in graph.modules  # scanned


def test_no_import_cycles_among_project_modules() -> None:
    assert build(REPO).cycles() == []


def _without_known_exceptions(graph: ImportGraph) -> dict[str, set[str]]:
    return {m: {t for t in targets if (m, t) not in KNOWN_EXCEPTIONS} for m, targets in graph.edges().items()}


def test_no_module_cycle_counting_imports_inside_functions_and_by_name() -> None:
    graph = repo_graph()
    edges = _without_known_exceptions(graph)
    assert ImportGraph(graph.modules, edges).cycles() == []


def test_every_module_stands_on_one_floor() -> None:
    units = [unit for _, members in FLOORS for unit in members]
    assert len(units) == len(set(units)), "a unit is on two floors"
    assert [m for m in repo_graph().modules if floor_of(m) is None] == []
    assert floor_of("contracts.score") == 3 and unit_of("services.consumers.report.html_page") == \
        "services.consumers"


def test_no_import_from_a_lower_floor_to_a_higher_one() -> None:
    assert upward_imports(repo_graph().edges()) == []


def test_the_simulator_and_the_consumers_import_nothing_from_each_other() -> None:
    edges = repo_graph().edges()
    across = [(m, t) for m, targets in edges.items() for t in targets
              if {unit_of(m), unit_of(t)} == set(SIBLINGS)]
    assert across == []
    assert any(t.startswith("contracts.") for m, ts in edges.items() if unit_of(m) == SIBLINGS[1] for t in ts)


def test_the_contracts_stand_on_events_and_settings_only() -> None:
    edges = repo_graph().edges()
    outside = {t for m, targets in edges.items() if unit_of(m) == "contracts" for t in targets
               if unit_of(t) not in ("contracts", "events") and t != "rounds.settings"}
    assert outside == set()
    assert "contracts.score" in edges and "events.payloads.session" in edges["contracts.end_reasons"]


def test_no_cycle_among_the_floors_units() -> None:
    graph = repo_graph()
    units = {unit for _, members in FLOORS for unit in members}
    between: dict[str, set[str]] = {unit: set() for unit in units}
    for module, targets in _without_known_exceptions(graph).items():
        between[unit_of(module)] |= {unit_of(t) for t in targets} - {unit_of(module)}
    assert ImportGraph(dict.fromkeys(units, REPO), between).cycles() == []


def test_every_known_exception_is_still_an_import() -> None:
    """A known exception that no longer exists is taken off the list, so the list only ever shrinks."""
    edges = repo_graph().edges()
    assert sorted(e for e in KNOWN_EXCEPTIONS if e[1] not in edges.get(e[0], set())) == []


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_type_checking_cycle_is_a_cycle_and_a_lazy_import_is_not(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
        "b.py": "from pkg import a\n",
        "c.py": "def f():\n    from pkg.d import x\n",
        "d.py": "from . import c\n",
    })
    graph = build(root, ("pkg",))
    assert graph.cycles() == [["pkg.a", "pkg.b"]]
    assert graph.lazy["pkg.c"] == {"pkg.d"} and graph.eager["pkg.d"] == {"pkg.c"}


def test_a_package_importing_its_submodules_is_no_cycle_but_a_name_cycle_is(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "__init__.py": "from pkg.core import Thing\n",
        "core.py": "from pkg import helpers\nThing = 1\n",
        "helpers.py": "x = 1\n",
    })
    assert build(root, ("pkg",)).cycles() == []
    (root / "pkg" / "helpers.py").write_text("from pkg import Thing\n")  # a name __init__ defines
    assert build(root, ("pkg",)).cycles() == [["pkg", "pkg.core", "pkg.helpers"]]


def test_an_import_of_services_under_events_is_seen(tmp_path: Path) -> None:
    root = _package(tmp_path, {"__init__.py": "", "low.py": "class C:\n    def m(self):\n"
                               "        from services.x import y\n"})
    (tmp_path / "services").mkdir()
    (tmp_path / "services" / "__init__.py").write_text("")
    (tmp_path / "services" / "x.py").write_text("y = 1\n")
    graph = build(root, ("pkg", "services"))
    assert graph.lazy["pkg.low"] == {"services.x"}


def test_a_module_loaded_by_name_is_a_lazy_import(tmp_path: Path) -> None:
    registry = "import importlib\nMODULES = ['pkg.plugin', 'pkg.tool:make', 'not.a.module']\n"
    names = "WORDS = ['pkg.plugin']\n"  # no importlib: a string is only a string
    files = {"__init__.py": "", "registry.py": registry, "plugin.py": "from pkg import registry\n",
             "tool.py": "", "names.py": names}
    graph = build(_package(tmp_path, files), ("pkg",))
    assert graph.lazy["pkg.registry"] == {"pkg.plugin", "pkg.tool"} and graph.lazy["pkg.names"] == set()
    assert graph.cycles() == [] and graph.cycles(lazy=True) == [["pkg.plugin", "pkg.registry"]]


def test_an_upward_or_sideways_import_is_found() -> None:
    edges = {
        "contracts.score": {"services.consumers.report.html_page", "events.payloads"},
        "services.simulator.orchestrator.cli": {"services.consumers.scoring.api", "contracts.score"},
        "rounds.run_command": {"services.simulator.orchestrator.cli", "services.consumers.scoring.api"},
    }
    assert upward_imports(edges) == [
        ("contracts.score", "services.consumers.report.html_page"),
        ("services.simulator.orchestrator.cli", "services.consumers.scoring.api"),
    ]
