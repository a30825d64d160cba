"""fhir store: extended statistics on the token and reference index tables (PostgreSQL)

Without them the planner multiplies the selectivities of res_type, param, system and code as if
independent and underestimates a common code or category ten-fold, then picks join orders that probe
fhir_resource thousands of times or hash 100,000 index rows (services/fhir_api/search/query.py:
rid_filters). ANALYZE fills them.

Revision ID: 0005_fhir_indexes
Revises: 0002_fhir_store
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0005_fhir_indexes"
down_revision = "0002_fhir_store"
branch_labels = None
depends_on = None

STATISTICS = {
    "st_fhir_idx_token_deps": ("fhir_idx_token", "res_type, param, system, code"),
    "st_fhir_idx_reference_deps": ("fhir_idx_reference", "res_type, param, target_type, target_id"),
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, (table, columns) in STATISTICS.items():
        op.execute(f"CREATE STATISTICS IF NOT EXISTS {name} (dependencies) ON {columns} FROM {table}")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name in STATISTICS:
        op.execute(f"DROP STATISTICS IF EXISTS {name}")
