"""auth: room for the id_token signing key (an RSA PEM), the revoked tokens (RFC 7009) and the public keys of
backend-services clients (a JWKS or its URL)

Revision ID: 0018_auth_oidc
Revises: 0017_auth_users
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_auth_oidc"
down_revision = "0017_auth_users"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("auth_keys") as batch:
        batch.alter_column("secret", type_=sa.Text(), existing_type=sa.String(200), existing_nullable=False)
    with op.batch_alter_table("auth_clients") as batch:
        batch.add_column(sa.Column("jwks", sa.Text(), nullable=True))
    op.create_table(
        "auth_revoked",
        sa.Column("jti", sa.String(length=64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("jti", name=op.f("pk_auth_revoked")),
    )


def downgrade() -> None:
    op.drop_table("auth_revoked")
    with op.batch_alter_table("auth_clients") as batch:
        batch.drop_column("jwks")
    with op.batch_alter_table("auth_keys") as batch:
        batch.alter_column("secret", type_=sa.String(200), existing_type=sa.Text(), existing_nullable=False)
