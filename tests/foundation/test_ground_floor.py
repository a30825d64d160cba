"""rounds/ is two floors: the ground floor (settings, database, migrations runner, shared CLI options, the
cycle-collector helpers) imports nothing of the project but itself, counting imports inside functions; the
composition root (registry, CLI, demo) sits on top and nothing below imports it."""

from __future__ import annotations

from pathlib import Path

from tests.foundation.imports import build

REPO = Path(__file__).resolve().parents[2]
GROUND = {"rounds", "rounds.settings", "rounds.db", "rounds.models", "rounds.migrate", "rounds.gcpause",
          "rounds.options", "rounds.shards"}
TOP = {"rounds.registry", "rounds.cli", "rounds.demo", "rounds.demo_view", "rounds.db_cli"}


def test_the_ground_floor_imports_only_the_ground_floor() -> None:
    graph = build(REPO)
    assert set(graph.modules) >= GROUND
    upward = {module: sorted((graph.eager[module] | graph.lazy[module]) - GROUND) for module in GROUND}
    assert {module: targets for module, targets in upward.items() if targets} == {}


def test_nothing_below_the_composition_root_imports_it() -> None:
    graph = build(REPO)
    below = set(graph.modules) - TOP
    importers = {module: sorted((graph.eager[module] | graph.lazy[module]) & TOP) for module in below}
    assert {module: targets for module, targets in importers.items() if targets} == {}
