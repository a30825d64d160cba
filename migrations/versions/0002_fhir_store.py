"""fhir store: versions, current resources, search indexes, patient compartment, sessions

Revision ID: 0002_fhir_store
Revises: 0001_foundation
Create Date: 2026-11-30
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_fhir_store"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

INDEX_COLUMNS = {
    "token": ([sa.Column("system", sa.String(255)), sa.Column("code", sa.String(255)),
               sa.Column("text", sa.String(255))], ("code", "system")),
    "string": ([sa.Column("norm", sa.String(255), nullable=False),
                sa.Column("exact", sa.String(255), nullable=False)], ("norm",)),
    "date": ([sa.Column("low", sa.BigInteger(), nullable=False),
              sa.Column("high", sa.BigInteger(), nullable=False)], ("low", "high")),
    "number": ([sa.Column("value", sa.Float(), nullable=False)], ("value",)),
    "quantity": ([sa.Column("value", sa.Float(), nullable=False), sa.Column("system", sa.String(255)),
                  sa.Column("code", sa.String(255)), sa.Column("unit", sa.String(255))], ("code", "value")),
    "reference": ([sa.Column("target_type", sa.String(64)), sa.Column("target_id", sa.String(255)),
                   sa.Column("url", sa.String(1024))], ("target_id", "target_type")),
    "uri": ([sa.Column("value", sa.String(1024), nullable=False)], ("value",)),
}


def upgrade() -> None:
    op.create_table(
        "fhir_version",
        sa.Column("seq", ID, autoincrement=True, nullable=False),
        sa.Column("session", sa.String(64), nullable=False),
        sa.Column("res_type", sa.String(64), nullable=False),
        sa.Column("res_id", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("last_updated", sa.DateTime(timezone=True), nullable=False),
        sa.Column("method", sa.String(8), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("raw", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_fhir_version")),
        sa.UniqueConstraint("session", "res_type", "res_id", "version", name="uq_fhir_version_key"),
    )
    op.create_table(
        "fhir_resource",
        sa.Column("rid", ID, autoincrement=True, nullable=False),
        sa.Column("session", sa.String(64), nullable=False),
        sa.Column("res_type", sa.String(64), nullable=False),
        sa.Column("res_id", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("created_seq", sa.BigInteger(), nullable=False),
        sa.Column("last_updated", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("clinical_time", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("rid", name=op.f("pk_fhir_resource")),
        sa.UniqueConstraint("session", "res_type", "res_id", name="uq_fhir_resource_key"),
    )
    op.create_index("ix_fhir_resource_type_session", "fhir_resource", ["res_type", "session", "deleted"])
    for name, (columns, search) in INDEX_COLUMNS.items():
        table = f"fhir_idx_{name}"
        op.create_table(
            table,
            sa.Column("rid", sa.BigInteger(), nullable=False),
            sa.Column("res_type", sa.String(64), nullable=False),
            sa.Column("param", sa.String(64), nullable=False),
            *columns,
        )
        op.create_index(f"ix_{table}_rid", table, ["rid"])
        op.create_index(f"ix_{table}_search", table, ["res_type", "param", *search, "rid"])
    op.create_table(
        "fhir_compartment",
        sa.Column("rid", sa.BigInteger(), nullable=False),
        sa.Column("patient_id", sa.String(64), nullable=False),
        sa.Column("res_type", sa.String(64), nullable=False),
    )
    op.create_index("ix_fhir_compartment_rid", "fhir_compartment", ["rid"])
    op.create_index("ix_fhir_compartment_patient", "fhir_compartment", ["patient_id", "res_type", "rid"])
    op.create_table(
        "fhir_session",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("now", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_fhir_session")),
    )


def downgrade() -> None:
    for table in ("fhir_session", "fhir_compartment", *(f"fhir_idx_{n}" for n in INDEX_COLUMNS),
                  "fhir_resource", "fhir_version"):
        op.drop_table(table)
