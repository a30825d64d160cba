"""The live Subscriptions stored on one base, read through the store's own search (delivery and the feed)."""

from __future__ import annotations

import orjson

from services.fhir_api.store.interface import Context, ResourceStore, SearchRequest
from services.fhir_api.subscriptions.subscription import LIVE, BadSubscription, Subscription, parse

MAX = 1000  # Subscriptions per base considered


def live_subscriptions(store: ResourceStore, ctx: Context, session: str) -> list[Subscription]:
    """Those stored on this base (`session`, '' for the shared record: a session also sees the shared
    record's, which are not its own), with a status delivery acts on and a deliverable form."""
    found = store.search(ctx, SearchRequest("Subscription", [], count=MAX))
    subs = []
    for stored in found.matches:
        if stored.session != session:
            continue
        doc = orjson.loads(stored.raw)
        if doc.get("status") not in LIVE:
            continue
        try:
            subs.append(parse(stored, doc))
        except BadSubscription:
            continue  # the handshake set (or will set) its error
    return subs
