"""fhir store: index rows carry the span of a session clock they hold for (`since`, `until`, µs)

A clocked session serves a shared resource as it stood at its `now` (store/views.py): an Encounter still
going on has no end and is in progress, a Patient not yet dead has no death date, a Reference to a resource
not yet visible is gone. Index rows are extracted from those views too: a row of the resource as stored
holds from `since` (NULL: always); a row of an earlier view only (under the parameter's as-of key) holds
from `since` until `until`. Searches of the shared record never read either column; clocked session
searches filter on both, read from the search b-trees' INCLUDE columns on PostgreSQL (index-only scans).

Revision ID: 0014_index_row_clock
Revises: 0013_merge_heads
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_index_row_clock"
down_revision = "0013_merge_heads"
branch_labels = None
depends_on = None

# index table -> search b-tree key after param_key, INCLUDE columns before this revision
_SEARCH = {
    "token": (["code", "patient_key"], ["system"]),
    "string": (["norm"], []),
    "date": (["low", "high"], []),
    "number": (["value"], []),
    "quantity": (["code", "value"], []),
    "reference": (["target_id"], ["target_type"]),
    "uri": (["value"], []),
}
_CLOCK = ["since", "until"]


def _recreate(kind: str, include: list[str]) -> None:
    table, name = f"fhir_idx_{kind}", f"ix_fhir_idx_{kind}_search"
    columns, carried = _SEARCH[kind]
    op.drop_index(name, table_name=table)
    op.create_index(name, table, ["param_key", *columns], postgresql_include=[*carried, "rid", *include])


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for kind in _SEARCH:
        for column in _CLOCK:
            op.add_column(f"fhir_idx_{kind}", sa.Column(column, sa.BigInteger(), nullable=True))
        if postgres:
            _recreate(kind, _CLOCK)


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for kind in _SEARCH:
        if postgres:
            _recreate(kind, [])
        with op.batch_alter_table(f"fhir_idx_{kind}") as batch:
            for column in _CLOCK:
                batch.drop_column(column)
