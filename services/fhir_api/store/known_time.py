"""The known-time rule: when each fact of the record became known, from `known_time.json` (the only copy),
and a resource's known time computed from it in Python (`clinical_time`, `known_at`).

Who reads it: the store's clock (`clinical_time` here, stored on every write and bulk-loaded line as
`fhir_resource.clinical_time`, which store/asof.py compares with a session's `now`; store/timing.py dates in
SQL what `encounter-end` and `inherit` say after writes and loads), the as-of views (`store/views.py`,
`views`) and through them the search index's clock, and the scenario builder
(`simulator/scenarios/reader.py`, through `known_at`). A benchmark built on a different rule from the server
would expect facts an assistant cannot find (a diagnosis billed at discharge "known" on admission day).
The compiled paths and parameter lookups come from the search package (search/extract.py,
search/registry.py): the builder reads references through the same parameters as timing.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from functools import lru_cache
from pathlib import Path as FilePath
from typing import Any
from zoneinfo import ZoneInfo

from services.fhir_api.search.extract import Path, compile_path, first_keys, run_path
from services.fhir_api.search.registry import get_param
from services.fhir_api.search.values import MAX_US, date_range, to_us

_DATA: dict[str, Any] = json.loads(FilePath(__file__).with_name("known_time.json").read_text())


def _tuples(node: object) -> object:
    return tuple(_tuples(x) for x in node) if isinstance(node, list) else node


ELEMENTS: dict[str, tuple[tuple, ...]] = {name: _tuples(steps) for name, steps in _DATA["elements"].items()}
# the types that have no known time: always visible, and references to them never dated (timing.py)
UNTIMED: tuple[str, ...] = tuple(_DATA["untimed"]["types"])
PROFILES: dict[str, dict] = _DATA["profiles"]
TYPES: dict[str, dict] = _DATA["types"]
INHERIT: dict[str, list[str]] = _DATA["inherit"]
INHERIT_FROM_REFERRERS: dict[str, list[list[str]]] = _DATA["inherit_from_referrers"]
VIEWS: dict[str, list[dict]] = _DATA["views"]
# the record's zone: a date-only value is known at the end of that day there (`dates`)
RECORD_ZONE = ZoneInfo(_DATA["dates"]["zone"])
NEVER = MAX_US - 1  # the known time of what no clock ever shows
ENCOUNTER_END = "encounter-end"
ALL_ELEMENTS = tuple(ELEMENTS)
# profiles known at their encounter's end: the store dates them in SQL (timing.py)
ENCOUNTER_END_PROFILES = tuple(url for url, rule in PROFILES.items() if rule["known"] == ENCOUNTER_END)


@lru_cache(maxsize=1 << 14)
def _local_end(text: str) -> int | None:
    """The last µs of a date-only value's period (a day, a month, a year) in the record's zone."""
    parts = [int(p) for p in text.split("-")]
    try:
        if len(parts) == 3:
            after = date(*parts) + timedelta(days=1)
        elif len(parts) == 2:
            after = date(parts[0] + parts[1] // 12, parts[1] % 12 + 1, 1)
        else:
            after = date(parts[0] + 1, 1, 1)
    except (ValueError, OverflowError):
        return None
    return to_us(datetime(after.year, after.month, after.day, tzinfo=RECORD_ZONE)) - 1


def known_from(text: object) -> int | None:
    """When a dated value became known (µs), by the `dates` rule: a value with a time of day at its start,
    a date-only value (YYYY, YYYY-MM, YYYY-MM-DD) at the end of that period in the record's zone — read as
    a UTC day, a death on 6 May would show from 19:00 local on 5 May. None when it is no date."""
    found = date_range(text) if isinstance(text, str) else None
    if found is None:
        return None
    return found[0] if "T" in text else _local_end(text.strip())  # type: ignore[union-attr]


def _known_starts(node: object) -> list[int]:
    """The known times of a clinical-time node: a date, the start of a Period, each event of a Timing."""
    if isinstance(node, str):
        found = known_from(node)
        return [] if found is None else [found]
    if isinstance(node, dict):
        if "start" in node or "end" in node:
            return _known_starts(node.get("start"))  # a Period without a start has no known start
        if isinstance(node.get("event"), list):
            return [t for event in node["event"] for t in _known_starts(event)]
    return []


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


# The clinical-time elements by name, compiled once: the same path programs as index extraction, run once per
# resource write or bulk-loaded line.
_CLINICAL_TIME_PATHS = {
    name: (frozenset(first_keys(steps)), compile_path(steps), steps) for name, steps in ELEMENTS.items()
}


@lru_cache(maxsize=4096)
def _clinical_time_plan(
    names: tuple[str, ...], shape: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[Path, ...]]:
    """For resources with these top-level keys whose rule names these elements: the present keys that are a
    whole element (read directly, the bulk load's case), and the deeper paths that start from a present
    key."""
    paths = [_CLINICAL_TIME_PATHS[name] for name in names]
    found = [(keys, path, steps) for keys, path, steps in paths if not keys.isdisjoint(shape)]
    direct = tuple(k for keys, _, steps in found if len(steps) == 1 for k in sorted(keys) if k in shape)
    return direct, tuple(path for _, path, steps in found if len(steps) > 1)


def _clinical_nodes(resource: dict) -> Iterator[object]:
    direct, deeper = _clinical_time_plan(elements_of(resource), tuple(resource))
    for key in direct:
        value = resource[key]
        yield from value if type(value) is list else (value,)
    for path in deeper:
        yield from path(resource)


def clinical_time(resource: dict) -> int | None:
    """µs since the epoch when the resource became known by its own elements (the latest start of those its
    known-time rule names, each dated by `known_from`); NEVER when its rule says `missing: never` and it has
    none; None otherwise when it has none (an `untimed` type; timing.py dates the rest from what they
    belong to)."""
    if resource.get("resourceType") in UNTIMED:
        return None
    best: int | None = None
    for node in _clinical_nodes(resource):
        for low in _known_starts(node):
            if low > -(2**61) and (best is None or low > best):
                best = low
    if best is None and (rule_of(resource) or {}).get("missing") == "never":
        return NEVER
    return best


def _references(resource: dict, name: str) -> list[str]:
    """The references a resource's reference parameter `name` reads (as the index has them)."""
    param = get_param(resource.get("resourceType", ""), name)
    nodes = [n for steps, _ in (param.paths if param else ()) for n in run_path(resource, steps)]
    return [n["reference"] for n in nodes if isinstance(n, dict) and isinstance(n.get("reference"), str)]


def known_at(resource: dict, referenced: Callable[[str], dict | None]) -> int | None:
    """The known time (µs) of a resource as the store's clock has it, from the resource and what it refers to
    (`referenced("Encounter/1")`): an `encounter-end` resource at the last instant of its Encounter's end
    (MAX_US - 1, never to a clock, when there is none), one without a time of its own at the latest of what
    its `inherit` parameters point at. The scenario builder's entry point: it adds for one resource what
    timing.py dates in SQL after writes."""
    rule = rule_of(resource)
    if rule is not None and rule["known"] == ENCOUNTER_END:
        refs = _references(resource, "encounter")
        encounter = referenced(refs[0]) if refs else None
        end = ((encounter or {}).get("period") or {}).get("end")
        found = date_range(end) if isinstance(end, str) else None
        return found[1] - 1 if found else NEVER
    own = clinical_time(resource)
    if own is not None or resource.get("resourceType") not in INHERIT:
        return own
    targets = [
        referenced(ref) for name in INHERIT[resource["resourceType"]] for ref in _references(resource, name)
    ]
    times = [t for target in targets if target is not None and (t := clinical_time(target)) is not None]
    return max(times, default=None)
