"""Session searches sorted by date read the patient's own rows, on both databases.

`Observation?patient=<id>&_sort=-date` in a session once read every Observation of the store on SQLite (the
session's OR kept the planner from reading the (type, session, deleted) index by rid) and looked each match's
sort date up among ALL the parameter's date rows (the search index by param_key instead of the rid index):
11 s to 542 s a search on the mapped demo. The plans are asserted here, on a store of many patients where
reading everything would be the wrong plan, and the answers are checked against the data.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from services.fhir_api.store import engine as search_engine
from services.fhir_api.store import query as q
from services.fhir_api.store.interface import Context, SearchRequest
from tests.wiring import load_on

PATIENTS, PER_PATIENT = 40, 60
START = datetime(2150, 1, 1, tzinfo=UTC)


def _observation(patient: int, n: int) -> dict:
    return {
        "resourceType": "Observation",
        "id": f"obs-{patient}-{n}",
        "status": "final",
        "code": {"coding": [{"system": "urn:lab", "code": str(n % 7)}]},
        "subject": {"reference": f"Patient/p{patient}"},
        "effectiveDateTime": (START + timedelta(hours=n * 5 + patient)).isoformat(),
    }


@pytest.fixture
def many(store, database_url, tmp_path):
    patients = [{"resourceType": "Patient", "id": f"p{i}"} for i in range(PATIENTS)]
    observations = [_observation(p, n) for p in range(PATIENTS) for n in range(PER_PATIENT)]
    (tmp_path / "Patient.ndjson").write_text("\n".join(json.dumps(x) for x in patients))
    (tmp_path / "Observation.ndjson").write_text("\n".join(json.dumps(x) for x in observations))
    assert load_on(database_url, tmp_path, workers=1).errors == 0
    if store.engine.dialect.name == "postgresql":
        with store.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))
    return store


def _plan(store, ctx: Context, params: list[tuple[str, str]]) -> str:
    """The database's plan for the page statement of this search, as text."""
    request = SearchRequest("Observation", params, count=50)
    plan = q.plan_params("Observation", params, ctx, False)
    with store.engine.connect() as conn:
        stmt = search_engine._template(conn.dialect, ctx, request, plan, False).page
        compiled = stmt.compile(dialect=conn.dialect)
        values = compiled.construct_params(
            {**plan.values, **q.context_values(ctx), "page_limit": 51, "page_offset": 0}
        )
        if conn.dialect.name == "sqlite":
            args = tuple(values[name] for name in compiled.positiontup)
            rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + compiled.string, args).all()
            return "\n".join(row[3] for row in rows)
        rows = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + compiled.string, values).all()
        return json.dumps(rows[0][0])


def _nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


@pytest.mark.parametrize("clock", [None, START + timedelta(days=5)])
def test_session_search_sorted_by_date_reads_the_patients_rows(many, clock) -> None:
    store = many
    ctx = store.get_session(store.create_session(clock))
    params = [("patient", "p7"), ("_sort", "-date")]
    found = store.search(ctx, SearchRequest("Observation", params, count=50)).matches
    expected = sorted(
        (
            o
            for o in (_observation(7, n) for n in range(PER_PATIENT))
            if clock is None or datetime.fromisoformat(o["effectiveDateTime"]) <= clock
        ),
        key=lambda o: o["effectiveDateTime"],
        reverse=True,
    )[:50]
    assert [s.id for s in found] == [o["id"] for o in expected] and found
    plan = _plan(store, ctx, params)
    if store.engine.dialect.name == "sqlite":
        lines = plan.splitlines()
        # the current rows: by the index, for the rids of the patient's reference rows, in both sessions
        assert any(line.startswith("SEARCH r USING INDEX") and "rowid=?" in line for line in lines), plan
        assert not any(line.startswith("SCAN r") or line.endswith("(res_type=?)") for line in lines), plan
        # each match's sort date: its own rows by rid, never the parameter's every row
        dates = [line for line in lines if "fhir_idx_date" in line]
        assert dates and all("ix_fhir_idx_date_rid (rid=?)" in line for line in dates), plan
    else:
        nodes = list(_nodes(json.loads(plan)[0]["Plan"]))
        resource = [n for n in nodes if n.get("Relation Name") == "fhir_resource" and n.get("Alias") == "r"]
        assert resource and all(n["Node Type"] != "Seq Scan" for n in resource), plan
        assert all("rid" in (n.get("Index Cond") or "") for n in resource), plan
        dates = [n for n in nodes if n.get("Relation Name") == "fhir_idx_date"]
        assert dates and all(n.get("Index Name") == "ix_fhir_idx_date_rid" for n in dates), plan


def test_sorted_session_pages_walk_the_patients_rows_in_order(many) -> None:
    """Cursor pages of the sorted session search use the same keys and give every match once."""
    store = many
    ctx = store.get_session(store.create_session(None))
    seen: list[str] = []
    request = SearchRequest("Observation", [("patient", "p3"), ("_sort", "date")], count=25)
    while True:
        result = store.search(ctx, request)
        seen += [s.id for s in result.matches]
        if not result.has_next:
            break
        from services.fhir_api.store import cursor

        request.cursor = cursor.decode("after", result.last_cursor)
        request.snapshot = result.snapshot
    assert seen == [f"obs-3-{n}" for n in range(PER_PATIENT)]


PATIENT_SEARCHES = [  # each filter of a patient's search, alone and together (issue 43)
    [("patient", "p7"), ("date", "ge2150-01-05")],
    [("patient", "p7"), ("date", "lt2150-01-05"), ("_sort", "-date")],
    [("patient", "p7"), ("code", "urn:lab|1,urn:lab|2,3")],
    [("patient", "p7"), ("code", "urn:lab|1,urn:lab|")],  # a system-only value: no code to range over
    [("patient", "p7"), ("code:not", "urn:lab|1"), ("date", "ge2150-01-03")],
    [("patient", "Patient/p7"), ("code", "urn:lab|4,urn:lab|5"), ("date", "ge2150-01-02"), ("_sort", "date")],
    [("subject", "Patient/p7"), ("status", "final"), ("date", "le2150-01-09")],
    [("code", "urn:lab|1,urn:lab|2"), ("date", "ge2150-01-03")],  # no patient: nothing drives
]


def _answers(store, ctx: Context) -> list[list[str]]:
    search_engine._TEMPLATES.clear()
    return [[s.id for s in store.search(ctx, SearchRequest("Observation", p, count=500)).matches]
            for p in PATIENT_SEARCHES]


@pytest.mark.parametrize("clock", [None, START + timedelta(days=5)])
def test_patient_searches_answer_as_without_the_driver(many, clock, monkeypatch) -> None:
    """Probing the other filters on the patient's rows gives the rows intersecting every filter's own rid
    set gave (the filters' answers, compared against the plans without a driving filter)."""
    store = many
    ctx = store.get_session(store.create_session(clock)) if clock else Context()
    driven = _answers(store, ctx)
    assert all(driven[:-1]) and driven[-1]
    plan_params = q.plan_params

    def undriven(*args, **kwargs):
        plan = plan_params(*args, **kwargs)
        for f in plan.filters:
            f.drives = False
        return plan

    monkeypatch.setattr(search_engine.q, "plan_params", undriven)
    assert _answers(store, ctx) == driven
    monkeypatch.undo()
    search_engine._TEMPLATES.clear()


def test_a_patients_date_and_codes_are_read_off_the_patients_rows(many) -> None:
    """patient + date + several codes: the date rows are probed by rid (never every patient's date rows by
    the parameter's key) and the codes read as ranges of the token index (code, patient) — not every row of
    the parameter as an OR of (system, code) pairs reads them."""
    store = many
    params = [("patient", "p7"), ("code", "urn:lab|1,urn:lab|2"), ("date", "ge2150-01-02")]
    plan = _plan(store, Context(), params)
    if store.engine.dialect.name == "sqlite":
        lines = plan.splitlines()
        dates = [line for line in lines if "fhir_idx_date" in line]
        assert dates and all("ix_fhir_idx_date_rid (rid=?)" in line for line in dates), plan
        tokens = [line for line in lines if "fhir_idx_token" in line]
        assert tokens and all("code=?" in line for line in tokens), plan
    else:
        nodes = list(_nodes(json.loads(plan)[0]["Plan"]))
        dates = [n for n in nodes if n.get("Relation Name") == "fhir_idx_date"]
        assert dates and all(n.get("Index Name") == "ix_fhir_idx_date_rid" for n in dates), plan
        tokens = [n for n in nodes if n.get("Index Name", "").startswith("ix_fhir_idx_token")]
        assert tokens and all("code" in n.get("Index Cond", "") for n in tokens), plan
        assert all("patient_key" in n["Index Cond"] for n in tokens), plan
