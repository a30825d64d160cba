"""When a resource happened: its clinical time, which the session clock compares with `now`. It runs the
same compiled path programs as index extraction, once per resource write or bulk-loaded line. `known_at` adds
what the store dates in SQL after writes (store/timing.py: `encounter-end`, `inherit`) for one resource and
what it refers to: the scenario builder's entry point. (Which Patient compartments hold a resource is read off
the reference index: search/keys.py `compartment_keys`.)"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache

from services.fhir_api.search.extract import Path, _dates, _first_keys, compile_path, run_path
from services.fhir_api.search.registry import get_param
from services.fhir_api.search.values import MAX_US, date_range
from services.fhir_api.store.known_time import ELEMENTS, ENCOUNTER_END, INHERIT, UNTIMED, elements_of, rule_of

# The clinical-time elements by name (store/known_time.json `elements`): a resource's own known time is the
# latest start of those its rule names (store/known_time.py `elements_of`).
_CLINICAL_TIME_PATHS = {
    name: (frozenset(_first_keys(steps)), compile_path(steps), steps) for name, steps in ELEMENTS.items()
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
    known-time rule names); None when it has none (timing.py dates it from what it belongs to)."""
    if resource.get("resourceType") in UNTIMED:
        return None
    best: int | None = None
    for node in _clinical_nodes(resource):
        for low, _ in _dates(node):
            if low > -(2**61) and (best is None or low > best):
                best = low
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
    its `inherit` parameters point at."""
    rule = rule_of(resource)
    if rule is not None and rule["known"] == ENCOUNTER_END:
        refs = _references(resource, "encounter")
        encounter = referenced(refs[0]) if refs else None
        end = ((encounter or {}).get("period") or {}).get("end")
        found = date_range(end) if isinstance(end, str) else None
        return found[1] - 1 if found else MAX_US - 1
    own = clinical_time(resource)
    if own is not None or resource.get("resourceType") not in INHERIT:
        return own
    targets = [
        referenced(ref) for name in INHERIT[resource["resourceType"]] for ref in _references(resource, name)
    ]
    times = [t for target in targets if target is not None and (t := clinical_time(target)) is not None]
    return max(times, default=None)
