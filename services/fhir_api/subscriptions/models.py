"""The table of notification numbers (revisions 0020_subscription_events, 0021_subscription_positions):
which `event-number` each (Subscription, change event) pair was given, so a redelivery — a lane's retry, or
the events a killed consumer had not committed — carries the number it had, and the next new event gets the
next one (numbering.py). Only what can still be redelivered is kept, with each Subscription's last number:
a row records where its change event is in the log (`partition`, `event_offset`), and the delivering
consumer prunes the rows its group's committed position has passed (numbering.py `prune`)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from foundation.db import Base


class SubscriptionEvent(Base):
    """One numbered notification of a Subscription (`session_id` '' for the shared record's): numbers run
    1, 2, ... per Subscription, one per change event it matched; the largest is its
    `events-since-subscription-start`."""

    __tablename__ = "subscription_events"
    __table_args__ = (UniqueConstraint("session_id", "subscription_id", "event_id",
                                       name="uq_subscription_events_event"),
                      Index("ix_subscription_events_position", "partition", "event_offset"))

    session_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    subscription_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    number: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    event_id: Mapped[str] = mapped_column(String(200))
    # where the change event is in the consumed log (none for rows numbered before revision 0021)
    partition: Mapped[int | None] = mapped_column(Integer, nullable=True)
    event_offset: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


EVENTS = SubscriptionEvent.__table__
