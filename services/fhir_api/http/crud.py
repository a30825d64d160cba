"""Instance and type interactions: read, vread, create, update, patch, delete and their conditional forms."""

from __future__ import annotations

from typing import Any

import jsonpatch
import jsonpointer

from services.fhir_api import json_numbers
from services.fhir_api.http.errors import FhirHttpError
from services.fhir_api.http.hostile import check_document
from services.fhir_api.http.outcome import Call, Outcome
from services.fhir_api.http.validation import check_body_type
from services.fhir_api.store.interface import (
    MultipleMatches,
    NotFound,
    SearchRequest,
    StoredResource,
    VersionConflict,
)


def _check_body(call: Call, resource: dict, resource_type: str) -> None:
    """The body fits the URL, and meets the deployment's rules for its type (`Call.write_checks`: e.g. a
    Subscription's endpoint on the operator's allow-list) — refused with 422 before anything is stored."""
    check_body_type(resource, resource_type)
    check = call.write_checks.get(resource_type)
    if check is not None:
        try:
            check(resource)
        except ValueError as exc:
            raise FhirHttpError(422, str(exc), code="business-rule") from exc


def read(call: Call, resource_type: str, id: str, if_none_match: int | None = None) -> Outcome:
    return read_outcome(call.store.read(call.ctx, resource_type, id), if_none_match)


def read_outcome(stored: StoredResource, if_none_match: int | None) -> Outcome:
    if if_none_match is not None and if_none_match == stored.version_id:
        return Outcome(304)
    return Outcome(200, stored)


def vread(call: Call, resource_type: str, id: str, version_id: int) -> Outcome:
    return Outcome(200, call.store.vread(call.ctx, resource_type, id, version_id))


def create(
    call: Call,
    resource_type: str,
    resource: dict,
    criteria: list[tuple[str, str]] | None,
    id: str | None = None,
) -> Outcome:
    """`id` is only set by transactions, which reserve ids so urn:uuid references resolve up front."""
    _check_body(call, resource, resource_type)
    resource.pop("id", None)  # the server assigns ids on create
    if criteria:
        stored, created = call.store.conditional_create(call.ctx, resource, criteria)
        return Outcome(201 if created else 200, stored, write=True)
    return Outcome(201, call.store.create(call.ctx, resource, id=id), write=True)


def update(call: Call, resource_type: str, id: str, resource: dict, if_match: int | None) -> Outcome:
    if "id" not in resource:
        raise FhirHttpError(400, "the resource in a PUT must carry the id of the URL")
    if resource["id"] != id:
        raise FhirHttpError(400, f"resource id {str(resource['id'])[:80]!r} does not match the URL id {id!r}")
    _check_body(call, resource, resource_type)
    stored, created = call.store.update(call.ctx, resource_type, id, resource, if_match=if_match)
    return Outcome(201 if created else 200, stored, write=True)


def conditional_update(
    call: Call, resource_type: str, resource: dict, criteria: list[tuple[str, str]]
) -> Outcome:
    _check_body(call, resource, resource_type)
    stored, created = call.store.conditional_update(call.ctx, resource_type, resource, criteria)
    return Outcome(201 if created else 200, stored, write=True)


def delete(call: Call, resource_type: str, id: str) -> Outcome:
    call.store.delete(call.ctx, resource_type, id)
    if call.prefer.return_ == "minimal":
        return Outcome(204)
    out = Outcome(200, message=f"deleted {resource_type}/{id}")
    out.body = out.info()
    return out


def resolve(call: Call, resource_type: str, criteria: list[tuple[str, str]]) -> str | None:
    """The id of the one resource matching conditional criteria (None if none; 412 if several)."""
    if not criteria:
        raise FhirHttpError(400, "conditional interaction without search criteria")
    result = call.store.search(call.ctx, SearchRequest(resource_type, criteria, count=2, strict=True))
    if len(result.matches) > 1:
        raise MultipleMatches(f"criteria match more than one {resource_type}")
    return result.matches[0].id if result.matches else None


def conditional_delete(call: Call, resource_type: str, criteria: list[tuple[str, str]]) -> Outcome:
    id = resolve(call, resource_type, criteria)
    if id is None:
        out = Outcome(200, message=f"no {resource_type} matched; nothing deleted")
        out.body = out.info()
        return out
    return delete(call, resource_type, id)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON Merge Patch (what fhirpy's `patch()` sends as application/json)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _apply(resource: dict, document: Any) -> dict:
    """The patched resource, held to the same body rules as a PUT (http/hostile.py)."""
    patched = _patched(resource, document)
    if isinstance(patched, dict):
        check_document(patched)
    return patched


def _patched(resource: dict, document: Any) -> Any:
    if isinstance(document, dict):
        return merge_patch(resource, document)
    try:
        patch = jsonpatch.JsonPatch(document)
    except (jsonpatch.InvalidJsonPatch, jsonpointer.JsonPointerException, TypeError, ValueError,
            AttributeError) as exc:  # a path without its leading "/" is a JsonPointerException
        raise FhirHttpError(400, f"invalid JSON Patch document: {exc}") from exc
    try:
        return patch.apply(resource)
    except jsonpatch.InvalidJsonPatch as exc:
        raise FhirHttpError(400, f"invalid JSON Patch document: {exc}") from exc
    except (
        jsonpatch.JsonPatchException,
        jsonpointer.JsonPointerException,
        TypeError,
        ValueError,
        KeyError,
        IndexError,
        AttributeError,
    ) as exc:
        raise FhirHttpError(422, f"JSON Patch could not be applied: {exc}", code="processable") from exc


def patch(call: Call, resource_type: str, id: str, document: Any, if_match: int | None) -> Outcome:
    current = call.store.read(call.ctx, resource_type, id)
    if if_match is not None and if_match != current.version_id:
        raise VersionConflict(f"{resource_type}/{id} is at version {current.version_id}, not {if_match}")
    resource = _apply(json_numbers.loads(current.raw), document)
    if (
        not isinstance(resource, dict)
        or resource.get("resourceType") != resource_type
        or resource.get("id") != id
    ):
        raise FhirHttpError(400, "a patch may not change resourceType or id")
    _check_body(call, resource, resource_type)
    stored, _ = call.store.update(call.ctx, resource_type, id, resource, if_match=current.version_id)
    return Outcome(200, stored, write=True)


def conditional_patch(
    call: Call, resource_type: str, criteria: list[tuple[str, str]], document: Any
) -> Outcome:
    id = resolve(call, resource_type, criteria)
    if id is None:
        raise NotFound(f"no {resource_type} matches the criteria")
    return patch(call, resource_type, id, document, None)
