"""Confinement of `patient/` scopes to one Patient's compartment (CompartmentDefinition-patient).

Searches are narrowed, not refused: the compartment's reference parameter (`patient`, else `subject`, else the
first one the definition lists) is ANDed onto the query, `_id` for Patient itself. Reads and writes by id are
checked against the stored resource with the same search; bodies (create, update) must refer to the patient
through a compartment parameter, and a patch may not touch the elements those parameters read. Types outside
the compartment (Medication, Location, Organization …) may be read and searched, not written.
"""

from __future__ import annotations

from functools import cache

from services.fhir_api.search.extract import index_tuples
from services.fhir_api.search.registry import params_for, patient_compartment, stored_as


def in_compartment_types(resource_type: str) -> bool:
    return resource_type in patient_compartment()


@cache
def narrowing_param(resource_type: str) -> str:
    """The search parameter that confines `resource_type` to one patient (`_id` for Patient)."""
    if resource_type == "Patient":
        return "_id"
    names = patient_compartment()[resource_type]
    return next((n for n in ("patient", "subject") if n in names), names[0])


def narrowing(resource_type: str, patient: str) -> tuple[str, str]:
    name = narrowing_param(resource_type)
    return (name, patient) if name == "_id" else (name, f"Patient/{patient}")


@cache
def _row_params(resource_type: str) -> frozenset[str]:
    """Index-row parameter names whose Patient references put a resource in the compartment."""
    names: set[str] = set()
    for name in patient_compartment().get(resource_type, ()):
        names.update(stored for stored, _target in stored_as(resource_type, name))
    return frozenset(names)


@cache
def guarded_elements(resource_type: str) -> frozenset[str]:
    """Top-level elements a compartment parameter reads (a patch may not change them)."""
    params = params_for(resource_type)
    names = {"id"}
    for name in patient_compartment().get(resource_type, ()):
        for steps, _type in params[name].paths:
            if steps and steps[0][0] in ("f", "c"):
                names.add(steps[0][1])
    return frozenset(names)


def refers_to_patient(resource: dict, patient: str) -> bool:
    """Whether `resource` is in `patient`'s compartment (a Patient: it is that Patient)."""
    resource_type = resource.get("resourceType")
    if resource_type == "Patient":
        return resource.get("id") in (None, patient)
    if not isinstance(resource_type, str) or not in_compartment_types(resource_type):
        return False
    try:
        rows = index_tuples(resource).get("reference", [])
    except Exception:  # noqa: BLE001 - a malformed body: the store's validation will refuse it
        return False
    wanted = _row_params(resource_type)
    return any(row[0] in wanted and row[2] == "Patient" and row[3] == patient for row in rows)


def patch_touches(resource_type: str, document: object) -> bool:
    """Whether a JSON Patch (list) or merge patch (dict) could change what puts it in a compartment."""
    guarded = guarded_elements(resource_type)
    if isinstance(document, dict):
        return any(key in guarded for key in document)
    if isinstance(document, list):
        for op in document:
            if not isinstance(op, dict):
                return True
            for field in ("path", "from"):
                path = op.get(field)
                if path is not None and (not isinstance(path, str)
                                         or path.lstrip("/").split("/", 1)[0] in guarded | {""}):
                    return True
        return False
    return True
