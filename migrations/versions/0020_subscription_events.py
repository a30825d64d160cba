"""subscriptions: the number each notification was given (Backport IG event-number), per Subscription

Revision ID: 0020_subscription_events
Revises: 0019_projection_tables
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_subscription_events"
down_revision = "0019_projection_tables"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "subscription_events",
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("subscription_id", sa.String(length=64), nullable=False),
        sa.Column("number", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("event_id", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "subscription_id", "number", name=op.f("pk_subscription_events")),
        sa.UniqueConstraint("session_id", "subscription_id", "event_id", name="uq_subscription_events_event"),
    )


def downgrade() -> None:
    op.drop_table("subscription_events")
