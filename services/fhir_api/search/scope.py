"""Where a resource belongs and when it happened: the Patient compartments that hold it (per
CompartmentDefinition-patient) and its clinical time, which the session clock compares with `now`. Both run
the same compiled path programs as index extraction, once per resource write or bulk-loaded line."""

from __future__ import annotations

from functools import cache, lru_cache

from services.fhir_api.search.extract import Path, _dates, _first_keys, compile_path
from services.fhir_api.search.registry import params_for, patient_compartment
from services.fhir_api.search.values import parse_reference


@cache
def _compartment_paths(resource_type: str) -> tuple[Path, ...]:
    params = params_for(resource_type)
    return tuple(
        compile_path(steps)
        for name in patient_compartment().get(resource_type, ())
        if (param := params.get(name)) is not None and not param.unsupported
        for steps, _ in param.paths
    )


def compartment_patients(resource: dict) -> set[str]:
    """Ids of the Patients whose compartment holds this resource (per CompartmentDefinition-patient)."""
    rtype = resource.get("resourceType", "")
    found = {resource["id"]} if rtype == "Patient" and resource.get("id") else set()
    for path in _compartment_paths(rtype):
        for node in path(resource):
            if isinstance(node, dict):
                target_type, target_id, _ = parse_reference(node.get("reference", ""))
                if target_type == "Patient" and target_id:
                    found.add(target_id)
    return found


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
_CLINICAL_TIME_PATHS = tuple((frozenset(_first_keys(s)), compile_path(s)) for s in CLINICAL_TIME_ELEMENTS)


@lru_cache(maxsize=4096)
def _clinical_time_paths(shape: tuple[str, ...]) -> tuple[Path, ...]:
    return tuple(path for keys, path in _CLINICAL_TIME_PATHS if not keys.isdisjoint(shape))


def clinical_time(resource: dict) -> int | None:
    """µs since the epoch when the resource happened/became known (max of the present elements' starts)."""
    if resource.get("resourceType") in ("Patient", "Organization", "Location", "Medication"):
        return None
    best: int | None = None
    for path in _clinical_time_paths(tuple(resource)):
        for node in path(resource):
            for low, _ in _dates(node):
                if low > -(2**61) and (best is None or low > best):
                    best = low
    return best
