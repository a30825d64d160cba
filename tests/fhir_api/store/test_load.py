"""Bulk load: bytes kept, indexes filled, idempotent, resumable after a crash, gz, bad lines."""

from __future__ import annotations

import gzip
import json
import tarfile

import orjson
import pytest

import services.fhir_api.load as loader
from services.fhir_api.store.interface import Context, SearchRequest
from tests.wiring import load_on

SHARED = Context()


def _write_folder(tmp_path, n: int = 25):
    folder = tmp_path / "ndjson"
    folder.mkdir()
    patients = [
        {
            "resourceType": "Patient",
            "id": f"p{i}",
            "meta": {"profile": ["http://x/p"]},
            "gender": "female",
            "identifier": [{"system": "urn:mrn", "value": str(i)}],
        }
        for i in range(n)
    ]
    # odd spacing and a decimal with trailing zero must survive byte-for-byte
    lines = [orjson.dumps(p) for p in patients]
    lines[0] = (
        b'{"resourceType":"Patient","id":"p0","gender":"female","multipleBirthInteger":2,  "x_note":1.50}'
    )
    (folder / "MimicPatient.ndjson").write_bytes(b"\n".join(lines) + b"\n")
    obs = [
        orjson.dumps(
            {
                "resourceType": "Observation",
                "id": f"o{i}",
                "status": "final",
                "code": {"coding": [{"system": "urn:lab", "code": "k"}]},
                "subject": {"reference": f"Patient/p{i % n}"},
                "effectiveDateTime": f"2150-01-{i % 28 + 1:02d}",
                "valueQuantity": {"value": 4.10, "unit": "mEq/L"},
            }
        )
        for i in range(3 * n)
    ]
    with gzip.open(folder / "MimicObservationLabevents.ndjson.gz", "wb") as fh:
        fh.write(b"\n".join(obs) + b'\nnot json\n{"resourceType": "Patient"}\n')
    return folder, lines[0]


def test_load_is_idempotent_and_indexed(store, tmp_path, database_url) -> None:
    folder, first_line = _write_folder(tmp_path)
    report = load_on(database_url, folder, workers=2)
    assert (report.resources, report.skipped, report.errors) == (100, 0, 2)
    assert [e.split(": ")[0] for e in report.error_samples] == [  # each bad line named by file and line
        "MimicObservationLabevents.ndjson.gz:76",
        "MimicObservationLabevents.ndjson.gz:77",
    ]
    assert report.error_samples[1].endswith("KeyError: 'id'")
    assert report.resources_per_s > 0 and report.files == [
        "MimicObservationLabevents.ndjson.gz",
        "MimicPatient.ndjson",
    ]
    raw = store.read(SHARED, "Patient", "p0").raw
    assert first_line[1:] in raw and b'"versionId":"1"' in raw  # original bytes kept, meta added
    assert orjson.loads(store.read(SHARED, "Patient", "p1").raw)["meta"]["profile"] == ["http://x/p"]
    found = store.search(
        SHARED, SearchRequest("Observation", [("patient", "p3"), ("code", "urn:lab|k")], total="accurate")
    )
    assert found.total == 3
    assert len(store.everything(SHARED, "p3").matches) == 4

    again = load_on(database_url, folder, workers=1)
    assert (again.resources, again.skipped) == (0, 100)
    assert store.search(SHARED, SearchRequest("Observation", [], total="accurate")).total == 75


def test_load_resumes_after_a_crash(store, tmp_path, database_url, monkeypatch) -> None:
    folder, _ = _write_folder(tmp_path)
    monkeypatch.setattr(loader, "BATCH", 10)
    real_write, calls = loader._write, []

    def crashing(conn, items, when, **kw):
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("killed")
        return real_write(conn, items, when, **kw)

    monkeypatch.setattr(loader, "_write", crashing)
    with pytest.raises(RuntimeError):
        load_on(database_url, folder, workers=1)
    monkeypatch.setattr(loader, "_write", real_write)
    partial = store.search(SHARED, SearchRequest("Observation", [], total="accurate")).total
    assert partial == 30  # three whole batches committed, the fourth rolled back
    report = load_on(database_url, folder, workers=1)
    assert (report.resources, report.skipped) == (70, 30)
    assert store.search(SHARED, SearchRequest("Observation", [], total="accurate")).total == 75
    assert store.search(SHARED, SearchRequest("Patient", [], total="accurate")).total == 25


def test_loaded_rows_work_with_sessions_and_updates(store, tmp_path, database_url) -> None:
    folder, _ = _write_folder(tmp_path, n=3)
    load_on(database_url, folder, workers=1)
    ctx = store.get_session(store.create_session(None))
    body = orjson.loads(store.read(SHARED, "Patient", "p1").raw)
    updated, _ = store.update(ctx, "Patient", "p1", {**body, "gender": "male"})
    assert updated.version_id == 2
    created = store.create(SHARED, {"resourceType": "Patient", "gender": "other"})  # sequences still fine
    assert store.read(SHARED, "Patient", created.id).version_id == 1


def test_rounds_load_cli(tmp_path, sqlite_url) -> None:
    from typer.testing import CliRunner

    from rounds.cli import app

    folder, _ = _write_folder(tmp_path, n=4)
    result = CliRunner().invoke(
        app, ["load", "--ndjson", str(folder), "--database-url", sqlite_url, "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    assert "loaded 16 resources (0 already present, 2 errors)" in result.output
    again = CliRunner().invoke(
        app, ["load", "--ndjson", str(folder), "--database-url", sqlite_url, "--no-progress"]
    )
    assert "loaded 0 resources (16 already present" in again.output
    missing = CliRunner().invoke(
        app, ["load", "--ndjson", str(tmp_path / "nope"), "--database-url", sqlite_url]
    )
    assert missing.exit_code != 0


def test_initial_postgres_load_rebuilds_every_index_and_reports_phases(tmp_path, postgres_url) -> None:
    from sqlalchemy import create_engine, inspect

    from rounds.migrate import upgrade
    from services.fhir_api.load_postgres import REBUILT

    upgrade(postgres_url)
    folder, _ = _write_folder(tmp_path)
    report = load_on(postgres_url, folder, workers=2)
    assert report.resources == 100 and set(report.phases) == set(loader.PHASES)
    assert all(report.phases[p] > 0 for p in ("parse+extract", "copy", "index build", "analyze"))
    engine = create_engine(postgres_url)
    inspector = inspect(engine)
    assert "ix_fhir_resource_type_session" in {i.name for t in REBUILT for i in t.indexes}
    for table in REBUILT:  # dropped for the initial load, built again at its end
        assert {i.name for i in table.indexes} <= {i["name"] for i in inspector.get_indexes(table.name)}
    keys = {c["name"]: c["column_names"] for c in inspector.get_unique_constraints("fhir_resource")}
    assert keys == {"uq_fhir_resource_key": ["session", "res_type", "res_id"]}  # deferred, then built
    engine.dispose()
    again = load_on(postgres_url, folder, workers=2)
    assert again.phases["index build"] < report.phases["index build"] and again.phases["analyze"] == 0


def test_initial_postgres_load_yields_to_a_writer_that_came_first(
    tmp_path, postgres_url, monkeypatch
) -> None:
    """During an initial load the shared record's key is not there (built at the end): the version key is
    what stops the loader from writing a second Patient/p3 beside one the API created meanwhile."""
    from rounds.migrate import upgrade
    from tests.wiring import store_on

    upgrade(postgres_url)
    api = store_on(postgres_url)
    folder, _ = _write_folder(tmp_path)
    real_write = loader._write

    def api_first(conn, items, when, **kw):
        if any(item[:2] == ("Patient", "p3") for item in items) and kw.get("check") is False:
            api.update(SHARED, "Patient", "p3", {"resourceType": "Patient", "id": "p3", "gender": "other"})
        return real_write(conn, items, when, **kw)

    monkeypatch.setattr(loader, "_write", api_first)
    report = load_on(postgres_url, folder, workers=1)
    assert (report.resources, report.skipped) == (99, 1)
    assert orjson.loads(api.read(SHARED, "Patient", "p3").raw)["gender"] == "other"
    found = api.search(SHARED, SearchRequest("Patient", [("_id", "p3")], total="accurate"))
    assert found.total == 1
    api.engine.dispose()


def test_autovacuum_waits_for_the_end_of_an_initial_load(tmp_path, postgres_url, monkeypatch) -> None:
    """Autovacuum is off on the loaded tables while an initial load writes (it would vacuum and sample them
    between chunks) and back on after (the load ANALYZEs them itself)."""
    from sqlalchemy import create_engine, text

    from rounds.migrate import upgrade

    upgrade(postgres_url)
    folder, _ = _write_folder(tmp_path)
    engine = create_engine(postgres_url)
    options = text("SELECT reloptions FROM pg_class WHERE relname = 'fhir_idx_token'")
    seen, real_write = [], loader._write

    def peek(conn, items, when, **kw):
        with engine.connect() as other:
            seen.append(other.execute(options).scalar_one())
        return real_write(conn, items, when, **kw)

    monkeypatch.setattr(loader, "_write", peek)
    load_on(postgres_url, folder, workers=1)
    assert seen and all(o == ["autovacuum_enabled=false"] for o in seen)
    with engine.connect() as conn:
        assert conn.execute(options).scalar_one() is None
    engine.dispose()


def test_initial_load_with_a_line_repeated_in_a_later_batch(
    store, tmp_path, database_url, monkeypatch
) -> None:
    """An initial PostgreSQL load writes without asking what is stored: the repeat trips the version key and
    its batch is written again, checked (SQLite checks every batch)."""
    monkeypatch.setattr(loader, "BATCH", 10)
    folder = tmp_path / "dup"
    folder.mkdir()
    lines = [orjson.dumps({"resourceType": "Patient", "id": f"p{i}", "gender": "male"}) for i in range(15)]
    (folder / "MimicPatient.ndjson").write_bytes(b"\n".join([*lines, lines[3], lines[12]]) + b"\n")
    report = load_on(database_url, folder, workers=1)
    assert (report.resources, report.skipped, report.errors) == (15, 2, 0)
    found = store.search(SHARED, SearchRequest("Patient", [("gender", "male")], total="accurate"))
    assert found.total == 15
    assert store.read(SHARED, "Patient", "p3").version_id == 1


def test_generated_extractors_equal_the_interpreted_plan(shared_data) -> None:
    """Bulk load's fused per-shape extractors (search/codegen.py) give the interpreted plan's rows, in order,
    for every HL7 R4 example of a served type (every parameter shape the spec's examples exercise)."""
    from services.fhir_api.search.extract import index_tuples, interpreted_index_tuples
    from services.fhir_api.search.registry import resource_types

    types, checked, rows = set(resource_types()), 0, 0
    with tarfile.open(shared_data / "fhir-r4-examples/hl7.fhir.r4.examples-4.0.1.tgz") as tar:
        for member in tar.getmembers():
            name = member.name.rsplit("/", 1)[-1]
            if not name.endswith(".json") or name.split("-")[0] not in types:
                continue
            doc = json.load(tar.extractfile(member))
            if doc.get("resourceType") not in types:
                continue
            stamped = {**doc, "meta": {**doc.get("meta", {}), "versionId": "1", "lastUpdated": "2150-01-01Z"}}
            for resource, named in ((doc, True), (stamped, False)):  # named, and as the store and loader
                expected = interpreted_index_tuples(resource, named)
                assert index_tuples(resource, named) == expected, (name, named)
            checked += 1
            rows += sum(map(len, expected.values()))
    assert checked > 250 and rows > 8 * checked


def test_instant_fast_path_equals_date_range() -> None:
    """date_range's direct parse of 'YYYY-MM-DDThh:mm:ss±hh:mm' gives the pattern's answer, including None."""
    import random

    from services.fhir_api.search.values import date_range, date_range_by_pattern

    edges = [
        "2150-02-29T10:00:00-05:00",  # not a leap year
        "2148-02-29T23:59:59+14:00",
        "2150-13-01T00:00:00+00:00",
        "2150-01-01T24:00:00+00:00",
        "2150-01-01T00:60:00-04:00",
        "2150-01-01T00:00:60-04:00",
        "2150-01-01T00:00:00+05:99",
        "0001-01-01T00:00:00+01:00",  # left to the pattern (overflow territory)
        "9999-12-31T23:59:59-01:00",
        "2150-01-0١T00:00:00+00:00",  # a non-ASCII digit
        " 2150-01-01T00:00:00+00:00",
        "2150-01-01T00:00:00Z",
        "2150-01-01T00:00:00.5+00:00",
        "2150-01-01",
        "2150-01-01T00:00:00+0000",
    ]
    rng = random.Random(4)
    fuzz = [
        f"{rng.randint(1, 9999):04d}-{rng.randint(0, 13):02d}-{rng.randint(0, 32):02d}"
        f"T{rng.randint(0, 25):02d}:{rng.randint(0, 61):02d}:{rng.randint(0, 61):02d}"
        f"{rng.choice('+-')}{rng.randint(0, 15):02d}:{rng.choice((0, 30, 45, 99)):02d}"
        for _ in range(20000)
    ]

    def outcome(parse, text):
        try:
            return parse(text)
        except OverflowError:  # the pattern's own answer at the end of datetime's range
            return "overflow"

    for text in edges + fuzz:
        assert outcome(date_range, text) == outcome(date_range_by_pattern, text), text
    assert sum(outcome(date_range, t) not in (None, "overflow") for t in fuzz) > 5000


@pytest.mark.parametrize(
    "line",
    [
        b'{"resourceType":"Patient","id":"a","meta":{"profile":["p"]},"gender":"male"}',
        b'{"resourceType":"Patient","id":"a","meta" : {  },"gender":"male"}',  # spaced, empty
        b'{"resourceType":"Patient","id":"meta","meta":{"source":"s"}}',  # "meta" first seen as a value
        b'{"id":"a","resourceType":"Patient","meta" :{"tag":[{"code":"x"}]}}',
        b'{"resourceType":"Patient","gender":"male","meta":{"profile":["p"]}}',  # meta after another key
        b'{"resourceType":"Patient","id":"a","meta":{"versionId":"7","source":"s"}}',  # replaced versionId
        b'{"resourceType":"Patient","id":"a","gender":"male"}',  # no meta
    ],
)
def test_stamping_meta_keeps_the_other_bytes(line) -> None:
    stamp = b'"versionId":"1","lastUpdated":"2150-01-01T00:00:00Z"'
    resource = orjson.loads(line)
    out = loader._with_meta(line, resource, stamp)
    parsed = orjson.loads(out)
    expected = orjson.loads(line)
    expected["meta"] = {**expected.get("meta", {}), "versionId": "1", "lastUpdated": "2150-01-01T00:00:00Z"}
    assert parsed == expected
    if b'"gender":"male"' in line:
        assert b'"gender":"male"' in out
    if line.startswith(b'{"resourceType":"Patient","id":"a","meta" : {'):
        assert out == line.replace(b"{  }", b"{" + stamp + b"  }")  # inserted in place, spacing kept


def test_integer_fast_path_equals_the_decimal_parse() -> None:
    from services.fhir_api.search.extract import _number
    from services.fhir_api.search.values import decimal_range

    for value in (0, 7, -3, 2**53, -(2**53), 2**53 + 1, 10**20, -(10**400), True):
        parsed = decimal_range(str(value)) if not isinstance(value, bool) else None
        assert _number(value) == (parsed[0] if parsed else None), value
