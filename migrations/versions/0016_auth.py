"""auth: the token-signing key kept on first use, and backend-service clients (client-credentials grant)

Revision ID: 0016_auth
Revises: 0015_event_blobs
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_auth"
down_revision = "0015_event_blobs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "auth_keys",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("secret", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auth_keys")),
    )
    op.create_table(
        "auth_clients",
        sa.Column("client_id", sa.String(length=128), nullable=False),
        sa.Column("secret_sha256", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("client_id", name=op.f("pk_auth_clients")),
    )


def downgrade() -> None:
    op.drop_table("auth_clients")
    op.drop_table("auth_keys")
