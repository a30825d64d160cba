"""Validate resources on write with fhir.resources R4B (differs from R4 only in types we do not serve)."""

from __future__ import annotations

from functools import cache

from pydantic import ValidationError

from services.fhir_api.store.interface import InvalidResource


@cache
def _model(resource_type: str):
    from fhir.resources.R4B import get_fhir_model_class

    try:
        return get_fhir_model_class(resource_type)
    except (KeyError, ValueError):
        return None


def validate_resource(resource: dict) -> None:
    """Raise InvalidResource with one message per problem (the stored JSON is never re-serialised)."""
    model = _model(resource["resourceType"])
    if model is None:
        raise InvalidResource(f"unknown resourceType '{resource['resourceType']}'")
    try:
        model.model_validate(resource)
    except ValidationError as exc:
        issues = [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()]
        raise InvalidResource(f"invalid {resource['resourceType']}", issues) from exc
