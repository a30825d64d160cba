"""fhir store: index tables led by an int8 parameter key, value columns byte-compared on PostgreSQL

Every search index was led by (res_type, param), two varchar columns each entry repeats; now by `param_key`
(services/fhir_api/search/keys.py), and the value columns are COLLATE "C" on PostgreSQL. Existing rows get
their keys here, computed as the application computes them (frozen copy below). Rows of parameters that
other parameters' rows now answer (registry.stored_as: `patient`, `combo-code`, …) stay, unread; a reload
into an empty store drops them.

Revision ID: 0006_param_keys
Revises: 0005_fhir_indexes
Create Date: 2026-11-30
"""

from __future__ import annotations

from hashlib import blake2b

import sqlalchemy as sa
from alembic import op

revision = "0006_param_keys"
down_revision = "0005_fhir_indexes"
branch_labels = None
depends_on = None

SEARCH = {  # index table -> value columns of its search index (after the key, before rid)
    "token": ("code", "system"),
    "string": ("norm",),
    "date": ("low", "high"),
    "number": ("value",),
    "quantity": ("code", "value"),
    "reference": ("target_id", "target_type"),
    "uri": ("value",),
}
BYTEWISE = {  # PostgreSQL: columns compared byte by byte, with their lengths
    "token": {"system": 255, "code": 255, "text": 255},
    "string": {"norm": 255, "exact": 255},
    "quantity": {"system": 255, "code": 255, "unit": 255},
    "reference": {"target_type": 64, "target_id": 255, "url": 1024},
    "uri": {"value": 1024},
}
STATISTICS = {  # PostgreSQL extended statistics (0005), now on the key
    "st_fhir_idx_token_deps": ("fhir_idx_token", "param_key, system, code", "res_type, param, system, code"),
    "st_fhir_idx_reference_deps": (
        "fhir_idx_reference",
        "param_key, target_type, target_id",
        "res_type, param, target_type, target_id",
    ),
}


def _key(resource_type: str, name: str) -> int:
    digest = blake2b(f"{resource_type}.{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def upgrade() -> None:
    bind = op.get_bind()
    postgres = bind.dialect.name == "postgresql"
    for kind, search in SEARCH.items():
        table = f"fhir_idx_{kind}"
        op.add_column(table, sa.Column("param_key", sa.BigInteger(), nullable=True))
        pairs = bind.execute(sa.text(f"SELECT DISTINCT res_type, param FROM {table}")).all()
        for res_type, param in pairs:
            bind.execute(
                sa.text(f"UPDATE {table} SET param_key = :k WHERE res_type = :t AND param = :p"),
                {"k": _key(res_type, param), "t": res_type, "p": param},
            )
        with op.batch_alter_table(table) as batch:
            batch.alter_column("param_key", existing_type=sa.BigInteger(), nullable=False)
        op.drop_index(f"ix_{table}_search", table_name=table)
        if postgres:
            for column, length in BYTEWISE.get(kind, {}).items():
                op.alter_column(table, column, type_=sa.String(length, collation="C"))
        op.create_index(f"ix_{table}_search", table, ["param_key", *search, "rid"])
    if postgres:
        for name, (table, columns, _) in STATISTICS.items():
            op.execute(f"DROP STATISTICS IF EXISTS {name}")
            op.execute(f"CREATE STATISTICS {name} (dependencies) ON {columns} FROM {table}")


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for kind, search in SEARCH.items():
        table = f"fhir_idx_{kind}"
        op.drop_index(f"ix_{table}_search", table_name=table)
        if postgres:
            for column, length in BYTEWISE.get(kind, {}).items():
                op.alter_column(table, column, type_=sa.String(length))
        op.create_index(f"ix_{table}_search", table, ["res_type", "param", *search, "rid"])
        with op.batch_alter_table(table) as batch:
            batch.drop_column("param_key")
    if postgres:
        for name, (table, _, columns) in STATISTICS.items():
            op.execute(f"DROP STATISTICS IF EXISTS {name}")
            op.execute(f"CREATE STATISTICS {name} (dependencies) ON {columns} FROM {table}")
