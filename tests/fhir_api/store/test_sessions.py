"""Per-session sandboxes (copy-on-write over the shared record) and the as-of clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select

from services.fhir_api.store import models as m
from services.fhir_api.store.interface import Context, Gone, NotFound, SearchRequest

SHARED = Context()


@pytest.fixture
def record(store):
    pat = store.create(SHARED, {"resourceType": "Patient", "name": [{"family": "Clock"}]})
    ref = {"reference": f"Patient/{pat.id}"}
    early = store.create(
        SHARED,
        {
            "resourceType": "Observation",
            "status": "final",
            "subject": ref,
            "code": {"coding": [{"system": "s", "code": "k"}]},
            "effectiveDateTime": "2150-01-01T08:00:00Z",
            "issued": "2150-01-01T09:00:00Z",
        },
    )
    late = store.create(
        SHARED,
        {
            "resourceType": "Observation",
            "status": "final",
            "subject": ref,
            "code": {"coding": [{"system": "s", "code": "k"}]},
            "effectiveDateTime": "2150-01-03T08:00:00Z",
        },
    )
    enc = store.create(
        SHARED,
        {
            "resourceType": "Encounter",
            "status": "finished",
            "class": {"code": "IMP"},
            "subject": ref,
            "period": {"start": "2150-01-02T00:00:00Z"},
        },
    )
    return pat, early, late, enc


def ids(result) -> set[str]:
    return {r.id for r in result.matches}


def test_clock_hides_the_future_everywhere(store, record) -> None:
    pat, early, late, enc = record
    ctx = store.get_session(store.create_session(datetime(2150, 1, 2, 12, tzinfo=UTC)))
    assert ctx is not None and ctx.now == datetime(2150, 1, 2, 12, tzinfo=UTC)
    with pytest.raises(NotFound):
        store.read(ctx, "Observation", late.id)
    store.read(ctx, "Observation", early.id)
    found = store.search(ctx, SearchRequest("Observation", [("patient", pat.id)], total="accurate"))
    assert ids(found) == {early.id} and found.total == 1
    everything = store.everything(ctx, pat.id, total="accurate")
    assert {r.id for r in everything.matches} == {pat.id, early.id, enc.id} and everything.total == 3
    rev = store.search(
        ctx, SearchRequest("Patient", [("_id", pat.id), ("_revinclude", "Observation:subject")])
    )
    assert {r.id for r in rev.includes} == {early.id}
    has = store.search(ctx, SearchRequest("Patient", [("_has:Observation:subject:date", "ge2150-01-03")]))
    assert has.matches == []
    # before the observation was issued it is unknown, even though it was taken
    before_issue = Context(ctx.session_id, datetime(2150, 1, 1, 8, 30, tzinfo=UTC))
    with pytest.raises(NotFound):
        store.read(before_issue, "Observation", early.id)
    # the shared record (no clock) sees everything
    assert ids(store.search(SHARED, SearchRequest("Observation", [("patient", pat.id)]))) == {
        early.id,
        late.id,
    }


def test_sessions_are_isolated_copy_on_write(store, record) -> None:
    pat, early, late, _ = record
    a = store.get_session(store.create_session(None))
    b = store.get_session(store.create_session(None))
    rows_before = _count(store)
    body = {"resourceType": "Patient", "id": pat.id, "name": [{"family": "Changed"}]}
    changed, created = store.update(a, "Patient", pat.id, body)
    assert not created and changed.version_id == 2
    new_obs = store.create(
        a,
        {
            "resourceType": "Observation",
            "status": "final",
            "code": {"text": "note"},
            "subject": {"reference": f"Patient/{pat.id}"},
        },
    )
    store.delete(a, "Observation", early.id)
    assert _count(store) == rows_before + 3  # three session rows; no shared row copied

    assert ids(store.search(a, SearchRequest("Patient", [("family", "changed")]))) == {pat.id}
    assert store.search(b, SearchRequest("Patient", [("family", "changed")])).matches == []
    assert store.search(SHARED, SearchRequest("Patient", [("family", "changed")])).matches == []
    assert ids(store.search(b, SearchRequest("Patient", [("family", "clock")]))) == {pat.id}
    assert ids(store.search(a, SearchRequest("Observation", [("patient", pat.id)]))) == {new_obs.id, late.id}
    with pytest.raises(Gone):
        store.read(a, "Observation", early.id)
    store.read(b, "Observation", early.id)
    with pytest.raises(NotFound):
        store.read(b, "Observation", new_obs.id)
    assert store.read(SHARED, "Patient", pat.id).version_id == 1
    history, total, _ = store.history(a, "Patient", pat.id)
    assert [h.version_id for h in history] == [2, 1] and total == 2

    store.drop_session(a.session_id)
    assert store.get_session(a.session_id) is None
    assert _count(store) == rows_before
    assert store.get_session("no-such-session") is None
    assert store.get_session("'; DROP TABLE fhir_resource; --") is None


def test_session_writes_are_visible_despite_the_clock(store, record) -> None:
    pat, *_ = record
    ctx = store.get_session(store.create_session(datetime(2150, 1, 1, tzinfo=UTC)))
    future = store.create(
        ctx,
        {
            "resourceType": "Observation",
            "status": "final",
            "code": {"text": "x"},
            "subject": {"reference": f"Patient/{pat.id}"},
            "effectiveDateTime": "2199-01-01",
        },
    )
    store.read(ctx, "Observation", future.id)
    assert future.id in ids(store.search(ctx, SearchRequest("Observation", [("patient", pat.id)])))


def _count(store) -> int:
    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(m.resource)).scalar_one()
