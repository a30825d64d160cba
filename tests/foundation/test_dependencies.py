"""Dependencies point down: `events/` (the lower layer) never imports `services/`, and no project modules
import each other in a cycle (module level and type-checking imports: tests/foundation/imports.py)."""

from __future__ import annotations

from pathlib import Path

from tests.foundation.imports import build

REPO = Path(__file__).resolve().parents[2]


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
