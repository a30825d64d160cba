"""Per-session event sequence numbers, shared by every producer of a session's events.

Each session's events on `rounds.sessions` carry a `sequence` (1, 2, ...). The FHIR API's interaction recorder
and the simulator both publish to the same session, from different processes, so the counter is a row per
session in the application database (table `event_session_sequences`, revision `0004_outbox_tracking`) and
`allocate` bumps it atomically: the numbers of one session are unique and increasing whoever asks.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import BigInteger, Connection, Engine, String, bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from foundation.db import Base


class SessionSequence(Base):
    """The last `sequence` handed out for a session's events."""

    __tablename__ = "event_session_sequences"

    session_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    last_sequence: Mapped[int] = mapped_column(BigInteger)


SEQUENCES = SessionSequence.__table__
# Built once (a statement constructed per call cost more Python than running it): bump a session's counter by
# `b_count` and return the new last number; create the counter of a session seen for the first time.
_BUMP = (
    update(SEQUENCES)
    .where(SEQUENCES.c.session_id == bindparam("b_session"))
    .values(last_sequence=SEQUENCES.c.last_sequence + bindparam("b_count"))
    .returning(SEQUENCES.c.last_sequence)
)
_CREATE = insert(SEQUENCES).values(session_id=bindparam("b_session"), last_sequence=bindparam("b_count"))


class SessionSequences:
    """Allocates per-session, strictly increasing event sequence numbers (1, 2, ...), atomically in the DB."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def allocate(self, session_id: str, count: int = 1) -> list[int]:
        """The next `count` numbers of `session_id`, in order; concurrent callers never get the same one."""
        return self.allocate_many({session_id: count})[session_id]

    def allocate_many(self, counts: Mapping[str, int]) -> dict[str, list[int]]:
        """The next numbers of several sessions in ONE transaction (a batch of a producer's events): sessions
        are locked in sorted order, so producers allocating for overlapping sessions never deadlock."""
        with self.engine.begin() as conn:
            return {session: self._bump(conn, session, counts[session]) for session in sorted(counts)}

    @staticmethod
    def _bump(conn: Connection, session_id: str, count: int) -> list[int]:
        for _attempt in range(5):
            values = {"b_session": session_id, "b_count": count}
            last = conn.execute(_BUMP, values).scalar_one_or_none()
            if last is None:
                try:
                    with conn.begin_nested():
                        conn.execute(_CREATE, values)
                    last = count
                except IntegrityError:  # another writer created the row first: its UPDATE path now
                    continue
            return list(range(last - count + 1, last + 1))
        raise RuntimeError(f"could not allocate a sequence for session {session_id}")

    def last(self, session_id: str) -> int:
        """The last number handed out for `session_id` (0 before the first)."""
        with self.engine.connect() as conn:
            query = select(SEQUENCES.c.last_sequence).where(SEQUENCES.c.session_id == session_id)
            return conn.execute(query).scalar_one_or_none() or 0
