"""`_lastUpdated` is answered from the resource row (store/updated.py): every prefix, value lists, missing,
chains, type-less searches, sessions; and bulk load and writes store no index row for it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select

from services.fhir_api.search.keys import param_key
from services.fhir_api.store import models as m
from services.fhir_api.store.interface import Context, InvalidSearch, SearchRequest

SHARED = Context()


def _ids(store, rtype, *params, ctx=SHARED) -> set[str]:
    return {r.id for r in store.search(ctx, SearchRequest(rtype, list(params))).matches}


def _at(moment) -> str:
    return moment.isoformat(timespec="microseconds")


@pytest.fixture
def written(store):
    first = store.create(SHARED, {"resourceType": "Patient", "gender": "male"})
    second = store.create(SHARED, {"resourceType": "Patient", "gender": "female"})
    assert second.last_updated > first.last_updated
    return first, second


def test_every_prefix_against_the_stored_instant(store, written) -> None:
    first, second = written
    t1, t2 = _at(first.last_updated), _at(second.last_updated)
    both = {first.id, second.id}
    assert _ids(store, "Patient", ("_lastUpdated", t1)) == {first.id}  # eq: the instant itself
    assert _ids(store, "Patient", ("_lastUpdated", f"ne{t1}")) == {second.id}
    assert _ids(store, "Patient", ("_lastUpdated", f"gt{t1}")) == {second.id}
    assert _ids(store, "Patient", ("_lastUpdated", f"sa{t1}")) == {second.id}
    assert _ids(store, "Patient", ("_lastUpdated", f"ge{t1}")) == both
    assert _ids(store, "Patient", ("_lastUpdated", f"lt{t2}")) == {first.id}
    assert _ids(store, "Patient", ("_lastUpdated", f"eb{t2}")) == {first.id}
    assert _ids(store, "Patient", ("_lastUpdated", f"le{t1}")) == {first.id}
    assert _ids(store, "Patient", ("_lastUpdated", f"ap{t1}")) >= {first.id}
    day = first.last_updated.date().isoformat()
    assert _ids(store, "Patient", ("_lastUpdated", day)) >= {first.id}  # the day's range contains it
    later = _at(second.last_updated + timedelta(days=400))
    assert _ids(store, "Patient", ("_lastUpdated", f"gt{later}")) == set()
    assert _ids(store, "Patient", ("_lastUpdated", f"{t1},{t2}")) == both  # a list is any of its values
    assert _ids(store, "Patient", ("_lastUpdated", f"ge{t1}"), ("_lastUpdated", f"lt{t2}")) == {first.id}


def test_missing_types_chains_and_bad_values(store, written) -> None:
    first, second = written
    assert _ids(store, "Patient", ("_lastUpdated:missing", "false")) == {first.id, second.id}
    assert _ids(store, "Patient", ("_lastUpdated:missing", "true")) == set()
    assert {first.id, second.id} <= _ids(store, None, ("_lastUpdated", f"ge{_at(first.last_updated)}"))
    obs = store.create(
        SHARED,
        {
            "resourceType": "Observation",
            "status": "final",
            "code": {"text": "x"},
            "subject": {"reference": f"Patient/{second.id}"},
        },
    )
    chained = ("subject:Patient._lastUpdated", f"gt{_at(first.last_updated)}")
    assert _ids(store, "Observation", chained) == {obs.id}
    for bad in [
        ("_lastUpdated", "yesterday"),
        ("_lastUpdated:missing", "maybe"),
        ("_lastUpdated:exact", "2020"),
    ]:
        with pytest.raises(InvalidSearch):
            _ids(store, "Patient", bad)


def test_session_writes_carry_their_own_time(store, written) -> None:
    first, _ = written
    ctx = store.get_session(store.create_session(None))
    body = {"resourceType": "Patient", "id": first.id, "gender": "other"}
    updated, _ = store.update(ctx, "Patient", first.id, body)
    since = _at(updated.last_updated)
    assert first.id in _ids(
        store, "Patient", ("_lastUpdated", f"ge{since}"), ctx=ctx
    )  # the session's version
    assert first.id not in _ids(store, "Patient", ("_lastUpdated", f"ge{since}"))  # the shared one is older


def test_no_index_rows_are_written_for_it(store, written) -> None:
    keys = [param_key("Patient", "_lastUpdated"), param_key("Observation", "_lastUpdated")]
    with store.engine.connect() as conn:
        count = select(func.count()).where(m.date.c.param_key.in_(keys))
        assert conn.execute(count).scalar_one() == 0
