"""Reads awaited on the event loop (store/async_reads.py on PostgreSQL) answer as the threaded ones do."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from services.fhir_api.store.interface import Context, Gone, NotFound

SHARED = Context()


def _outcome(read, *args):
    try:
        stored = read(*args)
    except (NotFound, Gone) as exc:
        return type(exc).__name__, str(exc)
    return _outcome_value(stored)


async def _awaited(read, *args):
    try:
        stored = await read(*args)
    except (NotFound, Gone) as exc:
        return type(exc).__name__, str(exc)
    return _outcome_value(stored)


def test_async_reads_equal_threaded_reads(store) -> None:
    patient = store.create(SHARED, {"resourceType": "Patient", "gender": "female"})
    gone = store.create(SHARED, {"resourceType": "Patient"})
    store.delete(SHARED, "Patient", gone.id)
    lab = store.create(
        SHARED,
        {
            "resourceType": "Observation",
            "status": "final",
            "code": {"text": "k"},
            "subject": {"reference": f"Patient/{patient.id}"},
            "effectiveDateTime": "2150-06-01T00:00:00Z",
        },
    )
    sid = store.create_session(datetime(2150, 1, 1, tzinfo=UTC))
    session = store.get_session(sid)
    store.update(
        session, "Patient", patient.id, {"resourceType": "Patient", "id": patient.id, "gender": "male"}
    )

    async def both() -> list:
        out = []
        for ctx in (SHARED, session):
            for rtype, rid in (
                ("Patient", patient.id),
                ("Patient", gone.id),
                ("Observation", lab.id),
                ("Patient", "nope"),
            ):
                out.append(
                    (_outcome(store.read, ctx, rtype, rid), await _awaited(store.read_async, ctx, rtype, rid))
                )
        assert await store.get_session_async(sid) == session
        assert await store.get_session_async("no-such-session") is None
        await store.close_async()
        return out

    pairs = asyncio.run(both())
    assert all(threaded == awaited for threaded, awaited in pairs)
    kinds = [p[0][0] for p in pairs]
    assert kinds == ["Patient", "Gone", "Observation", "NotFound", "Patient", "Gone", "NotFound", "NotFound"]
    assert b'"male"' in pairs[4][0][3]  # the session sees its own write
    assert b'"female"' in pairs[0][0][3]


def _outcome_value(stored):
    return stored.resource_type, stored.id, stored.version_id, stored.raw, stored.last_updated


@pytest.mark.postgres
def test_postgres_reads_run_on_the_loop(postgres_url) -> None:
    from rounds.migrate import upgrade
    from services.fhir_api.store import open_store

    upgrade(postgres_url)
    store = open_store(postgres_url)
    patient = store.create(SHARED, {"resourceType": "Patient"})

    async def read() -> tuple:
        stored = await store.read_async(SHARED, "Patient", patient.id)
        pools = len(store._async._pools)
        await store.close_async()
        return stored.id, pools

    assert asyncio.run(read()) == (patient.id, 1)  # an asyncio pool of this loop served it
    store.engine.dispose()
