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
"""

from __future__ import annotations

from sqlalchemy import Engine, func, insert, select
from sqlalchemy.exc import IntegrityError

from services.fhir_api.subscriptions.models import EVENTS

ATTEMPTS = 5


class EventNumbers:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def number(self, session: str, subscription: str, event_id: str) -> int:
        """The `event-number` of `event_id` for this Subscription: the one it was given, else the next."""
        mine = (EVENTS.c.session_id == session) & (EVENTS.c.subscription_id == subscription)
        for _attempt in range(ATTEMPTS):
            with self.engine.begin() as conn:
                given = conn.execute(select(EVENTS.c.number).where(mine & (EVENTS.c.event_id == event_id))
                                     ).scalar_one_or_none()
                if given is not None:
                    return int(given)
                last = conn.execute(select(func.max(EVENTS.c.number)).where(mine)).scalar_one_or_none() or 0
                try:
                    with conn.begin_nested():
                        conn.execute(insert(EVENTS).values(session_id=session, subscription_id=subscription,
                                                           number=last + 1, event_id=event_id))
                except IntegrityError:  # another consumer numbered one meanwhile: read again
                    continue
                return last + 1
        raise RuntimeError(f"could not number event {event_id} of Subscription {subscription}")

    def since_start(self, session: str, subscription: str) -> int:
        """`events-since-subscription-start`: how many events were numbered for this Subscription."""
        mine = (EVENTS.c.session_id == session) & (EVENTS.c.subscription_id == subscription)
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.max(EVENTS.c.number)).where(mine)).scalar_one_or_none() or 0)
