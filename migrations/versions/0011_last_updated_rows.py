"""fhir store: no `_lastUpdated` index rows; searches read fhir_resource.last_updated (search/updated.py)

The rows already stored are deleted (keys computed as the application computes them, frozen copy below).
Downgrading writes them again from each current row's last_updated, as the point [t, t + 1 µs) (on SQLite
to julianday's precision, tens of µs).

Revision ID: 0011_last_updated_rows
Revises: 0010_index_rows_slim
Create Date: 2026-11-30
"""

from __future__ import annotations

from hashlib import blake2b

import sqlalchemy as sa
from alembic import op

revision = "0011_last_updated_rows"
down_revision = "0010_index_rows_slim"
branch_labels = None
depends_on = None


def _key(resource_type: str) -> int:
    digest = blake2b(f"{resource_type}._lastUpdated".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _types(bind) -> list[str]:
    return list(bind.execute(sa.text("SELECT DISTINCT res_type FROM fhir_resource")).scalars())


def upgrade() -> None:
    bind = op.get_bind()
    for rtype in _types(bind):
        bind.execute(sa.text("DELETE FROM fhir_idx_date WHERE param_key = :k"), {"k": _key(rtype)})


def downgrade() -> None:
    bind = op.get_bind()
    epoch_us = (
        "(EXTRACT(EPOCH FROM last_updated) * 1000000)::bigint"
        if bind.dialect.name == "postgresql"
        else "CAST(ROUND((julianday(last_updated) - 2440587.5) * 86400000000) AS INTEGER)"
    )
    for rtype in _types(bind):
        bind.execute(
            sa.text(
                f"INSERT INTO fhir_idx_date (rid, param_key, low, high) SELECT rid, :k, {epoch_us},"
                f" {epoch_us} + 1 FROM fhir_resource WHERE res_type = :t AND NOT deleted"
            ),
            {"k": _key(rtype), "t": rtype},
        )
