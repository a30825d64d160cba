"""Which resource types the API serves, and the URL-vs-body checks that are the HTTP layer's to make.

Model validation with fhir.resources.R4B happens once, in the store's write path (InvalidResource -> 422 with
every message); reads never re-parse, the stored JSON is served as is.
"""

from __future__ import annotations

from functools import cache
from importlib.util import find_spec

from services.fhir_api.http.errors import FhirHttpError
from services.fhir_api.http.summary import resource_types


def _has_model(resource_type: str) -> bool:
    """Whether fhir.resources.R4B has a model module for the type (found without importing it)."""
    return find_spec(f"fhir.resources.R4B.{resource_type.lower()}") is not None


@cache
def served_types() -> frozenset[str]:
    """R4 resource types the API accepts: those with an R4 definition and an R4B model to validate with."""
    return frozenset(t for t in resource_types() if _has_model(t))


def check_type(resource_type: str) -> str:
    if resource_type not in served_types():
        raise FhirHttpError(404, f"unknown resource type {resource_type[:80]!r}", code="not-supported")
    return resource_type


def check_body_type(resource: dict, expected_type: str) -> dict:
    """400 when the body's resourceType does not fit the URL."""
    actual = resource.get("resourceType")
    if actual != expected_type:
        got = str(actual)[:80]
        raise FhirHttpError(400, f"resourceType {got!r} does not match the URL type {expected_type!r}")
    return resource
