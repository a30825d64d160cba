"""The delivering consumer: a consumer group on `rounds.fhir-changes` that notifies the Subscriptions a change
matches (`rounds subscriptions deliver`).

For each change of a base (`subject`: the session, none for the shared record) — a write, or a resource a
session's clock moved past (`rounds.fhir.resource.known`, `rounds feed`) — every live Subscription stored on
that same base whose criteria type fits is asked, with the server's own search code, whether the resource
matches: its criteria plus `_id`, searched in the base's context at that moment (a session's view at its
clock). A match is POSTed to the rest-hook endpoint (notify.py).

At least once for an endpoint that answers: the group's position moves past an event only after every
matching subscription has taken it (2xx) or given up; a failed POST is retried with backoff for at most
`retry_s` (the partition waits, so one session's notifications stay in order), the Subscription's status
becomes `error` meanwhile and `active` again once it takes one. A kill at any point redelivers from the last
committed position, and a receiver deduplicates on the notification's id (`X-Rounds-Event-Id`).

One tenant never stops the rest: whatever one endpoint does (a malformed URL, headers the client cannot
encode, a timeout, 5xx, a handshake accepted and then failures) is contained to its Subscription. After
`retry_s` of failures it is `error`, that notification is dropped for it alone, and it rests (the rest
doubling, up to REST_MAX_S) before one attempt at a later event, so a dead endpoint delays the others of
its partition by its own retry budget once, not per event. Setting a failing Subscription `off` releases it
at once. The error text is the same for every kind of failure (refused, 404, timeout): it is readable by
the client and must not tell it what the server can reach. Endpoints and headers are the operator's
(endpoints.py), checked before every POST.

A `requested` Subscription gets the handshake when its write is consumed: 2xx activates it
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
from services.fhir_api.subscriptions.endpoints import EndpointPolicy
from services.fhir_api.subscriptions.lookup import live_subscriptions
from services.fhir_api.subscriptions.subscription import SINCE, BadSubscription, Subscription, parse
from services.fhir_api.subscriptions.websocket import WebSocketHub

log = logging.getLogger(__name__)
GROUP = "rounds-subscriptions"
REST_MAX_S = 300.0  # longest a given-up Subscription waits before its next attempt
FAILED = "the endpoint did not accept the notification"  # one text for every failure: no reachability oracle
NOTIFIED = frozenset({FhirResourceChange.CREATED, FhirResourceChange.UPDATED, FhirResourceKnown.TYPE})


class Stopped(Exception):
    """Asked to stop while retrying: the event stays uncommitted (redelivered on restart)."""


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class Delivery:
    def __init__(self, store: ResourceStore, bus: Bus, root: str, *, group: str = GROUP,
                 client: httpx.Client | None = None, backoff: Backoff | None = None,
                 stop: threading.Event | None = None, topic: str = FHIR_CHANGES,
                 websockets: WebSocketHub | None = None, policy: EndpointPolicy | None = None,
                 retry_s: float = 10.0) -> None:
        self.store, self.bus, self.root, self.group = store, bus, root.rstrip("/"), group
        self.websockets = websockets
        self.topic = topic
        self.client = client or httpx.Client(timeout=5)
        self.policy = policy or EndpointPolicy.of()
        self.retry_s = retry_s
        self.backoff = backoff or Backoff(0.2, 2.0, 5.0)
        self.stop = stop or threading.Event()
        self.delivered = 0
        self._last_sent: dict[tuple[str, str], float] = {}
        self._known: dict[tuple[str, str], Subscription] = {}  # for heartbeats
        self._resting: dict[tuple[str, str], tuple[float, float]] = {}  # given up: (until, rest), monotonic

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
            if sub.status == "error" and not sub.since:
                continue  # its handshake never succeeded: nothing to retry
            try:
                self._notify(ctx, session, sub, event, rtype, id)
            except Stopped:
                raise
            except Exception:  # noqa: BLE001 - one Subscription's fault never stops the others
                log.exception("subscription %s: notification failed", sub.id)
                self._set_status(ctx, sub.id, "error", FAILED)

    def _notify(self, ctx: Context, session: str, sub: Subscription, event, rtype: str, id: str) -> None:
        try:
            found = self._search(ctx, sub, [("_id", id)], count=1)
        except StoreError as exc:  # criteria changed since the handshake checked them
            self._set_status(ctx, sub.id, "error", f"criteria: {exc}")
            return
        if not found.matches:
            return
        raw = found.matches[0].raw if sub.content == "full-resource" else None
        action = "created" if event.type.endswith(("created", "known")) else "updated"
        body = notify.event(self._base(session), sub, event.id, rtype, id, raw, action)
        if sub.channel == "websocket":
            if self.websockets is not None:
                self.websockets.notify(sub.id, body)  # best effort (websocket.py)
            return
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
            self.policy.check(sub)
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
        if not self._post(sub, notify.handshake(self._base(session), sub), None):
            self._set_status(ctx, id, "error", f"handshake: {FAILED}")
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
    def _post(self, sub: Subscription, body: bytes, event_id: str | None) -> bool:
        """One POST under the operator's policy; True on 2xx. Whatever goes wrong (a refused policy, an
        unencodable header, a malformed URL, a timeout, any status) is False: logged here in full, told
        to the client only as FAILED."""
        headers = {"Content-Type": "application/fhir+json", **dict(sub.headers)}
        if event_id:
            headers["X-Rounds-Event-Id"] = event_id
        self._last_sent[sub.key] = time.monotonic()  # a failed heartbeat waits its period too
        self._known[sub.key] = sub
        try:
            self.policy.check(sub)
            answer = self.client.post(sub.endpoint, content=body, headers=headers)
        except Exception as exc:  # noqa: BLE001 - any failure of one endpoint is that Subscription's
            log.warning("subscription %s: POST failed: %s: %s", sub.id, type(exc).__name__, exc)
            return False
        if not answer.is_success:
            log.warning("subscription %s: the endpoint answered HTTP %s", sub.id, answer.status_code)
        return answer.is_success

    def _deliver(self, ctx: Context, sub: Subscription, body: bytes, event_id: str) -> None:
        try:
            self.policy.check(sub)  # the endpoint or headers may have changed since the handshake
        except BadSubscription as exc:
            self._set_status(ctx, sub.id, "error", str(exc))
            return
        now = time.monotonic()
        until, rest = self._resting.get(sub.key, (0.0, 0.0))
        if now < until:
            return  # given up and resting: this notification is dropped for this Subscription alone
        deadline = now + (0.0 if rest else self.retry_s)  # after a rest: one attempt
        failed = False
        while True:
            if self._post(sub, body, event_id):
                self.delivered += 1
                self.backoff.reset()
                self._resting.pop(sub.key, None)
                if failed or sub.status == "error":
                    self._set_status(ctx, sub.id, "active", None)
                return
            if not failed:
                self._set_status(ctx, sub.id, "error", FAILED)
                failed = True
            wait = self.backoff.delay()
            if time.monotonic() + wait > deadline:
                self.backoff.reset()
                rest = min(REST_MAX_S, rest * 2 if rest else self.retry_s)
                self._resting[sub.key] = (time.monotonic() + rest, rest)
                log.warning("subscription %s: given up on event %s, resting %.0f s", sub.id, event_id, rest)
                return
            if self.stop.wait(wait):
                raise Stopped
            current = next((s for s in self.subscriptions(ctx, sub.session) if s.id == sub.id), None)
            if current is None:
                return  # set off or deleted: released

    def heartbeats(self) -> None:
        """A heartbeat to each known active Subscription with a period and nothing sent for that long."""
        now = time.monotonic()
        for key, sub in list(self._known.items()):
            if now < self._resting.get(key, (0.0, 0.0))[0]:
                continue
            if sub.heartbeat_s and now - self._last_sent.get(key, now) >= sub.heartbeat_s:
                self._post(sub, notify.heartbeat(self._base(sub.session), sub), None)

