"""Bundles (searchset, history, batch/transaction-response) built around the stored JSON bytes.

Resources are embedded with orjson.Fragment, so a page of search results is never decoded and re-encoded.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

import orjson

from services.fhir_api.http.summary import Subset
from services.fhir_api.store.interface import StoredResource
from services.fhir_api.withheld import served

FULL = Subset()
_HISTORY_STATUS = {"POST": 201, "PUT": 200, "PATCH": 200, "DELETE": 204}


def status_line(status: int) -> str:
    return f"{status} {HTTPStatus(status).phrase}"


def etag(version_id: int) -> str:
    return f'W/"{version_id}"'


def instant(value: datetime) -> str:
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()


def full_url(base: str, stored: StoredResource) -> str:
    return f"{base}/{stored.resource_type}/{stored.id}"


def version_path(stored: StoredResource) -> str:
    return f"{stored.resource_type}/{stored.id}/_history/{stored.version_id}"


def resource_fragment(stored: StoredResource, subset: Subset = FULL) -> orjson.Fragment:
    return orjson.Fragment(subset.apply(served(stored)))


def search_entry(base: str, stored: StoredResource, mode: str, subset: Subset) -> dict[str, Any]:
    return {
        "fullUrl": full_url(base, stored),
        "resource": resource_fragment(stored, subset),
        "search": {"mode": mode},
    }


def history_entry(base: str, stored: StoredResource) -> dict[str, Any]:
    entry: dict[str, Any] = {"fullUrl": full_url(base, stored)}
    if not stored.deleted:
        entry["resource"] = resource_fragment(stored)
    url = stored.resource_type if stored.method == "POST" else f"{stored.resource_type}/{stored.id}"
    entry["request"] = {"method": stored.method, "url": url}
    entry["response"] = {
        "status": status_line(_HISTORY_STATUS.get(stored.method, 200)),
        "etag": etag(stored.version_id),
        "lastModified": instant(stored.last_updated),
    }
    return entry


def bundle(
    kind: str, entries: list[dict[str, Any]], *, total: int | None = None, links: list[tuple[str, str]] = ()
) -> bytes:
    doc: dict[str, Any] = {
        "resourceType": "Bundle",
        "id": str(uuid.uuid4()),
        "meta": {"lastUpdated": datetime.now(UTC).isoformat()},
        "type": kind,
    }
    if total is not None:
        doc["total"] = total
    if links:
        doc["link"] = [{"relation": rel, "url": url} for rel, url in links]
    doc["entry"] = entries
    if not entries:
        del doc["entry"]
    return orjson.dumps(doc)
