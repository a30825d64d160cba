"""The known-time rule: when each fact of the record became known, from `known_time.json` (the only copy).

Who reads it: the store's clock (`search/scope.py` computes a resource's own known time from `elements`,
`store/timing.py` dates what `encounter-end` and `inherit` say in SQL after writes and loads), the as-of views
(`store/views.py`, `views`) and through them the search index's clock, and the scenario builder
(`simulator/scenarios/reader.py`, through `search/scope.py` `known_at`). A benchmark built on a different
rule from the server would expect facts an assistant cannot find (a diagnosis billed at discharge "known" on
admission day).
"""

from __future__ import annotations

import json
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

