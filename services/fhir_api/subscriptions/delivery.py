"""The delivering consumer: a consumer group on `rounds.fhir-changes` that notifies the Subscriptions a change
matches (`rounds subscriptions deliver`).

For each change of a base (`subject`: the session, none for the shared record) — a write, or a resource a
session's clock moved past (`rounds.fhir.resource.known`, `rounds feed`) — every live Subscription stored on
that same base whose criteria type fits is asked, with the server's own search code, whether the resource
matches: its criteria plus `_id`, searched in the base's context at that moment (a session's view at its
clock). A match is POSTed to the rest-hook endpoint (notify.py).

At least once for an endpoint that answers: a matched notification goes to its Subscription's own lane
(lanes.py), which POSTs, retries with backoff for at most `retry_s`, then gives up on it for that
Subscription alone and rests it; the partition moves on at once. The group's position moves past an event
only once no lane still holds a notification of it, so a kill redelivers from there, and a receiver
deduplicates on the notification's id (`X-Rounds-Event-Id`). A lane sends its notifications in the order the
partition matched them (a session's changes are keyed by the session: one partition, in order).

One tenant never stops or delays the rest: whatever one endpoint does (a malformed URL, headers the client
cannot encode, a timeout, 5xx, a handshake accepted and then failures) happens on its own lane. The
partition's own path only matches changes against criteria, sends handshakes (one POST each, bounded by the
client's timeout) and hands notifications to lanes. Setting a failing Subscription `off` releases its lane.
The error text is the same for every kind of failure (refused, 404, timeout): it is readable by the client
and must not tell it what the server can reach. Endpoints and headers are the operator's (endpoints.py),
refused at the write and checked again before every POST.

A `requested` Subscription gets the handshake when its write is consumed: 2xx activates it
(changes notified from that write on), anything else sets `error`. `websocket` Subscriptions are served best
effort by the consumer's own socket (websocket.py): active at once, nothing kept for unbound clients.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

import httpx
import orjson

from events.bus import Bus, Record, TopicPartition
from events.payloads import FhirResourceChange, FhirResourceKnown
from events.payloads.outcome import SHARED_RECORD
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
from services.fhir_api.subscriptions.lanes import Lanes, Notification
from services.fhir_api.subscriptions.lookup import live_subscriptions
from services.fhir_api.subscriptions.numbering import EventNumbers
from services.fhir_api.subscriptions.subscription import SINCE, BadSubscription, Subscription, parse
from services.fhir_api.subscriptions.websocket import WebSocketHub

log = logging.getLogger(__name__)
GROUP = "rounds-subscriptions"
FAILED = "the endpoint did not accept the notification"  # one text for every failure: no reachability oracle
T = TypeVar("T")
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
                 retry_s: float = 10.0, numbers: EventNumbers | None = None) -> None:
        self.store, self.bus, self.root, self.group = store, bus, root.rstrip("/"), group
        # the event numbers live next to the record (the SQL store's database)
        self.numbers = numbers or EventNumbers(store.engine)  # type: ignore[attr-defined]
        self.websockets = websockets
        self.topic = topic
        self.client = client or httpx.Client(timeout=5)
        self.policy = policy or EndpointPolicy.of()
        self.retry_s = retry_s
        self.backoff = backoff or Backoff(0.2, 2.0, 5.0)
        self.stop = stop or threading.Event()
        self._last_sent: dict[tuple[str, str], float] = {}
        self._known: dict[tuple[str, str], Subscription] = {}  # for heartbeats
        self.lanes = Lanes(lambda sub, n: self._post(sub, n.body, n.event_id), self._lane_status,
                           self._current, retry_s=retry_s, backoff=self.backoff, stop=self.stop,
                           failed_text=FAILED)
        self._position: tuple[TopicPartition, int] | None = None  # of the record being processed
        self._processed: dict[TopicPartition, int] = {}  # next offset per partition, once processed
        self._committed: dict[TopicPartition, int] = {}

    @property
    def delivered(self) -> int:
        return self.lanes.delivered

    # -- the loop --------------------------------------------------------------------------------------
    def run(self, idle_exit_s: float | None = None) -> None:
        consumer = self.bus.consumer(self.group, [self.topic])
        idle_since = time.monotonic()
        try:
            while not self.stop.is_set():
                records = consumer.poll(timeout_s=0.5)
                for record in records:
                    self.process(record)
                    self._processed[TopicPartition(record.topic, record.partition)] = record.offset + 1
                self._commit(consumer)
                if records or not self.lanes.idle():
                    idle_since = time.monotonic()
                elif idle_exit_s is not None and time.monotonic() - idle_since > idle_exit_s:
                    return
                self.heartbeats()
        except Stopped:
            return
        finally:
            consumer.close()

    def _commit(self, consumer) -> None:
        """Each partition's position: past what was processed, but not past a notification a lane holds."""
        waiting = self.lanes.oldest_waiting()
        safe = {tp: min(done, waiting.get(tp, done)) for tp, done in self._processed.items()}
        changed = {tp: offset for tp, offset in safe.items() if self._committed.get(tp) != offset}
        if not changed:
            return
        try:
            consumer.commit(changed)
            self._committed.update(changed)
        except Exception as exc:  # noqa: BLE001 - a lost partition: redelivered, never lost
            log.warning("commit of %s failed (%s); they will be delivered again", changed, exc)
            for tp in changed:
                self._processed.pop(tp, None)
            return
        for tp, offset in changed.items():  # the numbers of events the group will never match again
            try:
                self.numbers.prune(tp.partition, offset)
            except Exception as exc:  # noqa: BLE001 - kept a while longer; the next commit prunes them
                log.warning("pruning the event numbers of %s failed (%s)", tp, exc)

    def process(self, record: Record) -> None:
        self._position = (TopicPartition(record.topic, record.partition), record.offset)
        event = record.event
        if event is not None and event.type == FhirResourceChange.DELETED:
            data = event.data or {}
            if data.get("resourceType") == "Subscription" and data.get("id"):
                self.numbers.forget(event.subject or SHARED_RECORD, str(data["id"]))  # nothing asks any more
            return
        if event is None or event.type not in NOTIFIED:
            return
        session, data = event.subject or SHARED_RECORD, event.data or {}
        rtype, id = data.get("resourceType"), data.get("id")
        ctx = self._context(session)
        if ctx is None or not rtype or not id:
            return  # the session is gone
        if rtype == "Subscription":
            self._on_subscription(ctx, session, id, event.time or "")
            return
        searched: dict[tuple, SearchResult] = {}  # Subscriptions with the same criteria share one search
        matched: list[tuple[Subscription, bytes | None]] = []
        for sub in self.subscriptions(ctx, session):
            if sub.resource_type != rtype or sub.status not in ("active", "error"):
                continue
            if sub.since and event.time and _instant(event.time) < _instant(sub.since):
                continue
            if sub.status == "error" and not sub.since:
                continue  # its handshake never succeeded: nothing to retry
            matched += self._guarded(ctx, sub, self._match, ctx, sub, id, searched) or []
        if not matched:
            return
        # one transaction numbers the event for all its Subscriptions: kept, so a redelivery has the same
        numbers = self.numbers.number_all(session, [sub.id for sub, _ in matched], event.id,
                                          (record.partition, record.offset))
        action = "created" if event.type.endswith(("created", "known")) else "updated"
        for sub, raw in matched:
            body = partial(notify.event, self._base(session), sub, event.id, numbers[sub.id], rtype, id, raw,
                           action)
            self._guarded(ctx, sub, self._send, ctx, sub, body, event.id)

    def _guarded(self, ctx: Context, sub: Subscription, step: Callable[..., T], *args: Any) -> T | None:
        """`step(*args)` for one Subscription: its fault never stops the others (it sets its `error`)."""
        try:
            return step(*args)
        except Stopped:
            raise
        except Exception:  # noqa: BLE001 - one Subscription's fault never stops the others
            log.exception("subscription %s: notification failed", sub.id)
            self._set_status(ctx, sub.id, "error", FAILED)
            return None

    def _match(self, ctx: Context, sub: Subscription, id: str, searched: dict[tuple, SearchResult]
               ) -> list[tuple[Subscription, bytes | None]]:
        """[(sub, the focus as stored for full-resource)] when the resource matches its criteria, else []."""
        try:
            if sub.params not in searched:
                searched[sub.params] = self._search(ctx, sub, [("_id", id)], count=1)
            found = searched[sub.params]
        except StoreError as exc:  # criteria changed since the handshake checked them
            self._set_status(ctx, sub.id, "error", f"criteria: {exc}")
            return []
        if not found.matches:
            return []
        return [(sub, found.matches[0].raw if sub.content == "full-resource" else None)]

    def _send(self, ctx: Context, sub: Subscription, build: Callable[[], bytes], event_id: str) -> None:
        body = build()
        if sub.channel == "websocket":
            if self.websockets is not None:
                self.websockets.notify(sub.id, body)  # best effort (websocket.py)
            return
        self._deliver(ctx, sub, body, event_id)

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
        shake = notify.handshake(self._base(session), sub, self.numbers.since_start(session, sub.id))
        if not self._post(sub, shake, None):
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
        self.lanes.submit(sub, Notification(body, event_id, self._position))

    def _lane_status(self, sub: Subscription, status: str, error: str | None) -> None:
        ctx = self._context(sub.session)
        if ctx is not None:
            self._set_status(ctx, sub.id, status, error)

    def _current(self, sub: Subscription) -> Subscription | None:
        ctx = self._context(sub.session)
        live = self.subscriptions(ctx, sub.session) if ctx is not None else []
        return next((s for s in live if s.id == sub.id), None)

    def heartbeats(self) -> None:
        """A heartbeat, on its lane, to each known Subscription with a period, nothing sent for that long
        and nothing waiting (not while it rests)."""
        now = time.monotonic()
        for key, sub in list(self._known.items()):
            if self.lanes.resting(sub) or self.lanes.busy(sub):
                continue
            if sub.heartbeat_s and now - self._last_sent.get(key, now) >= sub.heartbeat_s:
                self._last_sent[key] = now
                body = notify.heartbeat(self._base(sub.session), sub, self.numbers.since_start(*sub.key))
                self.lanes.submit(sub, Notification(body, None))

