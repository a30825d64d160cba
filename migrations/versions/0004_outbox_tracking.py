"""events: transactional outbox, session sequences, projection consumer positions and processed event ids

Revision ID: 0004_outbox_tracking
Revises: 0001_foundation
Create Date: 2026-11-30
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_outbox_tracking"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_outbox",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("key", sa.String(length=500), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_outbox")),
        sa.UniqueConstraint("event_id", name=op.f("uq_event_outbox_event_id")),
    )
    op.create_index("ix_event_outbox_pending", "event_outbox", ["sent_at", "id"], unique=False)
    op.create_table(
        "event_consumer_positions",
        sa.Column("group_id", sa.String(length=200), nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("next_offset", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("group_id", "topic", "partition", name=op.f("pk_event_consumer_positions")),
    )
    op.create_table(
        "event_processed",
        sa.Column("group_id", sa.String(length=200), nullable=False),
        sa.Column("event_id", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=500), nullable=False),
        sa.PrimaryKeyConstraint("group_id", "event_id", "source", name=op.f("pk_event_processed")),
    )
    op.create_table(
        "event_session_sequences",
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("last_sequence", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_event_session_sequences")),
    )


def downgrade() -> None:
    op.drop_table("event_session_sequences")
    op.drop_table("event_processed")
    op.drop_table("event_consumer_positions")
    op.drop_index("ix_event_outbox_pending", table_name="event_outbox")
    op.drop_table("event_outbox")
