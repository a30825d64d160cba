"""When a resource happened: its clinical time, which the session clock compares with `now`. It runs the
same compiled path programs as index extraction, once per resource write or bulk-loaded line. (Which Patient
compartments hold a resource is read off the reference index: search/keys.py `compartment_keys`.)"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

from services.fhir_api.search.extract import Path, _dates, _first_keys, compile_path
from services.fhir_api.store.known_time import ELEMENTS, UNTIMED, elements_of

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
