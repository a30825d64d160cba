"""fhir store: search b-trees sort by the compared values only; rid (and token system, reference target type)
ride along as INCLUDE columns on PostgreSQL

A bulk load builds these b-trees at its end, and sorting by every column cost most where several follow a
varchar (PostgreSQL walks the tuple to each). Searches compare param_key and the value with =, ranges or
prefixes and only filter on the rest, which INCLUDE columns still answer in index-only scans. SQLite has no
INCLUDE: its indexes keep the sorted columns.

Revision ID: 0009_index_include
Revises: 0008_token_patient_key
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0009_index_include"
down_revision = "0008_token_patient_key"
branch_labels = None
depends_on = None

# index table -> (key after param_key, before), (key after param_key, INCLUDE) now
_SEARCH = {
    "token": (["code", "patient_key", "system"], ["code", "patient_key"], ["system"]),
    "string": (["norm"], ["norm"], []),
    "date": (["low", "high"], ["low", "high"], []),
    "number": (["value"], ["value"], []),
    "quantity": (["code", "value"], ["code", "value"], []),
    "reference": (["target_id", "target_type"], ["target_id"], ["target_type"]),
    "uri": (["value"], ["value"], []),
}


def _recreate(kind: str, columns: list[str], include: list[str] | None) -> None:
    name, table = f"ix_fhir_idx_{kind}_search", f"fhir_idx_{kind}"
    op.drop_index(name, table_name=table)
    if include is None:
        op.create_index(name, table, ["param_key", *columns, "rid"])
    else:
        op.create_index(name, table, ["param_key", *columns], postgresql_include=[*include, "rid"])


def upgrade() -> None:
    for kind, (_, columns, carried) in _SEARCH.items():
        _recreate(kind, columns, carried)


def downgrade() -> None:
    for kind, (columns, _, _) in _SEARCH.items():
        _recreate(kind, columns, None)
