"""Migrations 0006/0007 on a store that already holds index rows: keys filled in, compartment table gone,
and back down again."""

from __future__ import annotations

from datetime import UTC, datetime

from alembic import command
from sqlalchemy import create_engine, inspect, text

from rounds.migrate import alembic_config, upgrade
from services.fhir_api.search.keys import param_key
from services.fhir_api.search.values import to_us

ROWS = (
    "INSERT INTO fhir_idx_token (rid, res_type, param, system, code, text) VALUES"
    " (1, 'Observation', 'code', 'urn:lab', 'hgb', NULL),"
    " (1, 'Observation', 'combo-code', 'urn:lab', 'hgb', NULL)",
    "INSERT INTO fhir_idx_reference (rid, res_type, param, target_type, target_id, url)"
    " VALUES (1, 'Observation', 'subject', 'Patient', 'p1', NULL)",
    "INSERT INTO fhir_compartment (rid, patient_id, res_type) VALUES (1, 'p1', 'Observation')",
)


def test_upgrade_keys_existing_rows_and_downgrade_restores_the_layout(database_url) -> None:
    upgrade(database_url, "0005_fhir_indexes")
    upgrade(database_url, "0004_outbox_tracking")  # the other heads, as a store of that time had them
    engine = create_engine(database_url)
    with engine.begin() as conn:
        for statement in ROWS:
            conn.execute(text(statement))
    upgrade(database_url, "0009_index_include")  # the last revision with named rows
    with engine.connect() as conn:
        keys = conn.execute(text("SELECT param, param_key FROM fhir_idx_token ORDER BY param")).all()
        ref_key = conn.execute(text("SELECT param_key FROM fhir_idx_reference")).scalar_one()
    assert keys == [
        ("code", param_key("Observation", "code")),
        ("combo-code", param_key("Observation", "combo-code")),
    ]
    assert ref_key == param_key("Observation", "subject")
    assert "fhir_compartment" not in inspect(engine).get_table_names()
    command.downgrade(alembic_config(database_url), "0005_fhir_indexes")
    inspector = inspect(engine)
    assert "param_key" not in {c["name"] for c in inspector.get_columns("fhir_idx_token")}
    assert "fhir_compartment" in inspector.get_table_names()
    search = {i["name"]: i["column_names"] for i in inspector.get_indexes("fhir_idx_token")}
    assert search["ix_fhir_idx_token_search"] == ["res_type", "param", "code", "system", "rid"]
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM fhir_idx_token")).scalar_one() == 2
    engine.dispose()


def test_slim_rows_migration_keeps_keys_and_downgrade_names_them_again(database_url) -> None:
    """0010 drops the type/parameter name columns; going down names each row again from its key."""
    upgrade(database_url, "0009_index_include")
    engine = create_engine(database_url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO fhir_idx_token (rid, res_type, param, param_key, system, code, text,"
                " patient_key) VALUES (1, 'Observation', 'code', :k, 'urn:lab', 'hgb', NULL, 0)"
            ),
            {"k": param_key("Observation", "code")},
        )
    upgrade(database_url)
    columns = {c["name"] for c in inspect(engine).get_columns("fhir_idx_token")}
    assert not {"res_type", "param"} & columns and "param_key" in columns
    with engine.connect() as conn:
        assert conn.execute(text("SELECT param_key, code FROM fhir_idx_token")).one() == (
            param_key("Observation", "code"),
            "hgb",
        )
    command.downgrade(alembic_config(database_url), "0009_index_include")
    with engine.connect() as conn:
        row = conn.execute(text("SELECT res_type, param, code FROM fhir_idx_token")).one()
    assert tuple(row) == ("Observation", "code", "hgb")
    engine.dispose()


def test_last_updated_rows_go_and_come_back(database_url) -> None:
    """0011 deletes the `_lastUpdated` date rows (searches read the resource row); down writes them again."""
    upgrade(database_url, "0010_index_rows_slim")
    engine = create_engine(database_url)
    key = param_key("Patient", "_lastUpdated")
    other = param_key("Patient", "birthdate")
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO fhir_resource (rid, session, res_type, res_id, version, seq, created_seq,"
                " last_updated, deleted) VALUES (7, '', 'Patient', 'p', 1, 1, 1, :t, false)"
            ),
            {"t": datetime(2150, 1, 2, 3, 4, 5, tzinfo=UTC)},
        )
        conn.execute(
            text("INSERT INTO fhir_idx_date (rid, param_key, low, high) VALUES (7, :k, 1, 2), (7, :o, 3, 4)"),
            {"k": key, "o": other},
        )
    upgrade(database_url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT param_key FROM fhir_idx_date")).scalars().all()
    assert rows == [other]
    command.downgrade(alembic_config(database_url), "0010_index_rows_slim")
    with engine.connect() as conn:
        low, high = conn.execute(
            text("SELECT low, high FROM fhir_idx_date WHERE param_key = :k"), {"k": key}
        ).one()
    expected = to_us(datetime(2150, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert abs(low - expected) < 100 and high == low + 1
    engine.dispose()
