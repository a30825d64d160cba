"""Confinement of `patient/` scopes to one Patient's compartment (CompartmentDefinition-patient).

Searches are narrowed, not refused: the compartment's reference parameter (`patient`, else `subject`, else the
first one the definition lists) is ANDed onto the query, `_id` for Patient itself. Reads and writes by id are
checked against the stored resource with the same search; bodies (create, update) must refer to the patient
through a compartment parameter, and a patch may not touch the elements those parameters read. Types outside
the compartment (Medication, Location, Organization …) may be read and searched, not written.

`decide` states these rules once for a REST request (auth/middleware.py) and a batch or transaction entry
(auth/guard.py) alike; what a response holds beyond the narrowed matches (included resources, history
versions) is filtered with `visible`.
"""

from __future__ import annotations

from dataclasses import dataclass
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


class Outside(Exception):
    """A request a patient-confined token may not make (-> 403)."""


@dataclass(frozen=True)
class Decision:
    """What confining one request takes besides filtering its answer."""

    narrow: tuple[str, str] | None = None  # ANDed onto the search (create: onto its criteria, if any)
    check_id: str | None = None  # the stored resource of this id (if any) must be in the compartment
    body: bool = False  # the body (resource or patch) must pass check_body


def decide(patient: str, resource_type: str, interaction: str, verb: str, id: str | None,
           conditional: bool = False) -> Decision:
    """The confinement of one request (`resource_type` "*": system level). Raises Outside when refused.
    `interaction` as services/fhir_api/auth/policy.py names them (instance history and vread: "read")."""
    if interaction == "history":
        return Decision()  # any level: the versions outside the compartment are left out of the answer
    if resource_type == "*":
        raise Outside("patient-confined tokens search one type at a time")
    if resource_type != "Patient" and not in_compartment_types(resource_type):
        if verb not in "rs":
            raise Outside(f"{resource_type} is outside every patient compartment: read-only for this token")
        return Decision()
    if interaction == "everything":
        if id != patient:
            raise Outside(f"$everything of another patient than Patient/{patient}")
        return Decision()
    if interaction == "operation":
        raise Outside("operations are not available to patient-confined tokens")
    if interaction == "search" or conditional:
        return Decision(narrow=narrowing(resource_type, patient),
                        body=interaction in ("create", "update", "patch"))
    if interaction == "create":
        return Decision(narrow=narrowing(resource_type, patient), body=True)
    if resource_type == "Patient" and id is not None and id != patient:
        raise Outside(f"outside the compartment of Patient/{patient}")
    return Decision(check_id=id if resource_type != "Patient" else None,
                    body=interaction in ("update", "patch"))


def check_body(patient: str, resource_type: str, interaction: str, document: object) -> None:
    """Raise Outside when a create / update body is not about the patient, or a patch touches what puts the
    resource in a compartment."""
    if resource_type == "Patient" and interaction == "create":
        raise Outside("a patient-confined token cannot create patients")
    if interaction == "patch":
        if patch_touches(resource_type, document):
            raise Outside("a patient-confined token may not patch what puts a resource in a compartment")
        return
    if not (isinstance(document, dict) and refers_to_patient(document, patient)):
        raise Outside(f"outside the compartment of Patient/{patient}")


def visible(resource: dict, patient: str) -> bool:
    """Whether a patient-confined token may see `resource`: in the compartment, or of a type outside every
    compartment (those are readable)."""
    resource_type = resource.get("resourceType")
    if resource_type != "Patient" and not (isinstance(resource_type, str)
                                           and in_compartment_types(resource_type)):
        return True
    return refers_to_patient(resource, patient)
