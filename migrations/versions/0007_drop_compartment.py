"""fhir store: drop fhir_compartment — Patient/$everything reads the compartment off the reference index

Every compartment row repeated a reference row (a compartment parameter pointing at a Patient), so it was
written and indexed twice; search/keys.py `compartment_keys` now finds the same resources in
fhir_idx_reference. The downgrade recreates the table empty: reload to fill it.

Revision ID: 0007_drop_compartment
Revises: 0006_param_keys
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_drop_compartment"
down_revision = "0006_param_keys"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_fhir_compartment_patient", table_name="fhir_compartment")
    op.drop_index("ix_fhir_compartment_rid", table_name="fhir_compartment")
    op.drop_table("fhir_compartment")


def downgrade() -> None:
    op.create_table(
        "fhir_compartment",
        sa.Column("rid", sa.BigInteger(), nullable=False),
        sa.Column("patient_id", sa.String(64), nullable=False),
        sa.Column("res_type", sa.String(64), nullable=False),
    )
    op.create_index("ix_fhir_compartment_rid", "fhir_compartment", ["rid"])
    op.create_index("ix_fhir_compartment_patient", "fhir_compartment", ["patient_id", "res_type", "rid"])
