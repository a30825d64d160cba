"""The floors of the house, as data: every project module stands on exactly one floor and may import only
from its own floor or the ones below it (counting imports inside functions and modules loaded by name).

A floor lists its units (a module or package and everything under it; the longest unit that contains a
module places it). Units on the same floor may import each other, except those listed as SIBLINGS, which
stand side by side on the floor below and import nothing from each other.
"""

from __future__ import annotations

FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # what knows nothing of the project: the declarative base, the engine factory, the cycle collector
    ("foundation", ("foundation",)),
    # what every component reads: configuration, installation-wide tables, shared CLI options, the wiring a
    # command is handed (its type)
    ("ground", ("rounds", "rounds.settings", "rounds.models", "rounds.options", "rounds.shards",
                "rounds.wiring")),
    ("events", ("events",)),  # the event log, its payloads and projections
    ("contracts", ("contracts",)),  # what the simulator, the scorer and the report share
    ("fhir", ("services", "services.fhir_api", "fhir_mapper")),  # the FHIR server and the record mapper
    ("services", ("services.simulator", "services.consumers")),  # siblings: the run and what reads it
    # the composition root: commands, the demo, the Inspect task, the registries that name every module, the
    # one process's wiring (settings read once, one engine, one bus) and the migrations it runs
    ("top", ("rounds.registry", "rounds.cli", "rounds.db_cli", "rounds.demo", "rounds.demo_view",
             "rounds.inspect", "rounds.run_command", "rounds.root", "rounds.migrate")),
)

SIBLINGS: tuple[str, ...] = ("services.simulator", "services.consumers")

# Imports that break the floors today and are being moved by work in progress on other parts of the same
# redesign; each goes when that work lands, and this list is then empty. Nothing may be added to it.
KNOWN_EXCEPTIONS: frozenset[tuple[str, str]] = frozenset()


def unit_of(module: str) -> str | None:
    """The floor unit a module belongs to: the longest unit that is the module or contains it."""
    units = [unit for _, members in FLOORS for unit in members
             if module == unit or module.startswith(f"{unit}.")]
    return max(units, key=len) if units else None


def floor_of(module: str) -> int | None:
    """The floor's index (0 = ground) of the module, None when no floor holds it."""
    unit = unit_of(module)
    return next((i for i, (_, members) in enumerate(FLOORS) if unit in members), None)


def upward_imports(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every import from a floor to a higher one, and between siblings, that is not a known exception."""
    found = []
    for module, targets in sorted(edges.items()):
        low, unit = floor_of(module), unit_of(module)
        for target in sorted(targets):
            high, other = floor_of(target), unit_of(target)
            sideways = unit != other and unit in SIBLINGS and other in SIBLINGS
            if (low is not None and high is not None and high > low or sideways) \
                    and (module, target) not in KNOWN_EXCEPTIONS:
                found.append((module, target))
    return found
