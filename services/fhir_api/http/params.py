"""Parsing of the small values the HTTP layer reads itself: ids, versions, Prefer, ETags, instants, counts."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from fastapi import Request

from services.fhir_api.http.errors import FhirHttpError

ID_RE = re.compile(r"^[A-Za-z0-9\-.]{1,64}$")
_ETAG_RE = re.compile(r'^\s*(?:W/)?"?(\d+)"?\s*$')
_PARTIAL_DATE = {4: "-01-01", 7: "-01"}
MAX_COUNT = 1000
MAX_INT = 2**62  # offsets, snapshots and versions beyond this cannot be database integers
DEFAULT_COUNT = 20


def check_id(value: str) -> str:
    if not ID_RE.match(value):
        raise FhirHttpError(400, f"invalid resource id {value[:80]!r}")
    return value


def parse_version(value: str) -> int:
    if not value.isdigit() or int(value) >= MAX_INT:
        raise FhirHttpError(404, f"version {value[:80]!r} not found", code="not-found")
    return int(value)


def parse_etag(value: str | None) -> int | None:
    """`W/"3"` (or `3`) -> 3; a malformed ETag is a client error."""
    if value is None:
        return None
    match = _ETAG_RE.match(value)
    if not match or int(match.group(1)) >= MAX_INT:
        raise FhirHttpError(400, f'malformed ETag {value[:80]!r}; expected W/"<versionId>"')
    return int(match.group(1))


def parse_instant(value: str, name: str) -> datetime:
    """A FHIR date/dateTime/instant -> aware datetime (partial dates start at their first instant; UTC)."""
    text = value.strip()
    text = text + _PARTIAL_DATE.get(len(text), "")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise FhirHttpError(400, f"{name}: {value[:80]!r} is not a valid FHIR dateTime") from exc
    if not re.match(r"^\d{4}-\d{2}-\d{2}", text):
        raise FhirHttpError(400, f"{name}: {value[:80]!r} is not a valid FHIR dateTime")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_int(value: str, name: str, *, minimum: int = 0) -> int:
    text = value.strip()
    if not text.isdigit() or not minimum <= int(text) < MAX_INT:
        raise FhirHttpError(400, f"{name} must be an integer in [{minimum}, 2^62), got {value[:80]!r}")
    return int(text)


def parse_count(value: str | None, default: int = DEFAULT_COUNT) -> int:
    """_count: default 20, clamped to 1000 as HAPI does; 0 means 'total only'."""
    return default if value is None else min(parse_int(value, "_count"), MAX_COUNT)


@dataclass(frozen=True)
class Prefer:
    """The parts of the Prefer header this server honours."""

    return_: str = "representation"  # minimal | representation | OperationOutcome
    strict: bool = False

    @classmethod
    def of(cls, request: Request) -> Prefer:
        values: dict[str, str] = {}
        for header in request.headers.getlist("prefer"):
            for part in header.split(","):
                key, _, val = part.strip().partition("=")
                values[key.strip().lower()] = val.strip().strip('"')
        ret = values.get("return", "representation")
        if ret not in ("minimal", "representation", "OperationOutcome"):
            ret = "representation"
        return cls(ret, values.get("handling", "lenient").lower() == "strict")
