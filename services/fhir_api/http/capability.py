"""The CapabilityStatement, generated from the routes' interactions and the search parameter table."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

import orjson

from services.fhir_api.http.validation import served_types
from services.fhir_api.search import registry, supported_search_params

# Interactions every served type has (routes.py implements each of them).
TYPE_INTERACTIONS = (
    "read",
    "vread",
    "update",
    "patch",
    "delete",
    "history-instance",
    "history-type",
    "create",
)
SYSTEM_INTERACTIONS = ("transaction", "batch", "search-system", "history-system")
EVERYTHING = "http://hl7.org/fhir/OperationDefinition/Patient-everything"
BULK = "http://hl7.org/fhir/uv/bulkdata"  # Bulk Data Access (services/fhir_api/bulk)
TYPE_OPERATIONS = {
    "Patient": [{"name": "everything", "definition": EVERYTHING},
                {"name": "export", "definition": f"{BULK}/OperationDefinition/patient-export"}],
    "Group": [{"name": "export", "definition": f"{BULK}/OperationDefinition/group-export"}],
    "Subscription": [{"name": "status", "definition": "http://hl7.org/fhir/uv/subscriptions-backport/"
                                                      "OperationDefinition/backport-subscription-status"}],
}


def _params(resource_type: str) -> list[tuple[str, str, str]]:
    """(name, type, documentation) of exactly what search implements for the type."""
    return [(name, type_, doc or "") for name, type_, doc in supported_search_params(resource_type)]


def _targets(resource_type: str, name: str) -> tuple[str, ...]:
    param = registry.get_param(resource_type, name)
    return param.targets if param else ()


def _resource(resource_type: str, params: list[tuple[str, str, str]], revincludes: list[str]) -> dict:
    entry: dict[str, Any] = {
        "type": resource_type,
        "interaction": [{"code": c} for c in (*TYPE_INTERACTIONS, *(("search-type",) if params else ()))],
        "versioning": "versioned-update",
        "readHistory": True,
        "updateCreate": True,
        "conditionalCreate": True,
        "conditionalRead": "not-match",  # If-None-Match on read -> 304
        "conditionalUpdate": True,
        "conditionalDelete": "single",
    }
    if params:
        entry["searchInclude"] = [f"{resource_type}:{n}" for n, t, _ in params if t == "reference"]
        entry["searchRevInclude"] = revincludes
        entry["searchParam"] = [
            {"name": n, "type": t, **({"documentation": d} if d else {})} for n, t, d in params
        ]
    if resource_type in TYPE_OPERATIONS:
        entry["operation"] = TYPE_OPERATIONS[resource_type]
    return entry


@cache
def _static() -> dict:
    params = {t: _params(t) for t in sorted(served_types())}
    references = [(t, n) for t, ps in params.items() for n, kind, _ in ps if kind == "reference"]
    resources = [
        _resource(t, ps, [f"{src}:{n}" for src, n in references if t in _targets(src, n)] if ps else [])
        for t, ps in params.items()
    ]
    return {
        "resourceType": "CapabilityStatement",
        "status": "active",
        "date": datetime.now(UTC).date().isoformat(),
        "publisher": "Rounds",
        "kind": "instance",
        "software": {"name": "Rounds FHIR API", "version": "0.1.0"},
        "instantiates": [f"{BULK}/CapabilityStatement/bulk-data"],
        "fhirVersion": "4.0.1",
        "format": ["application/fhir+json", "json"],
        "patchFormat": ["application/json-patch+json", "application/merge-patch+json"],
        "rest": [
            {
                "mode": "server",
                "resource": resources,
                "interaction": [{"code": c} for c in SYSTEM_INTERACTIONS],
                "operation": [{"name": "everything", "definition": EVERYTHING},
                              {"name": "export", "definition": f"{BULK}/OperationDefinition/export"}],
            }
        ],
    }


def capability_statement(base: str, security: dict | None = None, documentation: str | None = None) -> bytes:
    """The statement for `base`; `security` (services/fhir_api/auth/smart.py) when access control is on;
    `documentation` (the request limits, http/request_limits.py) as `rest.documentation`."""
    doc = dict(_static())
    doc["implementation"] = {"description": "Rounds FHIR R4 server", "url": base}
    rest = dict(doc["rest"][0])
    if documentation is not None:
        rest["documentation"] = documentation
    if security is not None:
        rest["security"] = security
    doc["rest"] = [rest]
    return orjson.dumps(doc)
