"""When a resource happened: its clinical time, which the session clock compares with `now`. It runs the
same compiled path programs as index extraction, once per resource write or bulk-loaded line. (Which Patient
compartments hold a resource is read off the reference index: search/keys.py `compartment_keys`.)"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

from services.fhir_api.search.extract import Path, _dates, _first_keys, compile_path

# Elements that say when something clinically happened or became known, in the order tried. The clock hides a
# shared resource from a session whose `now` is before the latest of these the resource carries.
CLINICAL_TIME_ELEMENTS: tuple[tuple[tuple, ...], ...] = tuple(
    tuple(steps)
    for steps in (
        (("c", "effective", ("DateTime", "Period", "Instant", "Timing")),),
        (("f", "issued"),),
        (("f", "authoredOn"),),
        (("c", "onset", ("DateTime", "Period")),),
        (("f", "recordedDate"),),
        (("c", "occurrence", ("DateTime", "Period", "Timing")),),
        (("c", "performed", ("DateTime", "Period")),),
        (("f", "whenHandedOver"),),
        (("f", "whenPrepared"),),
        (("f", "collection"), ("c", "collected", ("DateTime", "Period"))),
        (("f", "receivedTime"),),
        (("f", "sent"),),
        (("f", "recorded"),),
        (("f", "period"),),
        (("f", "date"),),
    )
)
_CLINICAL_TIME_PATHS = tuple((frozenset(_first_keys(s)), compile_path(s), s) for s in CLINICAL_TIME_ELEMENTS)


@lru_cache(maxsize=4096)
def _clinical_time_plan(shape: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[Path, ...]]:
    """For resources with these top-level keys: the present keys that are a whole element (read directly,
    the bulk load's case), and the deeper paths that start from a present key."""
    found = [(keys, path, steps) for keys, path, steps in _CLINICAL_TIME_PATHS if not keys.isdisjoint(shape)]
    direct = tuple(k for keys, _, steps in found if len(steps) == 1 for k in sorted(keys) if k in shape)
    return direct, tuple(path for _, path, steps in found if len(steps) > 1)


def _clinical_nodes(resource: dict) -> Iterator[object]:
    direct, deeper = _clinical_time_plan(tuple(resource))
    for key in direct:
        value = resource[key]
        yield from value if type(value) is list else (value,)
    for path in deeper:
        yield from path(resource)


def clinical_time(resource: dict) -> int | None:
    """µs since the epoch when the resource happened/became known (max of the present elements' starts)."""
    if resource.get("resourceType") in ("Patient", "Organization", "Location", "Medication"):
        return None
    best: int | None = None
    for node in _clinical_nodes(resource):
        for low, _ in _dates(node):
            if low > -(2**61) and (best is None or low > best):
                best = low
    return best
