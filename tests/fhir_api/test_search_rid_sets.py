"""The PostgreSQL forms of multi-filter searches answer exactly like the general ones: the intersected rid set
as `rid = ANY(ARRAY(...))` (vs `rid IN (...)`), and the implied target type of references such as Observation
`patient` (vs none)."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from rounds.migrate import upgrade
from services.fhir_api.search import engine
from services.fhir_api.search import query as q
from services.fhir_api.search.registry import get_param, params_for, resource_types
from services.fhir_api.store import models as m
from services.fhir_api.store import open_store
from tests.fhir_api.test_search_templates import SHARED, families, make_record, run

ODD_SUBJECTS = ("Group/g1", "g1", "urn:uuid:0b0f5bb6-7c5e-4a5e-9d43-5a2f0b2d4c11", "Patient/p-odd")


def test_only_target_is_the_type_every_path_resolves_to() -> None:
    assert q._only_target(get_param("Observation", "patient")) == "Patient"
    assert q._only_target(get_param("Observation", "subject")) is None  # any type, or none
    assert q._only_target(get_param("Encounter", "service-provider")) is None  # no resolve() check
    for rtype in resource_types():
        for param in params_for(rtype).values():
            if param.type == "reference" and (only := q._only_target(param)):
                assert all(steps[-1] == ("r", only) for steps, _ in param.paths), (rtype, param.name)


@pytest.mark.postgres
def test_postgres_forms_answer_like_the_general_ones(postgres_url, monkeypatch) -> None:
    upgrade(postgres_url)
    store = open_store(postgres_url)
    pids, session = make_record(store)
    for subject in ODD_SUBJECTS:
        store.create(
            SHARED,
            {"resourceType": "Observation", "status": "final", "code": {"coding": [{"code": "hgb"}]},
             "subject": {"reference": subject}, "effectiveDateTime": "2150-01-02"},
        )  # fmt: skip
    ref = m.reference
    with store._conn() as conn:  # what the implied type relies on: extraction keeps only Patient references
        types = conn.execute(select(ref.c.target_type).where(ref.c.param == "patient").distinct()).scalars()
        assert set(types) == {"Patient"}
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
        sql = str(engine._template(conn, SHARED, *_labs(pids[0])).page.compile(dialect=conn.dialect))
    assert "ANY" in sql and "target_type" in sql
    general = q.rid_filters
    monkeypatch.setattr(q, "rid_filters", lambda sets, r, postgres=False: general(sets, r, False))
    monkeypatch.setattr(q, "_only_target", lambda param: None)
    assert answers() == fast
    with store._conn() as conn:
        sql = str(engine._template(conn, SHARED, *_labs(pids[0])).page.compile(dialect=conn.dialect))
    assert "ANY" not in sql and "target_type" not in sql
    store.engine.dispose()


def _labs(pid: str) -> tuple:
    from services.fhir_api.store.interface import SearchRequest

    request = SearchRequest("Observation", [("patient", pid), ("code", "urn:lab|hgb"), ("date", "ge2150")])
    return request, q.plan_params("Observation", request.params, SHARED, False), False
