"""CRUD, versions, history, conditional operations and transactions of the store (SQLite, PostgreSQL)."""

from __future__ import annotations

import orjson
import pytest

from services.fhir_api.store.interface import (
    Conflict,
    Context,
    Gone,
    InvalidResource,
    MultipleMatches,
    NotFound,
    SearchRequest,
    VersionConflict,
)

SHARED = Context()


def patient(family: str, mrn: str, **extra) -> dict:
    return {
        "resourceType": "Patient",
        "name": [{"family": family}],
        "identifier": [{"system": "urn:mrn", "value": mrn}],
        **extra,
    }


def test_create_read_vread_update_delete(store) -> None:
    created = store.create(SHARED, patient("Smith", "1", birthDate="1970-01-01"))
    body = orjson.loads(created.raw)
    assert body["id"] == created.id and body["meta"]["versionId"] == "1"
    assert body["meta"]["lastUpdated"].endswith("Z")
    assert store.read(SHARED, "Patient", created.id).raw == created.raw  # served as stored

    updated, was_created = store.update(
        SHARED, "Patient", created.id, {**body, "gender": "female"}, if_match=1
    )
    assert (updated.version_id, was_created) == (2, False)
    with pytest.raises(VersionConflict):
        store.update(SHARED, "Patient", created.id, body, if_match=1)
    assert orjson.loads(store.vread(SHARED, "Patient", created.id, 1).raw).get("gender") is None
    assert orjson.loads(store.vread(SHARED, "Patient", created.id, 2).raw)["gender"] == "female"
    with pytest.raises(NotFound):
        store.vread(SHARED, "Patient", created.id, 9)

    assert store.delete(SHARED, "Patient", created.id).deleted
    with pytest.raises(Gone):
        store.read(SHARED, "Patient", created.id)
    assert store.delete(SHARED, "Patient", created.id) is None
    versions, total, _ = store.history(SHARED, "Patient", created.id)
    assert total == 3 and [v.version_id for v in versions] == [3, 2, 1]
    assert [v.method for v in versions] == ["DELETE", "PUT", "POST"] and versions[0].deleted
    # deleted resources drop out of search
    assert store.search(SHARED, SearchRequest("Patient", [("identifier", "urn:mrn|1")])).matches == []
    # update-as-create after delete
    again, was_created = store.update(SHARED, "Patient", created.id, body)
    assert was_created and again.version_id == 4


def test_update_as_create_and_id_checks(store) -> None:
    stored, created = store.update(SHARED, "Patient", "p-1", patient("Lee", "2", id="p-1"))
    assert created and stored.id == "p-1" and stored.version_id == 1
    with pytest.raises(InvalidResource):
        store.update(SHARED, "Patient", "p-1", patient("Lee", "2", id="other"))
    with pytest.raises(InvalidResource):
        store.update(SHARED, "Observation", "p-1", patient("Lee", "2"))
    with pytest.raises(Conflict):
        store.create(SHARED, patient("Lee", "3"), id="p-1")
    with pytest.raises(NotFound):
        store.read(SHARED, "Patient", "nope")


def test_invalid_resources_are_rejected_and_nothing_is_written(store) -> None:
    with pytest.raises(InvalidResource) as err:
        store.create(SHARED, {"resourceType": "Patient", "gender": 12, "birthDate": "not a date"})
    assert len(err.value.issues) >= 1
    with pytest.raises(InvalidResource):
        store.create(SHARED, {"resourceType": "NoSuchType"})
    with pytest.raises(InvalidResource):
        store.create(SHARED, {"name": "no resourceType"})
    assert store.history(SHARED, None, None)[:2] == ([], 0)


def test_conditional_create_and_update(store) -> None:
    first, created = store.conditional_create(SHARED, patient("Ng", "7"), [("identifier", "urn:mrn|7")])
    assert created
    same, created = store.conditional_create(SHARED, patient("Ng", "7"), [("identifier", "urn:mrn|7")])
    assert not created and same.id == first.id
    store.create(SHARED, patient("Ng", "8"))
    with pytest.raises(MultipleMatches):
        store.conditional_create(SHARED, patient("Ng", "9"), [("family", "Ng")])
    updated, created = store.conditional_update(
        SHARED, "Patient", patient("Ng", "7", gender="male"), [("identifier", "urn:mrn|7")]
    )
    assert not created and updated.id == first.id and updated.version_id == 2
    fresh, created = store.conditional_update(
        SHARED, "Patient", patient("Ho", "10"), [("identifier", "urn:mrn|10")]
    )
    assert created and fresh.version_id == 1


def test_transaction_is_all_or_nothing_and_listeners_see_changes(store) -> None:
    seen = []
    store.add_change_listener(lambda conn, change: seen.append((change.action, change.resource_type)))
    with pytest.raises(InvalidResource), store.transaction(SHARED) as tx:
        tx.create(SHARED, patient("Tx", "11"))
        tx.create(SHARED, {"resourceType": "Patient", "gender": ["bad"]})
    assert store.search(SHARED, SearchRequest("Patient", [("family", "Tx")])).matches == []
    with store.transaction(SHARED) as tx:
        a = tx.create(SHARED, patient("Tx", "12"))
        tx.create(
            SHARED,
            {
                "resourceType": "Observation",
                "status": "final",
                "code": {"text": "x"},
                "subject": {"reference": f"Patient/{a.id}"},
            },
        )
    assert len(store.search(SHARED, SearchRequest("Patient", [("family", "Tx")])).matches) == 1
    assert ("created", "Observation") in seen


def test_history_paging_and_since(store) -> None:
    ids = [store.create(SHARED, patient(f"H{i}", str(i))).id for i in range(5)]
    page, total, snapshot = store.history(SHARED, "Patient", None, count=2)
    assert total == 5 and [p.id for p in page] == ids[::-1][:2]
    store.create(SHARED, patient("H5", "5"))  # newer than the snapshot: the pinned pages do not see it
    page2, total2, pinned = store.history(SHARED, "Patient", None, count=2, offset=2, snapshot=snapshot)
    assert [p.id for p in page2] == ids[::-1][2:4] and total2 == 5 and pinned == snapshot
    assert store.history(SHARED, "Patient", None, count=2)[1] == 6
    later, total, _ = store.history(SHARED, None, None, since=page[0].last_updated)
    assert total >= 1 and all(p.last_updated >= page[0].last_updated for p in later)


def test_concurrent_updates_keep_a_gapless_version_chain(store) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from services.fhir_api.store.interface import Conflict as WriteConflict

    pat = store.create(SHARED, patient("Race", "99"))

    def bump(worker: int) -> int:
        done = 0
        for _ in range(20):
            current = store.read(SHARED, "Patient", pat.id)
            body = {**orjson.loads(current.raw), "gender": ["male", "female"][worker % 2]}
            try:
                store.update(SHARED, "Patient", pat.id, body, if_match=current.version_id)
                done += 1
                if done == 3:
                    return done
            except (VersionConflict, WriteConflict):
                continue
        return done

    with ThreadPoolExecutor(6) as pool:
        successes = sum(pool.map(bump, range(6)))
    versions, total, _ = store.history(SHARED, "Patient", pat.id, count=100)
    assert total == successes + 1
    assert sorted(v.version_id for v in versions) == list(range(1, total + 1))
    assert store.read(SHARED, "Patient", pat.id).version_id == total
