"""Outbox: a FHIR write and its change event commit together; the relay publishes id-only events keyed
"Type/id" to the FHIR changes topic and marks them sent; a consumer sees each change exactly once."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from events.outbox import OutboxEntry
from events.projections.fhir_changes import FhirChangesProjection
from events.projections.runner import ProjectionRunner
from events.relay import Relay
from services.fhir_api.backbone.changes import OutboxListener
from services.fhir_api.store.interface import Context
from tests.events.projections.helpers import Env, read_all, snapshot
from tests.wiring import store_on

PATIENT = {"resourceType": "Patient", "name": [{"family": "Doe"}], "gender": "female"}


def store_with_outbox(env: Env):
    store = store_on(env.settings.database_url)
    store.add_change_listener(OutboxListener(env.fhir_changes))
    return store


def outbox_rows(env: Env) -> list:
    with env.engine.connect() as conn:
        return conn.execute(select(OutboxEntry.__table__).order_by(OutboxEntry.id)).all()


def test_outbox_row_commits_or_rolls_back_with_the_write(env: Env) -> None:
    store = store_with_outbox(env)
    with pytest.raises(RuntimeError), store.transaction(Context()) as tx:
        tx.create(Context(), PATIENT)
        raise RuntimeError("the write fails after the change was recorded")
    assert outbox_rows(env) == []
    created = store.create(Context(), PATIENT)
    [row] = outbox_rows(env)
    assert (row.topic, row.key, row.sent_at) == (env.fhir_changes, f"Patient/{created.id}", None)


def test_relay_publishes_id_only_events_in_order_and_marks_them_sent(env: Env) -> None:
    store = store_with_outbox(env)
    created = store.create(Context(), PATIENT)
    store.update(Context(), "Patient", created.id, {**PATIENT, "id": created.id, "gender": "male"})
    store.delete(Context(), "Patient", created.id)
    relay = Relay(env.engine, env.bus)
    assert relay.pending() == 3
    assert relay.drain() == 3
    assert relay.pending() == 0 and relay.drain() == 0  # marked sent: never published again
    records = read_all(env, env.fhir_changes, expected=3)
    assert [r.event.type for r in records] == [
        "rounds.fhir.resource.created", "rounds.fhir.resource.updated", "rounds.fhir.resource.deleted"]
    assert {r.key for r in records} == {f"Patient/{created.id}"}
    assert [r.event.data["versionId"] for r in records][:2] == ["1", "2"]
    assert all(set(r.event.data) == {"resourceType", "id", "versionId"} for r in records)  # no PHI, ids only
    assert records[0].event.subject is None  # the shared record; session writes carry the session id


def test_session_write_carries_the_session_as_subject(env: Env) -> None:
    store = store_with_outbox(env)
    session = store.create_session(None)
    store.create(Context(session_id=session), PATIENT)
    Relay(env.engine, env.bus).drain()
    [record] = read_all(env, env.fhir_changes, expected=1)
    assert record.event.subject == session


def test_fhir_changes_projection_counts_each_version_once(env: Env) -> None:
    store = store_with_outbox(env)
    ids = [store.create(Context(), PATIENT).id for _ in range(5)]
    relay = Relay(env.engine, env.bus, batch_size=2)
    relay.drain()
    # Simulate a relay that crashed after publishing: the same rows go out again (same event ids).
    with env.engine.begin() as conn:
        conn.execute(OutboxEntry.__table__.update().values(sent_at=None))
    assert relay.drain() == 5
    runner = ProjectionRunner(env.bus, env.engine, FhirChangesProjection(topics=(env.fhir_changes,)),
                              deadletter_topic=env.deadletter, poll_timeout_s=0.2)
    with runner:
        stats = runner.run(until_caught_up=True, timeout_s=120)
        rows = snapshot(env.engine, runner.projection)["fhir_changes"]
    assert (stats.applied, stats.duplicates, stats.dead_lettered) == (5, 5, 0)
    assert sorted(r[2] for r in rows) == sorted(ids)
    with env.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(OutboxEntry)).scalar_one() == 5


def test_a_relay_publishes_its_own_commits_from_memory_and_the_rest_when_asked(env: Env) -> None:
    """`expect`ed events (a runner's committed batch) are published from the objects, without parsing their
    rows, and `mine` publishes only them: another process's pending rows wait for a full drain."""
    from events.catalog import CATALOG
    from events.envelope import CloudEvent
    from events.outbox import append
    from events.payloads import FhirResourceChange

    def change(n: int) -> CloudEvent:
        payload = FhirResourceChange(resource_type="Patient", id=f"p{n}", version_id="1")
        return CATALOG.make(FhirResourceChange.CREATED, payload, source="/test")

    ours, theirs = [change(n) for n in range(3)], [change(n) for n in range(3, 5)]
    with env.engine.begin() as conn:
        append(conn, env.fhir_changes, [(f"Patient/p{n}", e) for n, e in enumerate(theirs, 3)])
        append(conn, env.fhir_changes, [(f"Patient/p{n}", e) for n, e in enumerate(ours)])
    relay = Relay(env.engine, env.bus)
    relay.expect(ours)
    parsed = []
    original = CloudEvent.from_bytes

    def counted(cls: type, raw: bytes) -> CloudEvent:
        parsed.append(raw)
        return original(raw)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CloudEvent, "from_bytes", classmethod(counted))
        assert relay.drain(mine=True) == 3 and parsed == []  # ours, from memory
        assert relay.pending() == 2 and relay.drain(mine=True) == 0
        assert relay.drain() == 2 and len(parsed) == 2  # theirs, parsed and validated from the rows
    records = read_all(env, env.fhir_changes, expected=5)
    assert sorted(r.event.id for r in records) == sorted(e.id for e in ours + theirs)
