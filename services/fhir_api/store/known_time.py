"""The known-time rule: when each fact of the record became known, from `known_time.json` (the only copy).

Who reads it: the store's clock (`search/scope.py` computes a resource's own known time from `elements`,
`store/timing.py` dates what `encounter-end` and `inherit` say in SQL after writes and loads), the as-of views
(`store/views.py`, `views`) and through them the search index's clock, and the scenario builder
(`simulator/scenarios/reader.py`, `known_at`). A benchmark built on a different rule from the server would
expect facts an assistant cannot find (a diagnosis billed at discharge "known" on admission day).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

_DATA: dict[str, Any] = json.loads(Path(__file__).with_name("known_time.json").read_text())


def _tuples(node: object) -> object:
    return tuple(_tuples(x) for x in node) if isinstance(node, list) else node


ELEMENTS: dict[str, tuple[tuple, ...]] = {name: _tuples(steps) for name, steps in _DATA["elements"].items()}
UNTIMED: tuple[str, ...] = tuple(_DATA["untimed"])
PROFILES: dict[str, dict] = _DATA["profiles"]
TYPES: dict[str, dict] = _DATA["types"]
INHERIT: dict[str, list[str]] = _DATA["inherit"]
INHERIT_FROM_REFERRERS: dict[str, list[list[str]]] = _DATA["inherit_from_referrers"]
VIEWS: dict[str, list[dict]] = _DATA["views"]
ENCOUNTER_END = "encounter-end"
ALL_ELEMENTS = tuple(ELEMENTS)
# profiles known at their encounter's end: the store dates them in SQL (timing.py)
ENCOUNTER_END_PROFILES = tuple(url for url, rule in PROFILES.items() if rule["known"] == ENCOUNTER_END)


def rule_of(resource: dict) -> dict | None:
    """The rule a resource's known time follows: its first profile listed, else its type's, else None (the
    latest of every element it carries)."""
    for url in (resource.get("meta") or {}).get("profile") or ():
        if url in PROFILES:
            return PROFILES[url]
    return TYPES.get(resource.get("resourceType", ""))


def elements_of(resource: dict) -> tuple[str, ...]:
    """Names of the elements whose latest start is the resource's own known time (none for `encounter-end`:
    its time comes from the Encounter)."""
    rule = rule_of(resource)
    if rule is None:
        return ALL_ELEMENTS
    return () if rule["known"] == ENCOUNTER_END else tuple(rule["elements"])


def encounter_end(
    encounter: dict | None, date_range: Callable[[str], tuple[int, int] | None], never: int
) -> int:
    """When an `encounter-end` fact of this Encounter became known (µs): the last instant of its period's end;
    `never` (no clocked session sees it) when it has none or is unknown."""
    end = ((encounter or {}).get("period") or {}).get("end")
    found = date_range(end) if isinstance(end, str) else None
    return found[1] - 1 if found else never - 1


def known_at(
    resource: dict,
    own_time: Callable[[dict], int | None],
    referenced: Callable[[str], dict | None],
    date_range: Callable[[str], tuple[int, int] | None],
    never: int,
) -> int | None:
    """The known time (µs) of a resource as the store's clock has it, computed from the resource and what it
    refers to (`referenced("Encounter/1")`): the scenario builder's entry point. `own_time`: search.scope's
    clinical_time (kept there for the bulk load's speed)."""
    rule = rule_of(resource)
    if rule is not None and rule["known"] == ENCOUNTER_END:
        ref = (resource.get("encounter") or {}).get("reference")
        return encounter_end(referenced(ref) if ref else None, date_range, never)
    own = own_time(resource)
    if own is None and resource.get("resourceType") in INHERIT:
        times = []
        for name in INHERIT[resource["resourceType"]]:
            ref = (resource.get(name) or {}).get("reference")
            target = referenced(ref) if isinstance(ref, str) else None
            if target is not None and (t := own_time(target)) is not None:
                times.append(t)
        return max(times) if times else None
    return own
