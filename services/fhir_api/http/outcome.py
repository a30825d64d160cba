"""What one FHIR interaction produced (`Outcome`) and how it becomes an HTTP response or a Bundle entry.

Operations (crud.py, search.py) return an Outcome, so REST routes and batch/transaction entries share them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

import orjson
from fastapi.responses import Response

from services.fhir_api.http.bundles import FULL, etag, instant, resource_fragment, status_line, version_path
from services.fhir_api.http.errors import FHIR_JSON, operation_outcome, outcome_bytes
from services.fhir_api.http.params import Prefer
from services.fhir_api.http.summary import Subset
from services.fhir_api.store.interface import Context, ResourceStore, StoredResource
from services.fhir_api.withheld import served

if TYPE_CHECKING:
    from services.fhir_api.subscriptions.numbering import EventNumbers


class Guard(Protocol):
    """Access control inside a request (services/fhir_api/auth/guard.py; None when auth is off or the token
    may do anything): batch / transaction entries, and what an answer may hold."""

    @property
    def filters(self) -> bool:
        """Whether answers are filtered through `visible`."""
        ...

    def entry(self, call: Call, route: str | None, resource_type: str | None, id: str | None,
              query: list[tuple[str, str]], criteria: list[tuple[str, str]] | None, body: object
              ) -> tuple[list[tuple[str, str]], list[tuple[str, str]] | None]:
        """The entry's (query, conditional-create criteria), narrowed; FhirHttpError 403 when refused."""
        ...

    def visible(self, call: Call, stored: StoredResource) -> bool: ...


@dataclass
class Call:
    """Everything an operation needs to know about the request it serves."""

    store: ResourceStore
    ctx: Context
    base: str  # absolute FHIR base, e.g. https://host/sessions/abc/fhir
    prefer: Prefer = field(default_factory=Prefer)
    subset: Subset = FULL
    media_type: str = FHIR_JSON
    guard: Guard | None = None  # set by access control (request state "guard")
    # resource type -> a rule of this deployment its written bodies must meet (ValueError: 422); app.py
    write_checks: Mapping[str, Callable[[dict], None]] = field(default_factory=dict)
    # the Subscriptions' event numbers `$status` reports (subscriptions/numbering.py); app.py hands them in
    event_numbers: EventNumbers | None = None


@dataclass
class Outcome:
    status: int
    stored: StoredResource | None = None  # single-resource answer (read, write)
    body: bytes | None = None  # anything else: a Bundle, an OperationOutcome
    write: bool = False  # Prefer: return=... applies, Location/Content-Location are set
    message: str | None = None  # shown when the client prefers an OperationOutcome

    def info(self) -> bytes:
        return outcome_bytes([self.message or status_line(self.status)], "informational", "information")


def _http_date(stored: StoredResource) -> str:
    return _rfc1123(stored.last_updated)


@lru_cache(maxsize=4096)
def _rfc1123(ts: datetime) -> str:
    """Last-Modified text (email.utils formatting is ~3 % of a read's CPU; a bulk load stamps one time)."""
    return format_datetime((ts if ts.tzinfo else ts.replace(tzinfo=UTC)).astimezone(UTC), usegmt=True)


def _write_body(call: Call, outcome: Outcome) -> bytes | None:
    if call.prefer.return_ == "minimal":
        return None
    if call.prefer.return_ == "OperationOutcome":
        return outcome.info()
    if outcome.stored is not None and not outcome.stored.deleted:
        return served(outcome.stored)
    return outcome.body


def to_response(call: Call, outcome: Outcome) -> Response:
    headers: dict[str, str] = {}
    stored = outcome.stored
    if stored is not None and not stored.deleted:
        headers["ETag"] = etag(stored.version_id)
        headers["Last-Modified"] = _http_date(stored)
        if outcome.write:
            headers["Location" if outcome.status == 201 else "Content-Location"] = (
                f"{call.base}/{version_path(stored)}"
            )
    if outcome.write:
        body = _write_body(call, outcome)
    elif stored is not None:
        body = call.subset.apply(served(stored))
    else:
        body = outcome.body
    return Response(
        body or b"", status_code=outcome.status, headers=headers, media_type=call.media_type if body else None
    )


def to_entry(call: Call, outcome: Outcome) -> dict[str, Any]:
    """A batch/transaction-response entry."""
    entry: dict[str, Any] = {}
    response: dict[str, Any] = {"status": status_line(outcome.status)}
    stored = outcome.stored
    if stored is not None and not stored.deleted:
        entry["fullUrl"] = f"{call.base}/{stored.resource_type}/{stored.id}"
        if call.prefer.return_ == "representation":
            entry["resource"] = resource_fragment(stored, FULL if outcome.write else call.subset)
        if outcome.write:
            response["location"] = version_path(stored)
        response["etag"] = etag(stored.version_id)
        response["lastModified"] = instant(stored.last_updated)
    elif outcome.body is not None and call.prefer.return_ == "representation":
        entry["resource"] = orjson.Fragment(outcome.body)
    if call.prefer.return_ == "OperationOutcome":
        response["outcome"] = orjson.Fragment(outcome.info())
    entry["response"] = response
    return entry


def error_entry(status: int, messages: list[str], code: str) -> dict[str, Any]:
    return {"response": {"status": status_line(status), "outcome": operation_outcome(messages, code)}}
