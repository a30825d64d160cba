"""Stored copies of bodies too large for an event (the 256 KiB limit), content-addressed by sha256.

An event that cannot carry a body inline carries its digest as `bodyRef` instead ("sha256:<hex>"); the bytes
are in `event_blobs` (revision `0015_event_blobs`) in the application database, written BEFORE the event is
published, so a reader never meets a reference it cannot resolve. The same bytes are stored once however often
they are recorded. Readers: `BlobStore(engine).get(ref)`; `read(conn, refs)` in a caller's transaction;
`write(conn, content)` stores in one. `rounds events dump` writes the blobs an event names before it, and
`load` stores them before publishing it (archive.py), so a log carries its blobs to another store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy import BigInteger, Connection, DateTime, Engine, LargeBinary, String, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Mapped, mapped_column

from foundation.db import Base


class EventBlob(Base):
    __tablename__ = "event_blobs"

    ref: Mapped[str] = mapped_column(String(71), primary_key=True)  # "sha256:" + 64 hex digits
    content: Mapped[bytes] = mapped_column(LargeBinary)
    size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


BLOBS = EventBlob.__table__


def blob_ref(content: bytes) -> str:
    """The reference (and digest) of `content`: "sha256:<hex>"."""
    return "sha256:" + hashlib.sha256(content).hexdigest()


def read(conn: Connection, refs: Iterable[str]) -> dict[str, bytes]:
    """reference -> bytes, for those of `refs` stored here, read in `conn` (the caller's transaction)."""
    wanted = sorted(set(refs))
    if not wanted:
        return {}
    rows = conn.execute(select(BLOBS.c.ref, BLOBS.c.content).where(BLOBS.c.ref.in_(wanted)))
    return {ref: bytes(content) for ref, content in rows}


def write(conn: Connection, content: bytes) -> str:
    """Store `content` in the caller's transaction (idempotent: the same bytes are one row); its reference."""
    ref = blob_ref(content)
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    row = {"ref": ref, "content": content, "size": len(content), "created_at": datetime.now(UTC)}
    conn.execute(dialect.insert(BLOBS).values(**row).on_conflict_do_nothing(index_elements=["ref"]))
    return ref


class BlobStore:
    """Put and get stored bodies by reference."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def put(self, content: bytes) -> str:
        """Store `content` (idempotent: the same bytes are one row) and return its reference."""
        with self.engine.begin() as conn:
            return write(conn, content)

    def get(self, ref: str) -> bytes:
        """The bytes stored under `ref`; KeyError when there are none."""
        with self.engine.connect() as conn:
            found = read(conn, [ref])
        if ref not in found:
            raise KeyError(f"no stored body {ref}")
        return found[ref]
