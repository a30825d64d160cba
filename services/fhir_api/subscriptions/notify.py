"""Notification bundles in the Subscriptions R5 Backport IG's R4 shape: a `history` Bundle whose first entry
is a `Parameters` subscription status (type handshake | heartbeat | event-notification | query-status), then,
for an event, the focus resource (full-resource), its URL only (id-only) or nothing (empty).

Every status carries `events-since-subscription-start`, and an event its `event-number` (numbering.py:
1, 2, ... per Subscription, strings as the IG's R4 profile has them, R4 having no integer64), so a receiver
detects a gap. A notification's `Bundle.id` is derived from the subscription and the change event's id,
so a redelivery (at least once) is the same bundle with the same number: receivers deduplicate on it (also
sent as `X-Rounds-Event-Id`). `$status` (status.py) answers the same status in a `searchset`.
"""

from __future__ import annotations

import uuid

import orjson

from events.envelope import utc_now
from services.fhir_api.subscriptions.subscription import Subscription

NAMESPACE = uuid.UUID("6f1c1a44-3f0a-4c1e-9f55-8d3c0b6f9a30")


def status_parameters(base: str, id: str, topic: str, kind: str, status: str, since_start: int,
                      events: list[dict] | None = None, error: str | None = None) -> dict:
    """The IG's subscription status (R4: a `Parameters` of profile backport-subscription-status-r4) of
    Subscription `id`; `topic` its canonical (the topic-based form) or its criteria's `Type?`."""
    params = [
        {"name": "subscription", "valueReference": {"reference": f"{base}/Subscription/{id}"}},
        {"name": "topic", "valueCanonical": topic},
        {"name": "status", "valueCode": status},
        {"name": "type", "valueCode": kind},
        {"name": "events-since-subscription-start", "valueString": str(since_start)},
        *(events or []),
        *([{"name": "error", "valueCodeableConcept": {"text": error}}] if error else []),
    ]
    return {"resourceType": "Parameters", "parameter": params}


def _status(base: str, sub: Subscription, kind: str, status: str, since_start: int, events: list[dict]
            ) -> dict:
    return {"fullUrl": f"urn:uuid:{uuid.uuid4()}",
            "resource": status_parameters(base, sub.id, sub.topic or f"{sub.resource_type}?", kind, status,
                                          since_start, events),
            "request": {"method": "GET", "url": f"{base}/Subscription/{sub.id}/$status"},
            "response": {"status": "200"}}


def bundle(base: str, sub: Subscription, kind: str, status: str, since_start: int,
           entries: list[dict] | None = None, event_id: str | None = None, events: list[dict] | None = None
           ) -> bytes:
    bundle_id = uuid.uuid5(NAMESPACE, f"{sub.session}/{sub.id}/{event_id}") if event_id else uuid.uuid4()
    body = {"resourceType": "Bundle", "id": str(bundle_id), "type": "history", "timestamp": utc_now(),
            "entry": [_status(base, sub, kind, status, since_start, events or []), *(entries or [])]}
    return orjson.dumps(body)


def handshake(base: str, sub: Subscription, since_start: int) -> bytes:
    return bundle(base, sub, "handshake", "requested", since_start)


def heartbeat(base: str, sub: Subscription, since_start: int) -> bytes:
    return bundle(base, sub, "heartbeat", "active", since_start)


def event(base: str, sub: Subscription, event_id: str, number: int, resource_type: str, id: str,
          raw: bytes | None, action: str) -> bytes:
    """An event-notification for one change (`number`: its event-number; raw: the focus as stored, for
    full-resource). The status's events-since-subscription-start is the number: the receiver has seen
    that many once it has this one."""
    focus = f"{base}/{resource_type}/{id}"
    detail = {"name": "notification-event", "part": [
        {"name": "event-number", "valueString": str(number)},
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
    return bundle(base, sub, "event-notification", "active", number, entries, event_id, [detail])
