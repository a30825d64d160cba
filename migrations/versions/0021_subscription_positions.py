"""subscriptions: where each numbered change event is in the log, so delivered numbers can be pruned

Revision ID: 0021_subscription_positions
Revises: 0020_subscription_events
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021_subscription_positions"
down_revision = "0020_subscription_events"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("subscription_events", sa.Column("partition", sa.Integer(), nullable=True))
    op.add_column("subscription_events", sa.Column("event_offset", sa.BigInteger(), nullable=True))
    op.create_index("ix_subscription_events_position", "subscription_events", ["partition", "event_offset"])


def downgrade() -> None:
    op.drop_index("ix_subscription_events_position", table_name="subscription_events")
    with op.batch_alter_table("subscription_events") as batch:
        batch.drop_column("event_offset")
        batch.drop_column("partition")
