"""One delivery lane per rest-hook Subscription: its notifications are POSTed, retried and given up on its own
thread, off the partition's path, so no endpoint holds back another's deliveries — not another tenant's, not
its own tenant's healthy Subscriptions.

A lane takes its Subscription's notifications in the order the partition matched them (a session's changes
are on one partition, in order) and sends them one after the other: a failed POST is retried with backoff
until it has failed for `retry_s`; then that notification is dropped for this Subscription alone, which rests
(the rest doubling from `retry_s` up to REST_MAX_S) and drops what arrives meanwhile; after the rest, one
attempt per notification until one succeeds. At most QUEUE_MAX notifications wait in a lane (beyond, the
oldest is dropped): a dead endpoint's backlog stays bounded.

At least once survives a kill: each waiting notification keeps the log position of its event, and the
consumer commits a partition no further than the oldest notification still waiting in any lane
(`oldest_waiting`); a restart redelivers from there (receivers deduplicate on the notification's id).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from events.bus import TopicPartition
from events.projections.retry import Backoff
from services.fhir_api.subscriptions.subscription import Subscription

log = logging.getLogger(__name__)
REST_MAX_S = 300.0  # longest a given-up Subscription waits before its next attempt
QUEUE_MAX = 1000  # notifications waiting in one lane at most


@dataclass(frozen=True)
class Notification:
    body: bytes
    event_id: str | None  # None: a heartbeat
    position: tuple[TopicPartition, int] | None = None  # the event's log position (None: a heartbeat)


@dataclass
class _Lane:
    sub: Subscription
    waiting: deque[Notification]
    backoff: Backoff
    resting_until: float = 0.0
    rest: float = 0.0
    failing: bool = False
    thread: threading.Thread | None = None


class Lanes:
    """The lanes of one consumer process. `post` sends one notification (True on 2xx), `set_status` records a
    Subscription's `active` / `error`, `current` re-reads a Subscription (None once it is off or deleted)."""

    def __init__(self, post: Callable[[Subscription, Notification], bool],
                 set_status: Callable[[Subscription, str, str | None], None],
                 current: Callable[[Subscription], Subscription | None], *, retry_s: float, backoff: Backoff,
                 stop: threading.Event, failed_text: str) -> None:
        self.post, self.set_status, self.current = post, set_status, current
        self.retry_s, self.backoff, self.stop, self.failed_text = retry_s, backoff, stop, failed_text
        self.delivered = 0
        self._lanes: dict[tuple[str, str], _Lane] = {}
        self._lock = threading.Lock()

    def submit(self, sub: Subscription, notification: Notification) -> None:
        """Queue `notification` on the Subscription's lane (dropped while it rests after giving up)."""
        with self._lock:
            lane = self._lanes.get(sub.key)
            if lane is None:
                lane = self._lanes[sub.key] = _Lane(sub, deque(), Backoff(
                    self.backoff.initial_s, self.backoff.factor, self.backoff.max_s))
            lane.sub = sub  # the latest read (endpoint, headers, status)
            if time.monotonic() < lane.resting_until:
                return  # given up and resting: dropped for this Subscription alone
            if len(lane.waiting) >= QUEUE_MAX:
                lane.waiting.popleft()
            lane.waiting.append(notification)
            if lane.thread is None:
                lane.thread = threading.Thread(target=self._run, args=(lane,), daemon=True,
                                               name=f"subscription-{sub.id[:12]}")
                lane.thread.start()

    def resting(self, sub: Subscription) -> bool:
        lane = self._lanes.get(sub.key)
        return lane is not None and time.monotonic() < lane.resting_until

    def busy(self, sub: Subscription) -> bool:
        lane = self._lanes.get(sub.key)
        return lane is not None and bool(lane.waiting)

    def oldest_waiting(self) -> dict[TopicPartition, int]:
        """Per partition, the lowest log offset a lane still has to deliver (commit no further)."""
        oldest: dict[TopicPartition, int] = {}
        with self._lock:
            for lane in self._lanes.values():
                for n in lane.waiting:
                    if n.position is not None:
                        tp, offset = n.position
                        oldest[tp] = min(offset, oldest.get(tp, offset))
        return oldest

    def idle(self) -> bool:
        with self._lock:
            return not any(lane.waiting for lane in self._lanes.values())

    # -- one lane's thread ---------------------------------------------------------------------------
    def _run(self, lane: _Lane) -> None:
        while not self.stop.is_set():
            with self._lock:
                if not lane.waiting:
                    lane.thread = None
                    return
                head, sub = lane.waiting[0], lane.sub
            self._send(lane, sub, head)
            with self._lock:
                if lane.waiting and lane.waiting[0] is head:
                    lane.waiting.popleft()

    def _send(self, lane: _Lane, sub: Subscription, head: Notification) -> None:
        """Until `head` is taken, given up on, or the Subscription is released (off, deleted)."""
        deadline = time.monotonic() + (0.0 if lane.rest else self.retry_s)  # after a rest: one attempt
        while not self.stop.is_set():
            if self.post(sub, head):
                lane.backoff.reset()
                lane.rest = 0.0
                if head.event_id is not None:
                    self.delivered += 1
                if lane.failing or sub.status == "error":
                    lane.failing = False
                    self.set_status(sub, "active", None)
                return
            if head.event_id is None:
                return  # a heartbeat is not retried
            if not lane.failing:
                lane.failing = True
                self.set_status(sub, "error", self.failed_text)
            wait = lane.backoff.delay()
            if time.monotonic() + wait > deadline:
                lane.backoff.reset()
                lane.rest = min(REST_MAX_S, lane.rest * 2 if lane.rest else self.retry_s)
                with self._lock:
                    lane.resting_until = time.monotonic() + lane.rest
                    lane.waiting = deque(n for n in lane.waiting if n is head)  # the rest is dropped too
                log.warning("subscription %s: given up on event %s, resting %.0f s", sub.id, head.event_id,
                            lane.rest)
                return
            if self.stop.wait(wait):
                return
            fresh = self.current(sub)
            if fresh is None or fresh.status not in ("active", "error"):
                with self._lock:
                    lane.waiting = deque(n for n in lane.waiting if n is head)
                return  # set off or deleted: released
            sub = fresh
