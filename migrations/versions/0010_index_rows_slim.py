"""fhir store: index rows without the resource type and parameter name columns

Every index row repeated its resource type and parameter name as two varchar columns, which nothing reads
since `param_key` (0006) leads every search: a bulk load formatted, sent, parsed and stored them for about
2.3 M rows of the MIMIC demo. Downgrading names the rows again from the generated parameter table (the names
are what `param_key` hashes).

Revision ID: 0010_index_rows_slim
Revises: 0009_index_include
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_index_rows_slim"
down_revision = "0009_index_include"
branch_labels = None
depends_on = None

KINDS = ("token", "string", "date", "number", "quantity", "reference", "uri")


def upgrade() -> None:
    for kind in KINDS:
        with op.batch_alter_table(f"fhir_idx_{kind}") as batch:
            batch.drop_column("param")
            batch.drop_column("res_type")


def downgrade() -> None:
    from services.fhir_api.search.keys import param_key
    from services.fhir_api.search.registry import params_for, resource_types

    names = {
        param_key(rtype, name): (rtype, name)
        for rtype in resource_types()
        for base in params_for(rtype)
        for name in (base, f"{base}:identifier")
    }
    bind = op.get_bind()
    for kind in KINDS:
        table = f"fhir_idx_{kind}"
        op.add_column(table, sa.Column("res_type", sa.String(64), nullable=False, server_default=""))
        op.add_column(table, sa.Column("param", sa.String(64), nullable=False, server_default=""))
        for key in bind.execute(sa.text(f"SELECT DISTINCT param_key FROM {table}")).scalars():
            rtype, name = names.get(key, ("", ""))
            bind.execute(
                sa.text(f"UPDATE {table} SET res_type = :t, param = :p WHERE param_key = :k"),
                {"t": rtype, "p": name, "k": key},
            )
        with op.batch_alter_table(table) as batch:
            for column in ("res_type", "param"):
                batch.alter_column(
                    column, existing_type=sa.String(64), existing_nullable=False, server_default=None
                )
