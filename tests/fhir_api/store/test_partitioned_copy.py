"""benchmarks/bench_partition.py compares like with like: a partitioned copy of the store's large tables
(benchmarks/partition_copies.py) answers the benchmark's requests — the patient-scoped search mix,
`$everything`, type-wide searches — with exactly the matches, in the same order, of the plain tables; the
store really reads the copy; and the copies are dropped afterwards."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from benchmarks import partition_copies as pc
from benchmarks.bench_partition import differences, open_store_on, requests, seeded_patients
from tests.fhir_api.store_fixtures import loaded_url

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # a real server and the mapped demo


@pytest.fixture(scope="module", params=["postgres"])
def demo_url(request, demo_ndjson, tmp_path_factory, postgres_server) -> str:
    folder, kept, _ = demo_ndjson
    return loaded_url(request, tmp_path_factory, folder, "partitioned_copy", len(kept))


def answers(url: str, schema: str | None, patients: list[str]) -> dict[str, list[str]]:
    store = open_store_on(url, schema)
    try:
        return {label: call() for calls in requests(store, patients).values() for label, call in calls}
    finally:
        store.engine.dispose()


@pytest.mark.parametrize("layout", ["type", "patient-hash"])
def test_partitioned_copy_answers_like_the_plain_tables(demo_url: str, layout: str) -> None:
    admin = create_engine(demo_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            large = pc.large_tables(pc.table_sizes(conn), 0.03)
            tables = pc.copied_tables(layout, large)
            built = pc.build_copy(conn, layout, tables, parts=4)
        assert {"fhir_idx_token", "fhir_idx_reference"} <= set(tables)
        assert all(b.partitions > 1 and b.bytes > 0 for b in built)
        patients = seeded_patients(demo_url, 5)
        plain = answers(demo_url, None, patients)
        copy = answers(demo_url, pc.schema_of(layout), patients)
        assert differences(plain, copy) == []
        assert sum(1 for ids in plain.values() if ids) >= len(plain) * 0.7  # the comparison is not vacuous
        assert all(plain[f"Patient/{pid}/$everything"] for pid in patients)

        # the store reads the copy: a row removed from the copy only is missing from its answers
        label = next(label for label in plain if label.endswith("$everything"))
        pid = label.split("/")[1]
        copy_refs = f'"{pc.schema_of(layout)}".fhir_idx_reference'
        with admin.connect() as conn:
            conn.execute(text(f"DELETE FROM {copy_refs} WHERE target_id = :p"), {"p": pid})
        changed = answers(demo_url, pc.schema_of(layout), [pid])
        assert changed[label] != plain[label]
    finally:
        with admin.connect() as conn:
            pc.drop_copies(conn)
            left = conn.execute(text("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'pgpart%'"))
            left = left.scalar()
        admin.dispose()
    assert left == 0


def test_unique_indexes_hold_the_partition_key() -> None:
    scheme = pc.Scheme("list", "res_type")
    plain = "CREATE UNIQUE INDEX fhir_resource_pkey ON public.fhir_resource USING btree (rid)"
    assert pc.index_on_copy(plain, "fhir_resource", "s", scheme) == (
        'CREATE UNIQUE INDEX fhir_resource_pkey ON "s".fhir_resource USING btree (rid, res_type)')
    keyed = "CREATE UNIQUE INDEX k ON public.fhir_resource USING btree (session, res_type, res_id)"
    assert pc.index_on_copy(keyed, "fhir_resource", "s", scheme).endswith("(session, res_type, res_id)")
    covering = ("CREATE INDEX ix ON public.fhir_idx_token USING btree (param_key, code, patient_key) "
                "INCLUDE (system, rid, since, until)")
    assert pc.index_on_copy(covering, "fhir_idx_token", "s", pc.Scheme("hash", "patient_key")) == (
        covering.replace("public.", '"s".'))


def test_unknown_layout_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown layout 'by-ward'"):
        pc.copied_tables("by-ward", ["fhir_resource"])
