"""events: stored copies of recorded bodies too large for an event (content-addressed)

Revision ID: 0015_event_blobs
Revises: 0014_index_row_clock
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_event_blobs"
down_revision = "0014_index_row_clock"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_blobs",
        sa.Column("ref", sa.String(length=71), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("ref", name=op.f("pk_event_blobs")),
    )


def downgrade() -> None:
    op.drop_table("event_blobs")
