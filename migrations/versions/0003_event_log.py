"""events: embedded event log (SqlLog) - records, partition counters, consumer groups, committed offsets

Revision ID: 0003_event_log
Revises: 0001_foundation
Create Date: 2026-11-30
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_event_log"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_log_partition",
        sa.Column("topic", sa.String(length=249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("next_offset", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("topic", "partition", name=op.f("pk_event_log_partition")),
    )
    op.create_table(
        "event_log_record",
        sa.Column("topic", sa.String(length=249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("key", sa.String(length=512), nullable=False),
        sa.Column("event_id", sa.String(length=200), nullable=True),
        sa.Column("event_source", sa.String(length=500), nullable=True),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("timestamp_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("topic", "partition", "offset", name=op.f("pk_event_log_record")),
    )
    op.create_index("ix_event_log_record_source_id", "event_log_record", ["event_source", "event_id"])
    op.create_table(
        "event_log_member",
        sa.Column("group_id", sa.String(length=255), nullable=False),
        sa.Column("member_id", sa.String(length=64), nullable=False),
        sa.Column("topics", sa.Text(), nullable=False),
        sa.Column("heartbeat_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("group_id", "member_id", name=op.f("pk_event_log_member")),
    )
    op.create_table(
        "event_log_claim",
        sa.Column("group_id", sa.String(length=255), nullable=False),
        sa.Column("topic", sa.String(length=249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("member_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("group_id", "topic", "partition", name=op.f("pk_event_log_claim")),
    )
    op.create_table(
        "event_log_offset",
        sa.Column("group_id", sa.String(length=255), nullable=False),
        sa.Column("topic", sa.String(length=249), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("group_id", "topic", "partition", name=op.f("pk_event_log_offset")),
    )


def downgrade() -> None:
    op.drop_table("event_log_offset")
    op.drop_table("event_log_claim")
    op.drop_table("event_log_member")
    op.drop_index("ix_event_log_record_source_id", table_name="event_log_record")
    op.drop_table("event_log_record")
    op.drop_table("event_log_partition")
