"""merge the three schema branches (fhir store, event log, outbox) into one head

The store (0002 → 0012), the event log (0003) and the outbox/tracking tables (0004) were written as branches of
0001, so `alembic upgrade head` — the command every alembic user types — refused with "Multiple head
revisions". This revision joins them; every later migration revises it, and tests keep the history to a
single head.

Revision ID: 0013_merge_heads
Revises: 0003_event_log, 0004_outbox_tracking, 0012_key_columns_bytewise
Create Date: 2026-12-01
"""

from __future__ import annotations

revision = "0013_merge_heads"
down_revision = ("0003_event_log", "0004_outbox_tracking", "0012_key_columns_bytewise")
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing to change: a merge point only."""


def downgrade() -> None:
    """Nothing to change: a merge point only."""
