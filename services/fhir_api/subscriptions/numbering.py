"""Sequential notification numbers per Subscription (Subscriptions Backport IG `event-number` and
`events-since-subscription-start`), so a receiver detects a gap.

A number is given on the partition's path, when a change is matched, before the notification goes to its
lane, and kept in the database (table `subscription_events`) against the change event's id: a lane's retry
sends the same bundle, and after a kill the events the group had not committed are matched again and find
the numbers they were given. Numbers are given in the partition's order, which is the lane's sending order,
so a receiver sees 1, 2, 3 ...; a number it never sees is a notification the server gave up on (the lane's
retry budget ran out) — a real gap, which the receiver can ask `$status` about. Two consumers of one group
briefly holding the same partition during a rebalance race on the primary key (session, Subscription,
number) and on the event's unique key: the loser reads what the winner wrote.

The table stays bounded: a row records where its change event is in the log (partition, offset), and once the
group's committed position has passed an event it is never matched again, so its row is pruned (`prune`,
after each commit) — except each Subscription's last, which `$status` and the next number read. A deleted
Subscription's rows all go (`forget`). What is left per Subscription: its last number and the events still
uncommitted (at most what its lane holds, plus one poll's worth).
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine, delete, func, insert, select
from sqlalchemy.exc import IntegrityError

from services.fhir_api.subscriptions.models import EVENTS

ATTEMPTS = 5


class EventNumbers:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def number(self, session: str, subscription: str, event_id: str,
               position: tuple[int, int] | None = None) -> int:
        """The `event-number` of `event_id` for this Subscription: the one it was given, else the next."""
        return self.number_all(session, [subscription], event_id, position)[subscription]

    def number_all(self, session: str, subscriptions: list[str], event_id: str,
                   position: tuple[int, int] | None = None) -> dict[str, int]:
        """`number` for each of the Subscriptions one change event matched, in one transaction of three
        statements (the partition's path: one commit per event, however many Subscriptions it matched).
        `position`: the event's (partition, offset) in the consumed log, by which `prune` drops it."""
        for _attempt in range(ATTEMPTS):
            try:
                with self.engine.connect() as conn:
                    conn.info["immediate"] = True  # SQLite: take the write lock first, queue behind writers
                    with conn.begin():
                        return self._number_all(conn, session, subscriptions, event_id, position)
            except IntegrityError:  # another consumer numbered one meanwhile: read again
                continue
        raise RuntimeError(f"could not number event {event_id} of Subscriptions {subscriptions[:5]}")

    @staticmethod
    def _number_all(conn: Connection, session: str, subscriptions: list[str], event_id: str,
                    position: tuple[int, int] | None) -> dict[str, int]:
        mine = (EVENTS.c.session_id == session) & EVENTS.c.subscription_id.in_(subscriptions)
        given = {sub: int(n) for sub, n in conn.execute(
            select(EVENTS.c.subscription_id, EVENTS.c.number).where(mine & (EVENTS.c.event_id == event_id)))}
        new = [sub for sub in subscriptions if sub not in given]
        if new:
            last = dict(conn.execute(
                select(EVENTS.c.subscription_id, func.max(EVENTS.c.number))
                .where((EVENTS.c.session_id == session) & EVENTS.c.subscription_id.in_(new))
                .group_by(EVENTS.c.subscription_id)).all())
            partition, offset = position if position is not None else (None, None)
            rows = [{"session_id": session, "subscription_id": sub, "number": int(last.get(sub) or 0) + 1,
                     "event_id": event_id, "partition": partition, "event_offset": offset} for sub in new]
            conn.execute(insert(EVENTS), rows)
            given.update((row["subscription_id"], row["number"]) for row in rows)
        return given

    def since_start(self, session: str, subscription: str) -> int:
        """`events-since-subscription-start`: how many events were numbered for this Subscription."""
        mine = (EVENTS.c.session_id == session) & (EVENTS.c.subscription_id == subscription)
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.max(EVENTS.c.number)).where(mine)).scalar_one_or_none() or 0)

    def prune(self, partition: int, committed: int) -> int:
        """Drop the rows of events of `partition` before `committed` (the group's committed position: they
        are never matched again), keeping each Subscription's last number. Returns the rows dropped."""
        later = EVENTS.alias("later")
        same = ((later.c.session_id == EVENTS.c.session_id)
                & (later.c.subscription_id == EVENTS.c.subscription_id))
        superseded = select(later.c.number).where(same & (later.c.number > EVENTS.c.number)).correlate(
            EVENTS).exists()
        passed = (EVENTS.c.partition == partition) & (EVENTS.c.event_offset < committed)
        with self.engine.begin() as conn:
            return conn.execute(delete(EVENTS).where(passed & superseded)).rowcount

    def forget(self, session: str, subscription: str) -> None:
        """A deleted Subscription's numbers: nothing asks for them any more (a new one of the same id starts
        again at 1, as a new Subscription does)."""
        with self.engine.begin() as conn:
            conn.execute(delete(EVENTS).where(
                (EVENTS.c.session_id == session) & (EVENTS.c.subscription_id == subscription)))
