"""Patient-scoped token searches read the patient's token rows only (token rows carry keys.patient_key)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select, update

from services.fhir_api.search.keys import NO_PATIENT, param_key, patient_key
from services.fhir_api.store import models as m
from services.fhir_api.store.interface import Context, SearchRequest
from services.fhir_api.store.query import plan_params

SHARED = Context()


def _lab(store, ctx, subject: str, code: str, when: str):
    return store.create(
        ctx,
        {
            "resourceType": "Observation",
            "status": "final",
            "code": {"coding": [{"system": "urn:lab", "code": code}]},
            "subject": {"reference": subject},
            "effectiveDateTime": when,
        },
    )


def ids(store, params, ctx=SHARED) -> set[str]:
    return {r.id for r in store.search(ctx, SearchRequest("Observation", params)).matches}


def test_patient_scoped_token_searches(store) -> None:
    a, b = (store.create(SHARED, {"resourceType": "Patient"}) for _ in range(2))
    group = store.create(SHARED, {"resourceType": "Group", "type": "person", "actual": True})
    a_k = _lab(store, SHARED, f"Patient/{a.id}", "k", "2150-01-01")
    a_na = _lab(store, SHARED, f"Patient/{a.id}", "na", "2150-01-02")
    b_k = _lab(store, SHARED, f"Patient/{b.id}", "k", "2150-01-03")
    g_k = _lab(store, SHARED, f"Group/{group.id}", "k", "2150-01-04")
    with store.engine.connect() as conn:
        keys = dict(
            conn.execute(
                select(m.resource.c.res_id, m.token.c.patient_key)
                .join(m.token, m.token.c.rid == m.resource.c.rid)
                .where(m.token.c.param_key == param_key("Observation", "code"))
            ).all()
        )
    assert keys == {
        a_k.id: patient_key(a.id),
        a_na.id: patient_key(a.id),
        b_k.id: patient_key(b.id),
        g_k.id: NO_PATIENT,
    }

    assert ids(store, [("patient", a.id), ("code", "k")]) == {a_k.id}
    assert ids(store, [("patient", f"Patient/{b.id}"), ("code", "urn:lab|k")]) == {b_k.id}
    assert ids(store, [("patient", a.id), ("code", "k,na")]) == {a_k.id, a_na.id}
    assert ids(store, [("patient", a.id), ("code:not", "k")]) == {a_na.id}  # never narrowed under :not
    assert ids(store, [("subject", f"Group/{group.id}"), ("code", "k")]) == {g_k.id}
    assert ids(store, [("code", "k")]) == {a_k.id, b_k.id, g_k.id}

    # rows written before the key existed (migration 0008 gives them NO_PATIENT) are still found
    with store.engine.begin() as conn:
        conn.execute(update(m.token).values(patient_key=NO_PATIENT))
    assert ids(store, [("patient", a.id), ("code", "k")]) == {a_k.id}

    # a session's own writes carry the key too
    session = store.get_session(store.create_session(datetime(2151, 1, 1, tzinfo=UTC)))
    mine = _lab(store, session, f"Patient/{b.id}", "k", "2150-02-01")
    assert ids(store, [("patient", b.id), ("code", "k")], session) == {b_k.id, mine.id}
    assert ids(store, [("patient", b.id), ("code", "k")]) == {b_k.id}


def test_only_a_single_plain_patient_narrows() -> None:
    def narrowed(params) -> list[bool]:
        plan = plan_params("Observation", params, SHARED, False)
        return [f.key[-1] for f in plan.filters if f.key and f.key[0].startswith("code")]

    assert narrowed([("patient", "p1"), ("code", "k")]) == [True]
    assert narrowed([("patient", "p1,p2"), ("code", "k")]) == [False]
    assert narrowed([("patient", "p1"), ("patient", "p2"), ("code", "k")]) == [False]
    assert narrowed([("patient", "http://other/fhir/Patient/p1"), ("code", "k")]) == [False]
    assert narrowed([("patient", "p1"), ("code:not", "k")]) == [False]
    assert narrowed([("patient", "p1"), ("code:text", "k")]) == [False]
    assert narrowed([("subject", "Patient/p1"), ("code", "k")]) == [False]
