"""Tables of the embedded event log (SqlLog): records, per-partition offset counters, consumer groups."""

from __future__ import annotations

from sqlalchemy import BigInteger, Index, Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from foundation.db import Base


class LogPartition(Base):
    """One partition of a topic; `next_offset` is the counter keeping offsets dense (row-locked on append)."""

    __tablename__ = "event_log_partition"
    topic: Mapped[str] = mapped_column(String(249), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    next_offset: Mapped[int] = mapped_column(BigInteger, default=0)


class LogRecord(Base):
    """An appended record. `payload` holds the CloudEvent bytes exactly as published."""

    __tablename__ = "event_log_record"
    topic: Mapped[str] = mapped_column(String(249), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    offset: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    key: Mapped[str] = mapped_column(String(512))
    event_id: Mapped[str | None] = mapped_column(String(200))
    event_source: Mapped[str | None] = mapped_column(String(500))
    payload: Mapped[bytes] = mapped_column(LargeBinary)
    timestamp_ms: Mapped[int] = mapped_column(BigInteger)

    __table_args__ = (Index("ix_event_log_record_source_id", "event_source", "event_id"),)


class GroupMember(Base):
    """A live consumer of a group; members whose heartbeat is older than the session timeout are evicted."""

    __tablename__ = "event_log_member"
    group_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    member_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    topics: Mapped[str] = mapped_column(Text)  # JSON list of subscribed topics
    heartbeat_ms: Mapped[int] = mapped_column(BigInteger)


class PartitionClaim(Base):
    """Which member of a group currently owns a partition (at most one: the primary key guarantees it)."""

    __tablename__ = "event_log_claim"
    group_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    topic: Mapped[str] = mapped_column(String(249), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    member_id: Mapped[str] = mapped_column(String(64))


class GroupOffset(Base):
    """A group's committed next-offset-to-read per partition."""

    __tablename__ = "event_log_offset"
    group_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    topic: Mapped[str] = mapped_column(String(249), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    offset: Mapped[int] = mapped_column(BigInteger)
