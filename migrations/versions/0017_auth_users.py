"""auth users, registered redirect URIs and audiences of clients, and the end of a session

Revision ID: 0017_auth_users
Revises: 0016_auth
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_auth_users"
down_revision = "0016_auth"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "auth_users",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("password_hash", sa.String(length=300), nullable=False),
        sa.Column("patients", sa.Text(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_auth_users")),
    )
    with op.batch_alter_table("auth_clients") as batch:
        batch.add_column(sa.Column("redirect_uris", sa.Text(), nullable=False, server_default=""))
        batch.add_column(sa.Column("fhir_base", sa.Text(), nullable=True))
    with op.batch_alter_table("fhir_session") as batch:
        batch.add_column(sa.Column("ended", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("fhir_session") as batch:
        batch.drop_column("ended")
    with op.batch_alter_table("auth_clients") as batch:
        batch.drop_column("fhir_base")
        batch.drop_column("redirect_uris")
    op.drop_table("auth_users")
