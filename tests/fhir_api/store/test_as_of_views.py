"""As-of views and the one visibility rule, on SQLite and PostgreSQL: what a clocked session is served of a
shared resource, that its searches agree, that inherited times hide, and that tombstones and the clock hold
on every read path (search with and without parameters, includes, $everything, history)."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from services.fhir_api.store.interface import Context, Gone, NotFound, SearchRequest

SHARED = Context()
NOW = datetime(2150, 3, 1, tzinfo=UTC)


def _body(stored) -> dict:
    return orjson.loads(stored.raw)


def _ids(store, ctx, rtype, params, **kw) -> set[str]:
    return {s.id for s in store.search(ctx, SearchRequest(rtype, params, count=100, **kw)).matches}


@pytest.fixture
def record(store) -> dict:
    """A patient who dies after the clock, an admission going on at the clock (with its diagnosis), a later
    admission (with its diagnosis), a lab before the clock with a member resulted after it, a prescription
    running past the clock."""
    c = SHARED
    pat = store.create(
        c, {"resourceType": "Patient", "gender": "male", "deceasedDateTime": "2150-06-01T00:00:00Z"}
    ).id
    subject = {"reference": f"Patient/{pat}"}

    def encounter(start: str, end: str, **extra) -> str:
        period = {"start": f"2150-{start}T00:00:00Z", "end": f"2150-{end}T00:00:00Z"}
        body = {"resourceType": "Encounter", "status": "finished", "class": {"code": "IMP"}}
        body["subject"] = subject
        return store.create(c, {**body, "period": period, **extra}).id

    disposition = {"dischargeDisposition": {"coding": [{"code": "HOME"}]}}
    ongoing = encounter("02-20", "03-10", hospitalization=disposition)
    later = encounter("04-01", "04-05")

    def condition(enc: str, code: str) -> str:
        body = {
            "resourceType": "Condition",
            "subject": subject,
            "encounter": {"reference": f"Encounter/{enc}"},
            "code": {"coding": [{"system": "urn:t", "code": code}]},
        }
        return store.create(c, body).id

    def lab(when: str, members: list[str] = ()) -> str:
        body = {
            "resourceType": "Observation",
            "status": "final",
            "code": {"coding": [{"system": "urn:t", "code": "lab"}]},
            "subject": subject,
            "effectiveDateTime": when,
            **({"hasMember": [{"reference": f"Observation/{m}"} for m in members]} if members else {}),
        }
        return store.create(c, body).id

    late_lab = lab("2150-05-01T00:00:00Z")
    early_lab = lab("2150-01-15T00:00:00Z", [late_lab])
    order = store.create(
        c,
        {
            "resourceType": "MedicationRequest",
            "status": "completed",
            "intent": "order",
            "subject": subject,
            "medicationCodeableConcept": {"text": "x"},
            "authoredOn": "2150-02-21T00:00:00Z",
            "dispenseRequest": {
                "validityPeriod": {"start": "2150-02-21T00:00:00Z", "end": "2150-03-05T00:00:00Z"}
            },
        },
    ).id
    return {
        "patient": pat,
        "ongoing": ongoing,
        "later": later,
        "dx_ongoing": condition(ongoing, "a"),
        "dx_later": condition(later, "b"),
        "early_lab": early_lab,
        "late_lab": late_lab,
        "order": order,
    }


def test_views_rewrite_what_happened_after_the_clock(store, record) -> None:
    ctx = store.get_session(store.create_session(NOW))
    assert "deceasedDateTime" not in _body(store.read(ctx, "Patient", record["patient"]))
    enc = _body(store.read(ctx, "Encounter", record["ongoing"]))
    assert enc["period"] == {"start": "2150-02-20T00:00:00Z"} and enc["status"] == "in-progress"
    assert "hospitalization" not in enc
    order = _body(store.read(ctx, "MedicationRequest", record["order"]))
    assert order["status"] == "active" and order["dispenseRequest"]["validityPeriod"] == {
        "start": "2150-02-21T00:00:00Z"
    }
    assert "hasMember" not in _body(store.read(ctx, "Observation", record["early_lab"]))
    # the shared record is served as stored
    assert _body(store.read(SHARED, "Patient", record["patient"]))["deceasedDateTime"].startswith("2150-06")
    assert _body(store.read(SHARED, "Encounter", record["ongoing"]))["status"] == "finished"
    # a diagnosis inherits its admission's time: the later admission's is as hidden as the admission
    with pytest.raises(NotFound):
        store.read(ctx, "Condition", record["dx_later"])
    assert store.read(ctx, "Condition", record["dx_ongoing"]).id == record["dx_ongoing"]
    # search, includes and $everything serve the same views
    found = store.search(ctx, SearchRequest("Encounter", [("_id", record["ongoing"])], count=5))
    assert _body(found.matches[0])["status"] == "in-progress"
    every = store.everything(ctx, record["patient"], count=100)
    served = {(s.resource_type, s.id): _body(s) for s in every.matches}
    assert ("Condition", record["dx_later"]) not in served and ("Encounter", record["later"]) not in served
    assert "deceasedDateTime" not in served["Patient", record["patient"]]
    assert "end" not in served["Encounter", record["ongoing"]]["period"]


def test_searches_agree_with_the_views(store, record) -> None:
    ctx = store.get_session(store.create_session(NOW))
    pat, ongoing = record["patient"], record["ongoing"]
    assert _ids(store, ctx, "Patient", [("_id", pat), ("death-date", "gt2150-03-01")]) == set()
    assert _ids(store, SHARED, "Patient", [("_id", pat), ("death-date", "gt2150-03-01")]) == {pat}
    assert _ids(store, ctx, "Encounter", [("patient", pat), ("status", "finished")]) == set()
    assert _ids(store, ctx, "Encounter", [("patient", pat), ("status", "in-progress")]) == {ongoing}
    assert _ids(store, SHARED, "Encounter", [("patient", pat), ("status", "in-progress")]) == set()
    # the view's period has no end: it reaches past any later date, and never ends before one
    assert _ids(store, ctx, "Encounter", [("patient", pat), ("date", "eb2150-03-20")]) == set()
    assert _ids(store, SHARED, "Encounter", [("patient", pat), ("date", "eb2150-03-20")]) == {ongoing}
    active = [("patient", pat), ("status", "active")]
    assert _ids(store, ctx, "MedicationRequest", active) == {record["order"]}
    assert _ids(store, ctx, "Observation", [("has-member", record["late_lab"])]) == set()
    assert _ids(store, SHARED, "Observation", [("has-member", record["late_lab"])]) == {record["early_lab"]}
    assert _ids(store, ctx, "Condition", [("patient", pat)]) == {record["dx_ongoing"]}
    later = store.get_session(store.create_session(datetime(2150, 7, 1, tzinfo=UTC)))
    assert _ids(store, later, "Patient", [("_id", pat), ("death-date", "gt2150-03-01")]) == {pat}
    assert _ids(store, later, "Encounter", [("patient", pat), ("status", "finished")]) == {
        ongoing,
        record["later"],
    }


def test_a_session_tombstone_hides_the_shared_resource_on_every_path(store, record) -> None:
    sid = store.create_session(None)
    ctx = store.get_session(sid)
    lab = record["early_lab"]
    store.delete(ctx, "Observation", lab)
    with pytest.raises(Gone):
        store.read(ctx, "Observation", lab)
    assert lab not in _ids(store, ctx, "Observation", [])
    assert lab not in _ids(store, ctx, "Observation", [("code", "urn:t|lab")])
    assert lab not in _ids(store, ctx, "Observation", [("patient", record["patient"])], total="accurate")
    counted = SearchRequest("Observation", [("patient", record["patient"])], count=0, total="accurate")
    assert store.search(ctx, counted).total == 1  # the late lab only
    rev = store.search(
        ctx, SearchRequest("Patient", [("_id", record["patient"]), ("_revinclude", "Observation:subject")])
    )
    assert lab not in {s.id for s in rev.includes}
    every = store.everything(ctx, record["patient"], count=100)
    assert lab not in {s.id for s in every.matches}
    versions, _, _ = store.history(ctx, "Observation", lab)
    assert versions[0].deleted and versions[0].method == "DELETE"
    assert lab in _ids(store, SHARED, "Observation", [])  # only in the session


def test_history_respects_the_clock(store, record) -> None:
    ctx = store.get_session(store.create_session(NOW))
    versions, total, _ = store.history(ctx, "Observation", None, count=100)
    ids = {v.id for v in versions}
    assert record["early_lab"] in ids and record["late_lab"] not in ids and total == len(versions)
    with pytest.raises(NotFound):
        store.history(ctx, "Observation", record["late_lab"])
    every, _, _ = store.history(ctx, None, None, count=100)
    assert record["later"] not in {v.id for v in every} and record["dx_later"] not in {v.id for v in every}
    with pytest.raises(NotFound):
        store.vread(ctx, "Observation", record["late_lab"], 1)


def test_sorts_chains_has_and_async_reads_answer_from_the_views(store, record) -> None:
    import asyncio

    ctx = store.get_session(store.create_session(NOW))
    early = store.create(
        SHARED, {"resourceType": "Patient", "gender": "female", "deceasedDateTime": "2150-01-01T00:00:00Z"}
    ).id
    both = [("_id", f"{record['patient']},{early}")]
    by_death = store.search(SHARED, SearchRequest("Patient", [*both, ("_sort", "-death-date")])).matches
    assert [s.id for s in by_death] == [record["patient"], early]
    # in the session the later death is not there to sort by: that patient sorts last, as without a date
    in_session = store.search(ctx, SearchRequest("Patient", [*both, ("_sort", "-death-date")])).matches
    assert [s.id for s in in_session] == [early, record["patient"]]
    # chains and _has read the views' rows of the resources they go through
    chained = [("encounter.status", "in-progress")]
    assert _ids(store, ctx, "Condition", chained) == {record["dx_ongoing"]}
    assert _ids(store, SHARED, "Condition", chained) == set()
    has = [("_has:Condition:encounter:code", "urn:t|a"), ("status", "in-progress")]
    assert _ids(store, ctx, "Encounter", has) == {record["ongoing"]}
    # the event loop's reads (PostgreSQL's async reader) serve the same views
    async def on_the_loop():
        try:
            read = await store.read_async(ctx, "Encounter", record["ongoing"])
            return read, await store.search_async(ctx, SearchRequest("Patient", [("_id", record["patient"])]))
        finally:
            await store.close_async()

    read, found = asyncio.run(on_the_loop())
    assert _body(read)["status"] == "in-progress" and "deceasedDateTime" not in _body(found.matches[0])


def test_times_are_inherited_on_writes_in_either_order(store, record) -> None:
    """A Specimen with no time of its own is known from its first test, written before or after it; a
    Condition from its Encounter."""
    subject = {"reference": f"Patient/{record['patient']}"}
    specimen = store.create(SHARED, {"resourceType": "Specimen", "subject": subject}).id
    store.create(
        SHARED,
        {
            "resourceType": "Observation",
            "status": "final",
            "code": {"text": "culture"},
            "subject": subject,
            "specimen": {"reference": f"Specimen/{specimen}"},
            "effectiveDateTime": "2150-05-01T00:00:00Z",
        },
    )
    ctx = store.get_session(store.create_session(NOW))
    with pytest.raises(NotFound):
        store.read(ctx, "Specimen", specimen)
    assert specimen not in _ids(store, ctx, "Specimen", [("patient", record["patient"])])
    later = store.get_session(store.create_session(datetime(2150, 5, 2, tzinfo=UTC)))
    assert store.read(later, "Specimen", specimen).id == specimen
    # a session's own Condition of a later admission is its own write: served as written
    own = store.create(
        ctx,
        {
            "resourceType": "Condition",
            "subject": subject,
            "encounter": {"reference": f"Encounter/{record['later']}"},
            "code": {"text": "own"},
        },
    )
    assert store.read(ctx, "Condition", own.id).id == own.id
