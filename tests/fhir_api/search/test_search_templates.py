"""Search statements are cached by shape and run with each request's values: a cached statement must answer
exactly what a statement built for the request answers, for every parameter type, prefix, modifier and
context."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rounds.migrate import upgrade
from services.fhir_api.store import connections, engine
from services.fhir_api.store import query as q
from services.fhir_api.store.interface import Context, SearchRequest
from tests.wiring import store_on

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

SHARED = Context()
UCUM = "http://unitsofmeasure.org"


@pytest.fixture
def store(database_url: str):
    upgrade(database_url)
    s = store_on(database_url)
    yield s
    s.engine.dispose()


@pytest.fixture
def record(store):
    return make_record(store)


def make_record(store):
    """Three patients with labs of two codes over three days; a session with a clock and its own write."""
    pids = []
    for i, (family, mrn) in enumerate([("Müller", "A1"), ("Mull", "B2"), ("Smith", "C3")]):
        pids.append(
            store.create(
                SHARED,
                {
                    "resourceType": "Patient",
                    "name": [{"family": family}],
                    "gender": ("female", "male")[i % 2],
                    "birthDate": f"19{80 + i}-05-0{i + 1}",
                    "identifier": [{"system": "urn:mrn", "value": mrn}],
                },
            ).id
        )
    for n, (pid, mrn) in enumerate(zip(pids, ("A1", "B2", "C3"), strict=True)):
        for day in (1, 2, 3):
            for code, value in (("hgb", 10.0 + day + n), ("k", 3.5 + day / 10)):
                store.create(
                    SHARED,
                    {
                        "resourceType": "Observation",
                        "status": "final",
                        "code": {"coding": [{"system": "urn:lab", "code": code}]},
                        "subject": {
                            "reference": f"Patient/{pid}",
                            "identifier": {"system": "urn:mrn", "value": mrn},
                        },
                        "effectiveDateTime": f"2150-01-0{day}T1{n}:00:00Z",
                        "valueQuantity": {"value": value, "system": UCUM, "code": "g/dL"},
                    },
                )
    store.create(
        SHARED, {"resourceType": "Observation", "status": "final", "code": {"coding": [{"code": "gl"}]}}
    )
    session = store.create_session(datetime(2150, 1, 2, 12, tzinfo=UTC))
    ctx = store.get_session(session)
    store.create(ctx, {"resourceType": "Patient", "name": [{"family": "Mueller"}], "gender": "female"})
    return pids, ctx


def families(pids: list[str]) -> list[tuple[str, list[list[tuple[str, str]]]]]:
    """Requests grouped so that each group has few SQL shapes (mostly one) and different values."""
    a, b, c = pids
    return [
        (
            "Observation",
            [
                [("patient", p), ("code", f"urn:lab|{code}"), ("date", f"ge2150-01-0{d}"), ("_sort", "-date")]
                for p in (a, b)
                for code in ("hgb", "k")
                for d in (1, 3)
            ],
        ),
        ("Observation", [[("subject", f"Patient/{p}"), ("code", x)] for p in (a, c) for x in ("hgb", "k")]),
        ("Observation", [[("code", f"|{x}")] for x in ("gl", "k", "none")]),
        ("Observation", [[("code", f"{x}|")] for x in ("urn:lab", "urn:other")]),
        ("Observation", [[("subject:Patient", p)] for p in (a, b)]),
        ("Observation", [[("subject:identifier", f"urn:mrn|{m}")] for m in ("A1", "C3")]),
        (
            "Observation",
            [[("date", f"{p}2150-01-02")] for p in ("eq", "ne", "gt", "lt", "ge", "le", "sa", "eb")],
        ),
        ("Observation", [[("date", f"ap{d}")] for d in ("2150-01-02", "1990-01-01")]),
        ("Observation", [[("value-quantity", v)] for v in ("gt13", "gt11", "lt4", "ge3.7")]),
        ("Observation", [[("value-quantity", v)] for v in ("13", "14", "3.6")]),
        ("Observation", [[("value-quantity", f"ap{v}")] for v in ("12", "4")]),
        ("Observation", [[("value-quantity", f"gt{v}|{UCUM}|g/dL")] for v in ("12", "3")]),
        ("Observation", [[("value-quantity", f"gt{v}||g/dL")] for v in ("12", "3")]),
        ("Observation", [[("code:not", x), ("patient", p)] for x in ("hgb", "k") for p in (a, b)]),
        ("Patient", [[("name", x)] for x in ("mul", "smi", "mü")]),
        ("Patient", [[("name:contains", x)] for x in ("ll", "ith")]),
        ("Patient", [[("name:exact", x)] for x in ("Mull", "Smith")]),
        ("Patient", [[("_id", ",".join(ids))] for ids in ([a], [a, b], [b, c, a])]),
        ("Patient", [[("_id:not", x)] for x in (a, b)]),
        (
            "Patient",
            [[("gender", g), ("birthdate", f"lt19{y}")] for g in ("male", "female") for y in (81, 83)],
        ),
        ("Patient", [[("identifier", x)] for x in ("urn:mrn|A1,urn:mrn|B2", "urn:mrn|C3,urn:mrn|A1")]),
        ("Patient", [[("gender:missing", x)] for x in ("true", "false")]),
    ]


def run(store, ctx: Context, rtype: str, params, **kw) -> tuple:
    with store._conn() as conn:
        result = engine.search(conn, ctx, SearchRequest(rtype, params, **kw))
    return [m.id for m in result.matches], result.total, result.has_next, result.used_params


@pytest.mark.parametrize("context", ["shared", "session"])
def test_a_cached_statement_answers_like_a_fresh_one(store, record, context: str) -> None:
    pids, session = record
    ctx = SHARED if context == "shared" else session
    for rtype, group in families(pids):
        for options in ({}, {"count": 2, "offset": 1, "total": "accurate"}, {"total": "estimate"}):
            fresh = []
            for params in group:
                engine._TEMPLATES.clear()
                fresh.append(run(store, ctx, rtype, params, **options))
            engine._TEMPLATES.clear()
            run(store, ctx, rtype, group[-1], **options)  # the statement now holds the last request's values
            cached = [run(store, ctx, rtype, params, **options) for params in group]
            assert cached == fresh, (rtype, group, options)
            shapes = {q.plan_params(rtype, params, ctx, False).key for params in group}
            assert len(engine._TEMPLATES) == len(shapes), "one statement per shape"
        assert len({str(answer[0]) for answer in fresh}) > 1, f"values not told apart: {group}"


def test_session_clock_and_writes_are_bound_per_context(store, record) -> None:
    pids, session = record
    other = store.get_session(store.create_session(datetime(2150, 1, 3, 23, tzinfo=UTC)))
    params = [("patient", pids[0]), ("code", "hgb")]
    engine._TEMPLATES.clear()
    early = run(store, session, "Observation", params)[0]
    late = run(store, other, "Observation", params)[0]
    assert len(early) == 2 and len(late) == 3  # the clock of each session, with one cached statement
    assert len(engine._TEMPLATES) == 1
    names = [("name", "mue")]
    assert len(run(store, session, "Patient", names)[0]) == 1  # the session's own write
    assert run(store, other, "Patient", names)[0] == []  # not another session's


def test_chains_and_has_are_built_per_request(store, record) -> None:
    pids, _ = record
    engine._TEMPLATES.clear()
    chain = "subject:Patient.identifier"
    by_mrn = [run(store, SHARED, "Observation", [(chain, f"urn:mrn|{m}")]) for m in ("A1", "B2")]
    has = run(store, SHARED, "Patient", [("_has:Observation:subject:code", "hgb"), ("gender", "male")])
    assert {len(by_mrn[0][0]), len(by_mrn[1][0])} == {6} and by_mrn[0][0] != by_mrn[1][0]
    assert has[0] == [pids[1]]
    assert engine._TEMPLATES == {}


@pytest.mark.postgres
def test_driver_rows_equal_sqlalchemy_rows(postgres_url, monkeypatch) -> None:
    """On PostgreSQL prebuilt statements run straight through psycopg; SQLAlchemy would answer the same."""
    from services.fhir_api.store import sql_store

    upgrade(postgres_url)
    store = store_on(postgres_url)
    pids, session = make_record(store)

    def answers() -> list:
        out = []
        for ctx in (SHARED, session):
            for rtype, group in families(pids):
                for params in group:
                    with store._conn() as conn:
                        result = engine.search(conn, ctx, SearchRequest(rtype, params, total="accurate"))
                    out.append((result.matches, result.total, result.has_next, result.snapshot))
            out += [store.read(ctx, "Patient", pid) for pid in pids]
        return out

    engine._TEMPLATES.clear()
    through_driver = answers()
    assert connections._DRIVER_SQL, "the driver path ran"
    via_sqlalchemy = lambda conn, stmt, values, prepare=False: conn.execute(stmt, values).all()  # noqa: E731
    monkeypatch.setattr(engine, "rows_of", via_sqlalchemy)
    monkeypatch.setattr(sql_store, "rows_of", via_sqlalchemy)
    assert answers() == through_driver
    store.engine.dispose()
