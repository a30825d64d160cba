"""`Subscription/{id}/$status` (Subscriptions Backport IG, operation backport-subscription-status): what a
receiver asks when it sees a gap in the event numbers, or wonders why nothing arrives.

The answer is a `searchset` Bundle with one `Parameters` subscription status (notify.py): type
`query-status`, the stored status and error, and `events-since-subscription-start` — the last number the
delivering consumer gave (numbering.py). The Subscription is read in the caller's context, so a session's
base answers only its own Subscriptions, as a read would.
"""

from __future__ import annotations

import uuid

import orjson

from events.envelope import utc_now
from services.fhir_api.http.outcome import Call, Outcome
from services.fhir_api.subscriptions.notify import status_parameters

DEFINITION = "http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-status"


def _topic(doc: dict) -> str:
    """The topic a notification names: the topic-based form's canonical, else the criteria's type."""
    criteria = str(doc.get("criteria", ""))
    return criteria if criteria.startswith(("http://", "https://")) else criteria.partition("?")[0] + "?"


def subscription_status(call: Call, id: str) -> Outcome:
    """The status of Subscription `id` (404 / 410 as a read answers)."""
    stored = call.store.read(call.ctx, "Subscription", id)
    doc = orjson.loads(stored.raw)
    if call.event_numbers is None:
        raise RuntimeError("the app was built without the Subscriptions' event numbers (app.py create_app)")
    since_start = call.event_numbers.since_start(call.ctx.session_key, id)
    status = status_parameters(call.base, id, _topic(doc), "query-status", str(doc.get("status", "")),
                               since_start, error=doc.get("error"))
    bundle = {"resourceType": "Bundle", "id": str(uuid.uuid4()), "type": "searchset", "timestamp": utc_now(),
              "total": 1, "link": [{"relation": "self", "url": f"{call.base}/Subscription/{id}/$status"}],
              "entry": [{"fullUrl": f"urn:uuid:{uuid.uuid4()}", "resource": status,
                         "search": {"mode": "match"}}]}
    return Outcome(200, body=orjson.dumps(bundle))
