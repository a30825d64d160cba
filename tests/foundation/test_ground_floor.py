"""rounds/ is two floors: the ground floor (settings, the wiring a command is handed, shared options), with
foundation/ (database base, engine factory, cycle-collector helpers) under it, imports nothing of the project
but those, counting imports inside functions; the composition root (the process's root, migrations, registry,
CLI, demo, Inspect task) sits on top and nothing below imports it. Both floors are read from
tests/foundation/floors.py, where every floor is listed once."""

from __future__ import annotations

from pathlib import Path

from tests.foundation.floors import FLOORS, floor_of
from tests.foundation.imports import build

REPO = Path(__file__).resolve().parents[2]
FLOOR = {name: index for index, (name, _) in enumerate(FLOORS)}
GROUND, TOP = FLOOR["ground"], FLOOR["top"]


def test_the_ground_floor_imports_only_the_ground_floor() -> None:
    """Only its own floor and those below it (none today; a foundation package under it would be one)."""
    graph = build(REPO)
    ground = {module for module in graph.modules if floor_of(module) == GROUND}
    assert {"rounds.settings", "rounds.options"} <= ground
    upward = {module: sorted(t for t in graph.eager[module] | graph.lazy[module]
                             if (floor_of(t) or 0) > GROUND) for module in ground}
    assert {module: targets for module, targets in upward.items() if targets} == {}


def test_nothing_below_the_composition_root_imports_it() -> None:
    graph = build(REPO)
    top = {module for module in graph.modules if floor_of(module) == TOP}
    assert {"rounds.registry", "rounds.cli", "rounds.run_command", "rounds.inspect.task"} <= top
    importers = {module: sorted((graph.eager[module] | graph.lazy[module]) & top)
                 for module in set(graph.modules) - top}
    assert {module: targets for module, targets in importers.items() if targets} == {}
