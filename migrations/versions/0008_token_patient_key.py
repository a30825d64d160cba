"""fhir store: token rows carry their resource's patient (int8 key) in the token search index

A patient-scoped token search (`Observation?patient=<id>&code=<code>`) read every patient's index entries
for the code and intersected them with the patient's references; with the key after the code it reads the
entries of that patient only (services/fhir_api/search/keys.py `patient_key`). Rows already stored get 0,
"no single patient", which every such search still reads: they stay correct, and a reload makes them fast.

Revision ID: 0008_token_patient_key
Revises: 0007_drop_compartment
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_token_patient_key"
down_revision = "0007_drop_compartment"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "fhir_idx_token", sa.Column("patient_key", sa.BigInteger(), nullable=False, server_default="0")
    )
    op.drop_index("ix_fhir_idx_token_search", table_name="fhir_idx_token")
    op.create_index(
        "ix_fhir_idx_token_search", "fhir_idx_token", ["param_key", "code", "patient_key", "system", "rid"]
    )


def downgrade() -> None:
    op.drop_index("ix_fhir_idx_token_search", table_name="fhir_idx_token")
    op.create_index("ix_fhir_idx_token_search", "fhir_idx_token", ["param_key", "code", "system", "rid"])
    with op.batch_alter_table("fhir_idx_token") as batch:
        batch.drop_column("patient_key")
