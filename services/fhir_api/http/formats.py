"""Content negotiation and request bodies: JSON only (fhir+json / json), bounded reads, clear refusals."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from services.fhir_api import json_numbers
from services.fhir_api.http.errors import FHIR_JSON, FhirHttpError
from services.fhir_api.http.hostile import check_document

JSON_TYPES = frozenset({"application/fhir+json", "application/json", "application/json+fhir"})
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
FORM = "application/x-www-form-urlencoded"
_FORMAT_ALIASES = {
    "json": FHIR_JSON,
    "application/json": "application/json",
    "application/fhir+json": FHIR_JSON,
    "application/json+fhir": FHIR_JSON,
}


def _media_type(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


NDJSON = frozenset({"application/fhir+ndjson", "application/ndjson"})


def response_media_type(request: Request) -> str:
    """The JSON flavour to answer with; 406 when the client only accepts something else (e.g. XML)."""
    fmt = request.query_params.get("_format")
    if fmt is not None:
        chosen = _FORMAT_ALIASES.get(fmt.strip().lower().replace(" ", "+"))
        if chosen is None:
            raise FhirHttpError(406, f"_format {fmt!r} is not supported; this server speaks JSON only")
        return chosen
    accept = request.headers.get("accept")
    if not accept:
        return FHIR_JSON
    offered = [_media_type(part) for part in accept.split(",")]
    if any(t in ("*/*", "application/*", FHIR_JSON, "application/json+fhir") for t in offered):
        return FHIR_JSON
    if "/$export-file/" in request.url.path and NDJSON & set(offered):
        return FHIR_JSON  # a Bulk Data file answers application/fhir+ndjson itself (bulk/http.py)
    if "application/json" in offered:
        return "application/json"
    raise FhirHttpError(406, f"cannot produce {accept!r}; this server speaks application/fhir+json only")


def request_media_type(request: Request, allowed: frozenset[str] = JSON_TYPES) -> str:
    """The body's media type; 415 for anything not in `allowed` (a missing header counts as JSON)."""
    raw = request.headers.get("content-type")
    if not raw:
        return FHIR_JSON
    media = _media_type(raw)
    if media not in allowed:
        raise FhirHttpError(
            415, f"unsupported content type {media!r}; send one of {', '.join(sorted(allowed))}"
        )
    return media


async def read_body(request: Request, limit: int) -> bytes:
    """Read the body, refusing with 413 as soon as it exceeds `limit` (never buffering more than that)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise FhirHttpError(400, "invalid Content-Length")
        if int(declared) > limit:
            raise FhirHttpError(413, f"request body of {declared} bytes exceeds the limit of {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise FhirHttpError(413, f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json(body: bytes, *, expect: type = dict) -> Any:
    """Decode a JSON body; 400 when it is malformed or not the expected top-level shape."""
    if not body.strip():
        raise FhirHttpError(400, "request body is empty")
    try:
        value = json_numbers.loads(body)
    except (ValueError, RecursionError) as exc:
        raise FhirHttpError(400, f"malformed JSON: {exc}") from exc
    if not isinstance(value, expect):
        raise FhirHttpError(400, f"request body must be a JSON {'object' if expect is dict else 'array'}")
    return value


async def read_resource(request: Request, limit: int) -> dict:
    request_media_type(request)
    document = parse_json(await read_body(request, limit))
    check_document(document)  # control characters, empty elements: 400 (http/hostile.py)
    return document
