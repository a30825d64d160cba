"""The fhir store's migrations on stores that already hold rows, up, down and up again: 0006/0007 (keys
filled in, compartment table gone), 0009 (search b-tree layouts), 0010 (slim index rows), 0011
(`_lastUpdated` rows), 0012 (bytewise key columns). Schemas as the database reports them; rows and the
store's search answers kept."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, select, text
from sqlalchemy.exc import IntegrityError

from rounds.migrate import alembic_config, upgrade
from services.fhir_api.search.keys import param_key
from services.fhir_api.search.values import to_us
from services.fhir_api.store import models as m
from services.fhir_api.store.interface import Context, SearchRequest
from tests.wiring import store_on

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> str:
    """Both backends, and on PostgreSQL an empty database (tests/conftest.py's is at head already)."""
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "empty_postgres_url")

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


# -- 0009 and 0012: schema as the database reports it, data and searches across down and up ---------------

KINDS = ("token", "string", "date", "number", "quantity", "reference", "uri")
SHARED = Context()
# ix_fhir_idx_<kind>_search as 0008 left it: every column sorted, rid last
SORTED_0008 = {
    "token": ["param_key", "code", "patient_key", "system", "rid"],
    "string": ["param_key", "norm", "rid"],
    "date": ["param_key", "low", "high", "rid"],
    "number": ["param_key", "value", "rid"],
    "quantity": ["param_key", "code", "value", "rid"],
    "reference": ["param_key", "target_id", "target_type", "rid"],
    "uri": ["param_key", "value", "rid"],
}
# and as 0009 makes it: the compared values sorted, the rest INCLUDEd (PostgreSQL; SQLite keeps the sorted)
SORTED_0009 = {
    "token": (["param_key", "code", "patient_key"], ["system", "rid"]),
    "string": (["param_key", "norm"], ["rid"]),
    "date": (["param_key", "low", "high"], ["rid"]),
    "number": (["param_key", "value"], ["rid"]),
    "quantity": (["param_key", "code", "value"], ["rid"]),
    "reference": (["param_key", "target_id"], ["target_type", "rid"]),
    "uri": (["param_key", "value"], ["rid"]),
}
SEARCHES = (  # every index table, the INCLUDE columns filtered on, the resource row's own columns: ids found
    ("Patient", ("gender", "female"), ["p1", "p2"]),
    ("Patient", ("family", "mül"), ["p1", "P2"]),
    ("Patient", ("birthdate", "ge1985"), ["P2", "p2"]),
    ("Patient", ("_profile", "http://example.org/fhir/p"), ["p1", "P2"]),
    ("Patient", ("_sort", "-_id"), ["p2", "p1", "P2"]),  # bytes: upper case first
    ("Observation", ("code", "urn:lab|hgb"), ["o1", "O2"]),
    ("Observation", ("code", "other|hgb"), []),
    ("Observation", ("subject:Patient", "p1"), ["o1", "O2"]),
    ("Observation", ("subject:Group", "p1"), []),
    ("Observation", ("patient", "p2"), ["o3"]),
    ("Observation", ("value-quantity", "gt11"), ["O2"]),
    ("Observation", ("date", "lt2150-01-02"), ["o1"]),
    ("Observation", ("_lastUpdated:missing", "false"), ["o1", "O2", "o3"]),
    ("Observation", ("_id", "o1,o3"), ["o1", "o3"]),
)
EXPECTED = [found for _, _, found in SEARCHES]


def _write(url: str) -> None:
    """Two patients and three observations through the store, with ids that sort differently by locale."""
    store = store_on(url)
    for pid, family, gender, born in (("p1", "Müller", "female", "1980"), ("P2", "Mull", "male", "1990")):
        body = {"resourceType": "Patient", "name": [{"family": family}], "gender": gender, "birthDate": born}
        store.create(SHARED, {**body, "meta": {"profile": ["http://example.org/fhir/p"]}}, id=pid)
    store.create(SHARED, {"resourceType": "Patient", "gender": "female", "birthDate": "2000"}, id="p2")
    for oid, patient, code, value, when in (
        ("o1", "p1", "hgb", 10.0, "2150-01-01"),
        ("O2", "p1", "hgb", 12.5, "2150-01-03"),
        ("o3", "p2", "k", 4.1, "2150-01-02"),
    ):
        observation = {
            "resourceType": "Observation",
            "status": "final",
            "code": {"coding": [{"system": "urn:lab", "code": code}]},
            "subject": {"reference": f"Patient/{patient}"},
            "effectiveDateTime": when,
            "valueQuantity": {"value": value, "system": "http://unitsofmeasure.org", "code": "g/dL"},
        }
        store.create(SHARED, observation, id=oid)
    store.engine.dispose()


def _answers(url: str) -> list[list[str]]:
    """The ids each of SEARCHES finds, in the order the store gives them (the store reads 0008's schema too:
    it differs from the head's only in index layouts, extra columns and `_lastUpdated` date rows)."""
    store = store_on(url)
    found = [
        [r.id for r in store.search(SHARED, SearchRequest(rtype, [param])).matches]
        for rtype, param, _ in SEARCHES
    ]
    store.engine.dispose()
    return found


def _rows(url: str) -> dict[str, list[tuple]]:
    """Every stored row of the resource, version and index tables, as the head's columns read them."""
    engine = create_engine(url)
    inspector = inspect(engine)
    with engine.connect() as conn:
        rows = {}
        for table in (m.version, m.resource, *m.INDEX_TABLES.values()):
            there = {c["name"] for c in inspector.get_columns(table.name)}  # older revisions lack some
            columns = [c for c in table.columns if c.name in there]
            rows[table.name] = sorted(map(tuple, conn.execute(select(*columns))), key=repr)
    engine.dispose()
    return rows


def _search_indexes(url: str) -> dict[str, tuple[list[str], list[str]]]:
    """(sorted columns, INCLUDE columns) of each index table's search b-tree, from the database."""
    engine = create_engine(url)
    inspector = inspect(engine)
    found = {}
    for kind in KINDS:
        (index,) = (
            i for i in inspector.get_indexes(f"fhir_idx_{kind}") if i["name"] == f"ix_fhir_idx_{kind}_search"
        )
        found[kind] = (index["column_names"], index.get("dialect_options", {}).get("postgresql_include", []))
    engine.dispose()
    return found


def test_index_include_goes_down_and_up_with_data_and_searches_unchanged(database_url) -> None:
    """0009 moves rid (and token system, reference target type) out of the b-trees' sort keys; down puts
    them back as 0008 had them. Resources written at the head are carried down to 0008 and up again."""
    postgres = database_url.startswith("postgresql")
    at_0008 = {kind: (columns, []) for kind, columns in SORTED_0008.items()}
    at_0009 = {k: (columns, include if postgres else []) for k, (columns, include) in SORTED_0009.items()}
    clock = ["since", "until"] if postgres else []  # 0014 carries the index rows' clock span along
    at_head = {k: (columns, include + clock) for k, (columns, include) in at_0009.items()}
    config = alembic_config(database_url)
    upgrade(database_url)
    _write(database_url)
    rows = _rows(database_url)
    assert _answers(database_url) == EXPECTED
    assert _search_indexes(database_url) == at_head
    command.downgrade(config, "0008_token_patient_key")
    assert _search_indexes(database_url) == at_0008
    assert _answers(database_url) == EXPECTED
    upgrade(database_url, "0009_index_include")
    assert _search_indexes(database_url) == at_0009
    assert _answers(database_url) == EXPECTED
    command.downgrade(config, "0008_token_patient_key")
    assert _search_indexes(database_url) == at_0008
    upgrade(database_url)
    assert _search_indexes(database_url) == at_head
    assert _answers(database_url) == EXPECTED and _rows(database_url) == rows


def _key_collations(url: str) -> set[str | None]:
    """The collations PostgreSQL reports for the resource and version keys' columns (None: the database's)."""
    engine = create_engine(url)
    with engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT table_name, column_name, collation_name FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND table_name IN ('fhir_version', 'fhir_resource')"
                " AND column_name IN ('session', 'res_type', 'res_id')"
            )
        ).all()
    engine.dispose()
    assert len(found) == 6
    return {collation for _, _, collation in found}


DUPLICATES = (  # a second row under a stored key, in each table
    "INSERT INTO fhir_resource (session, res_type, res_id, version, seq, created_seq, last_updated, deleted)"
    " SELECT session, res_type, res_id, 9, seq, seq, last_updated, deleted FROM fhir_resource"
    " WHERE res_id = 'p1'",
    "INSERT INTO fhir_version (session, res_type, res_id, version, last_updated, method, deleted, raw)"
    " SELECT session, res_type, res_id, version, last_updated, method, deleted, raw FROM fhir_version"
    " WHERE res_id = 'p1'",
)


def _keys_hold(url: str) -> bool:
    """The unique keys still refuse a second row for a stored (session, type, id[, version])."""
    engine = create_engine(url)
    refused = 0
    for statement in DUPLICATES:
        try:
            with engine.begin() as conn:
                conn.execute(text(statement))
        except IntegrityError:
            refused += 1
    engine.dispose()
    return refused == len(DUPLICATES)


def test_key_columns_bytewise_goes_down_and_up_with_data_and_searches_unchanged(database_url) -> None:
    """0012 makes session/res_type/res_id COLLATE "C" on PostgreSQL (SQLite compares bytes already: a no-op);
    down gives them the database's collation again. Resources are written at 0011."""
    postgres = database_url.startswith("postgresql")
    config = alembic_config(database_url)
    upgrade(database_url)
    _write(database_url)  # at the head (the store writes the head's columns), carried down
    command.downgrade(config, "0011_last_updated_rows")
    rows = _rows(database_url)
    if postgres:
        assert _key_collations(database_url) == {None}
    for move, revision, collations in (
        (command.upgrade, "0012_key_columns_bytewise", {"C"}),
        (command.downgrade, "0011_last_updated_rows", {None}),
        (command.upgrade, "0012_key_columns_bytewise", {"C"}),
    ):
        move(config, revision)
        if postgres:
            assert _key_collations(database_url) == collations
        assert _answers(database_url) == EXPECTED and _rows(database_url) == rows
        assert _keys_hold(database_url)


@pytest.fixture
def icu_postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh PostgreSQL database whose default collation is ICU's root locale (`p1` < `P2`, not bytes)."""
    name = f"t_icu_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if int(conn.execute(text("SHOW server_version_num")).scalar_one()) < 150000:
            pytest.skip("a database with an ICU default collation needs PostgreSQL 15")
        conn.execute(
            text(f"CREATE DATABASE \"{name}\" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'und'")
        )
    yield f"{postgres_server.rpartition('/')[0]}/{name}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def test_key_columns_bytewise_sort_ids_by_bytes_under_a_locale(icu_postgres_url) -> None:
    """Where the database's collation is not bytewise, 0012 turns `_sort=_id` into byte order, and down
    turns it back."""
    url, config = icu_postgres_url, alembic_config(icu_postgres_url)
    upgrade(url)
    _write(url)
    command.downgrade(config, "0011_last_updated_rows")
    by_locale, by_bytes = ["P2", "p2", "p1"], ["p2", "p1", "P2"]  # _sort=-_id
    descending = SEARCHES.index(("Patient", ("_sort", "-_id"), by_bytes))
    assert _answers(url)[descending] == by_locale
    for move, revision, order in (
        (command.upgrade, "0012_key_columns_bytewise", by_bytes),
        (command.downgrade, "0011_last_updated_rows", by_locale),
        (command.upgrade, "0012_key_columns_bytewise", by_bytes),
    ):
        move(config, revision)
        answers = _answers(url)
        assert answers.pop(descending) == order
        assert answers == EXPECTED[:descending] + EXPECTED[descending + 1 :]
