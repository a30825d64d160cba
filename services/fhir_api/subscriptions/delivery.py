"""The delivering consumer: a consumer group on `rounds.fhir-changes` that notifies the Subscriptions a change
matches (`rounds subscriptions deliver`).

For each change of a base (`subject`: the session, none for the shared record) — a write, or a resource a
session's clock moved past (`rounds.fhir.resource.known`, `rounds feed`) — every live Subscription stored on
that same base whose criteria type fits is asked, with the server's own search code, whether the resource
matches: its criteria plus `_id`, searched in the base's context at that moment (a session's view at its
clock). A match is POSTed to the rest-hook endpoint (notify.py).

At least once: the group's position moves past an event only after every matching subscription has taken it
(2xx); a failed POST is retried with backoff (the partition waits, so one session's notifications stay in
order), the Subscription's status becomes `error` with the reason meanwhile and `active` again once it takes
one. A kill at any point redelivers from the last committed position: nothing is lost, and a receiver
deduplicates on the notification's id (`X-Rounds-Event-Id`). Setting a failing Subscription `off` releases
the partition. A `requested` Subscription gets the handshake when its write is consumed: 2xx activates it
(changes notified from that write on), anything else sets `error`. `websocket` Subscriptions are served best
effort by the consumer's own socket (websocket.py): active at once, nothing kept for unbound clients.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime

import httpx
import orjson

from events.bus import Bus, Record, TopicPartition
from events.payloads import FhirResourceChange, FhirResourceKnown
from events.projections.retry import Backoff
from events.topics import FHIR_CHANGES
from services.fhir_api.store.interface import (
    Context,
    ResourceStore,
    SearchRequest,
    SearchResult,
    StoreError,
)
from services.fhir_api.subscriptions import notify
from services.fhir_api.subscriptions.lookup import live_subscriptions
from services.fhir_api.subscriptions.subscription import SINCE, BadSubscription, Subscription, parse
from services.fhir_api.subscriptions.websocket import WebSocketHub

log = logging.getLogger(__name__)
GROUP = "rounds-subscriptions"
NOTIFIED = frozenset({FhirResourceChange.CREATED, FhirResourceChange.UPDATED, FhirResourceKnown.TYPE})


class Stopped(Exception):
    """Asked to stop while retrying: the event stays uncommitted (redelivered on restart)."""


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class Delivery:
    def __init__(self, store: ResourceStore, bus: Bus, root: str, *, group: str = GROUP,
                 client: httpx.Client | None = None, backoff: Backoff | None = None,
                 stop: threading.Event | None = None, topic: str = FHIR_CHANGES,
                 websockets: WebSocketHub | None = None) -> None:
        self.store, self.bus, self.root, self.group = store, bus, root.rstrip("/"), group
        self.websockets = websockets
        self.topic = topic
        self.client = client or httpx.Client(timeout=10)
        self.backoff = backoff or Backoff(0.2, 2.0, 5.0)
        self.stop = stop or threading.Event()
        self.delivered = 0
        self._last_sent: dict[tuple[str, str], float] = {}
        self._known: dict[tuple[str, str], Subscription] = {}  # for heartbeats

    # -- the loop --------------------------------------------------------------------------------------
    def run(self, idle_exit_s: float | None = None) -> None:
        consumer = self.bus.consumer(self.group, [self.topic])
        idle_since = time.monotonic()
        try:
            while not self.stop.is_set():
                records = consumer.poll(timeout_s=0.5)
                for record in records:
                    self.process(record)
                    self._commit(consumer, record)
                if records:
                    idle_since = time.monotonic()
                elif idle_exit_s is not None and time.monotonic() - idle_since > idle_exit_s:
                    return
                self.heartbeats()
        except Stopped:
            return
        finally:
            consumer.close()

    @staticmethod
    def _commit(consumer, record: Record) -> None:
        try:
            consumer.commit({TopicPartition(record.topic, record.partition): record.offset + 1})
        except Exception as exc:  # noqa: BLE001 - a lost partition (a long retry): redelivered, never lost
            log.warning("commit of %s/%s@%s failed (%s); it will be delivered again", record.topic,
                        record.partition, record.offset, exc)

    def process(self, record: Record) -> None:
        event = record.event
        if event is None or event.type not in NOTIFIED:
            return
        session, data = event.subject or "", event.data or {}
        rtype, id = data.get("resourceType"), data.get("id")
        ctx = self._context(session)
        if ctx is None or not rtype or not id:
            return  # the session is gone
        if rtype == "Subscription":
            self._on_subscription(ctx, session, id, event.time or "")
            return
        for sub in self.subscriptions(ctx, session):
            if sub.resource_type != rtype or sub.status not in ("active", "error"):
                continue
            if sub.since and event.time and _instant(event.time) < _instant(sub.since):
                continue
            try:
                found = self._search(ctx, sub, [("_id", id)], count=1)
            except StoreError as exc:  # criteria changed since the handshake checked them
                self._set_status(ctx, sub.id, "error", f"criteria: {exc}")
                continue
            if found.matches:
                raw = found.matches[0].raw if sub.content == "full-resource" else None
                action = "created" if event.type.endswith(("created", "known")) else "updated"
                body = notify.event(self._base(session), sub, event.id, rtype, id, raw, action)
                if sub.channel == "websocket":
                    if self.websockets is not None:
                        self.websockets.notify(sub.id, body)  # best effort (websocket.py)
                    continue
                self._deliver(ctx, sub, body, event.id)

    # -- subscriptions ---------------------------------------------------------------------------------
    def _context(self, session: str) -> Context | None:
        return self.store.get_session(session) if session else Context()

    def _base(self, session: str) -> str:
        return f"{self.root}/sessions/{session}/fhir" if session else f"{self.root}/fhir"

    def subscriptions(self, ctx: Context, session: str) -> list[Subscription]:
        return live_subscriptions(self.store, ctx, session)

    def _on_subscription(self, ctx: Context, session: str, id: str, event_time: str) -> None:
        try:
            stored = self.store.read(ctx, "Subscription", id)
        except StoreError:
            return  # deleted since
        doc = orjson.loads(stored.raw)
        if stored.session != session or doc.get("status") != "requested":
            return
        try:
            sub = parse(stored, doc)
        except BadSubscription as exc:
            self._set_status(ctx, id, "error", str(exc))
            return
        try:
            self._search(ctx, sub, [], count=0)
        except StoreError as exc:
            self._set_status(ctx, id, "error", f"criteria: {exc}")
            return
        if sub.channel == "websocket":
            if self.websockets is None:
                self._set_status(ctx, id, "error", "this consumer serves no websocket (--ws-port)")
            else:
                self._set_status(ctx, id, "active", None, since=event_time)
            return
        try:
            answer = self._post(sub, notify.handshake(self._base(session), sub), None)
        except httpx.HTTPError as exc:
            self._set_status(ctx, id, "error", f"handshake failed: {exc}")
            return
        if not answer.is_success:
            self._set_status(ctx, id, "error", f"handshake answered HTTP {answer.status_code}")
            return
        self._set_status(ctx, id, "active", None, since=event_time)

    def _search(self, ctx: Context, sub: Subscription, more: list[tuple[str, str]], count: int
                ) -> SearchResult:
        """The Subscription's criteria (plus `more`) searched as the server searches with `Prefer:
        handling=strict`: a parameter it does not know is an error, never silently dropped (which would
        match every resource of the type)."""
        return self.store.search(ctx, SearchRequest(sub.resource_type, [*sub.params, *more], count=count,
                                                    strict=True))

    def _set_status(self, ctx: Context, id: str, status: str, error: str | None, since: str | None = None
                    ) -> None:
        try:
            doc = orjson.loads(self.store.read(ctx, "Subscription", id).raw)
        except StoreError:
            return
        if doc.get("status") == status and doc.get("error") == error and since is None:
            return
        doc["status"] = status
        doc.pop("error", None)
        if error:
            doc["error"] = error[:500]
        if since:
            doc["extension"] = [e for e in doc.get("extension", []) if e.get("url") != SINCE]
            doc["extension"].append({"url": SINCE, "valueInstant": since})
        doc.pop("meta", None)
        self.store.update(ctx, "Subscription", id, doc)

    # -- delivery --------------------------------------------------------------------------------------
    def _post(self, sub: Subscription, body: bytes, event_id: str | None) -> httpx.Response:
        headers = {"Content-Type": "application/fhir+json", **dict(sub.headers)}
        if event_id:
            headers["X-Rounds-Event-Id"] = event_id
        answer = self.client.post(sub.endpoint, content=body, headers=headers)
        self._last_sent[sub.key] = time.monotonic()
        self._known[sub.key] = sub
        return answer

    def _deliver(self, ctx: Context, sub: Subscription, body: bytes, event_id: str) -> None:
        failed = False
        while True:
            try:
                answer = self._post(sub, body, event_id)
                reason = None if answer.is_success else f"the endpoint answered HTTP {answer.status_code}"
            except httpx.HTTPError as exc:
                reason = f"delivery failed: {type(exc).__name__}: {exc}"
            if reason is None:
                self.delivered += 1
                self.backoff.reset()
                if failed or sub.status == "error":
                    self._set_status(ctx, sub.id, "active", None)
                return
            if not failed:
                self._set_status(ctx, sub.id, "error", reason)
                failed = True
            log.warning("subscription %s: %s (retrying)", sub.id, reason)
            if self.stop.wait(self.backoff.delay()):
                raise Stopped
            current = next((s for s in self.subscriptions(ctx, sub.session) if s.id == sub.id), None)
            if current is None:
                return  # set off or deleted: released

    def heartbeats(self) -> None:
        """A heartbeat to each known active Subscription with a period and nothing sent for that long."""
        now = time.monotonic()
        for key, sub in list(self._known.items()):
            if sub.heartbeat_s and now - self._last_sent.get(key, now) >= sub.heartbeat_s:
                try:
                    self._post(sub, notify.heartbeat(self._base(sub.session), sub), None)
                except httpx.HTTPError as exc:
                    log.warning("subscription %s: heartbeat failed: %s", sub.id, exc)

