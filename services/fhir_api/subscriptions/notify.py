"""Notification bundles in the Subscriptions R5 Backport IG's R4 shape: a `history` Bundle whose first entry
is a `Parameters` subscription status (type handshake | heartbeat | event-notification), then, for an event,
the focus resource (full-resource), its URL only (id-only) or nothing (empty).

A notification's `Bundle.id` is derived from the subscription and the change event's id, so a redelivery
(at least once) is the same bundle: receivers deduplicate on it (also sent as `X-Rounds-Event-Id`).
"""

from __future__ import annotations

import uuid

import orjson

from events.envelope import utc_now
from services.fhir_api.subscriptions.subscription import Subscription

NAMESPACE = uuid.UUID("6f1c1a44-3f0a-4c1e-9f55-8d3c0b6f9a30")


def _status(base: str, sub: Subscription, kind: str, status: str, events: list[dict]) -> dict:
    params = [
        {"name": "subscription", "valueReference": {"reference": f"{base}/Subscription/{sub.id}"}},
        {"name": "topic", "valueCanonical": sub.topic or f"{sub.resource_type}?"},
        {"name": "status", "valueCode": status},
        {"name": "type", "valueCode": kind},
        *events,
    ]
    status = {"resourceType": "Parameters", "parameter": params}
    return {"fullUrl": f"urn:uuid:{uuid.uuid4()}", "resource": status,
            "request": {"method": "GET", "url": f"{base}/Subscription/{sub.id}/$status"},
            "response": {"status": "200"}}


def bundle(base: str, sub: Subscription, kind: str, status: str, entries: list[dict] | None = None,
           event_id: str | None = None, events: list[dict] | None = None) -> bytes:
    bundle_id = uuid.uuid5(NAMESPACE, f"{sub.session}/{sub.id}/{event_id}") if event_id else uuid.uuid4()
    body = {"resourceType": "Bundle", "id": str(bundle_id), "type": "history", "timestamp": utc_now(),
            "entry": [_status(base, sub, kind, status, events or []), *(entries or [])]}
    return orjson.dumps(body)


def handshake(base: str, sub: Subscription) -> bytes:
    return bundle(base, sub, "handshake", "requested")


def heartbeat(base: str, sub: Subscription) -> bytes:
    return bundle(base, sub, "heartbeat", "active")


def event(base: str, sub: Subscription, event_id: str, resource_type: str, id: str, raw: bytes | None,
          action: str) -> bytes:
    """An event-notification for one change (raw: the focus as stored, for full-resource)."""
    focus = f"{base}/{resource_type}/{id}"
    detail = {"name": "notification-event", "part": [
        {"name": "event-number", "valueString": event_id},
        {"name": "timestamp", "valueInstant": utc_now()},
        *([{"name": "focus", "valueReference": {"reference": focus}}] if sub.content != "empty" else []),
    ]}
    entries: list[dict] = []
    if sub.content != "empty":
        entry: dict = {"fullUrl": focus, "request": {"method": "POST" if action == "created" else "PUT",
                                                     "url": f"{resource_type}/{id}"},
                       "response": {"status": "201" if action == "created" else "200"}}
        if sub.content == "full-resource" and raw is not None:
            entry["resource"] = orjson.loads(raw)
        entries.append(entry)
    return bundle(base, sub, "event-notification", "active", entries, event_id, [detail])
