"""Per-session event sequence numbers, shared by every producer of a session's events.

Each session's events on `rounds.sessions` carry a `sequence` (1, 2, ...). The FHIR API's interaction recorder
and the simulator both publish to the same session, from different processes, so the counter is a row per
session in the application database (table `event_session_sequences`, revision `0004_outbox_tracking`) and
`allocate` bumps it atomically: the numbers of one session are unique and increasing whoever asks.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import BigInteger, Connection, Engine, String, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from rounds.db import Base


class SessionSequence(Base):
    """The last `sequence` handed out for a session's events."""

    __tablename__ = "event_session_sequences"

    session_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    last_sequence: Mapped[int] = mapped_column(BigInteger)


SEQUENCES = SessionSequence.__table__


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
            last = conn.execute(
                update(SEQUENCES)
                .where(SEQUENCES.c.session_id == session_id)
                .values(last_sequence=SEQUENCES.c.last_sequence + count)
                .returning(SEQUENCES.c.last_sequence)
            ).scalar_one_or_none()
            if last is None:
                try:
                    with conn.begin_nested():
                        conn.execute(insert(SEQUENCES).values(session_id=session_id, last_sequence=count))
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
