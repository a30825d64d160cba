"""On PostgreSQL a search with several plain filters intersects their rid sets as `rid = ANY(ARRAY(...))`; it
answers exactly like the general `rid IN (...)` form."""

from __future__ import annotations

import pytest

from rounds.migrate import upgrade
from services.fhir_api.store import engine
from services.fhir_api.store import query as q
from tests.fhir_api.search.test_search_templates import SHARED, families, make_record, run
from tests.wiring import store_on

ODD_SUBJECTS = ("Group/g1", "g1", "urn:uuid:0b0f5bb6-7c5e-4a5e-9d43-5a2f0b2d4c11", "Patient/p-odd")


@pytest.mark.postgres
def test_rid_array_answers_like_rid_in(postgres_url, monkeypatch) -> None:
    upgrade(postgres_url)
    store = store_on(postgres_url)
    pids, session = make_record(store)
    for subject in ODD_SUBJECTS:
        store.create(
            SHARED,
            {"resourceType": "Observation", "status": "final", "code": {"coding": [{"code": "hgb"}]},
             "subject": {"reference": subject}, "effectiveDateTime": "2150-01-02"},
        )  # fmt: skip
    groups = [*families(pids), ("Observation", [[("patient", x), ("code", "hgb")] for x in ("g1", "p-odd")])]
    groups.append(("Observation", [[("patient", f"Group/{x}"), ("date", "ge2150")] for x in ("g1", "p1")]))

    def answers() -> list:
        engine._TEMPLATES.clear()
        return [
            run(store, ctx, rtype, params, total="accurate", count=count)
            for ctx in (SHARED, session)
            for rtype, group in groups
            for params in group
            for count in (2, 50)
        ]

    fast = answers()
    assert sum(len(a[0]) for a in fast) > 100
    with store._conn() as conn:
        sql = str(engine._template(conn.dialect, SHARED, *_labs(pids[0])).page.compile(dialect=conn.dialect))
    assert "ANY" in sql
    general = q.rid_filters
    monkeypatch.setattr(q, "rid_filters",
                        lambda sets, r, postgres=False, probes=None: general(sets, r, False, probes))
    assert answers() == fast
    with store._conn() as conn:
        sql = str(engine._template(conn.dialect, SHARED, *_labs(pids[0])).page.compile(dialect=conn.dialect))
    assert "ANY" not in sql
    store.engine.dispose()


def _labs(pid: str) -> tuple:
    from services.fhir_api.store.interface import SearchRequest

    request = SearchRequest("Observation", [("patient", pid), ("code", "urn:lab|hgb"), ("date", "ge2150")])
    return request, q.plan_params("Observation", request.params, SHARED, False), False
