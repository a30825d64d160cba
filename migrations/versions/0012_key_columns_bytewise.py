"""fhir store: the resource and version keys (session, type, id) compared byte by byte on PostgreSQL

Like the index value columns since 0006: ids and type names are exact strings, and the two unique keys are
probed on every read and write (and maintained row by row through a bulk load, where comparing under the
database locale was a visible share of PostgreSQL's CPU). Equality is unchanged; ordering by _id becomes
byte order, which is what it already was on a C.UTF-8 database. SQLite compares bytes already.

Revision ID: 0012_key_columns_bytewise
Revises: 0011_last_updated_rows
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_key_columns_bytewise"
down_revision = "0011_last_updated_rows"
branch_labels = None
depends_on = None

COLUMNS = ("session", "res_type", "res_id")
TABLES = ("fhir_version", "fhir_resource")


def _collate(collation: str | None) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        for column in COLUMNS:
            op.alter_column(table, column, type_=sa.String(64, collation=collation), existing_nullable=False)


def upgrade() -> None:
    _collate("C")


def downgrade() -> None:
    _collate("default")
