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
def test_postgres_reads_and_searches_run_on_the_loop(postgres_url, monkeypatch) -> None:
    from anyio import to_thread

    from rounds.migrate import upgrade
    from services.fhir_api.store.interface import SearchRequest
    from tests.wiring import store_on

    upgrade(postgres_url)
    store = store_on(postgres_url)
    patient = store.create(SHARED, {"resourceType": "Patient"})
    labs = SearchRequest("Observation", [("patient", patient.id), ("code", "k"), ("_sort", "-date")])
    store.search(SHARED, labs)  # the shape's statements are built and cached on first use

    async def no_thread(*_args, **_kw):
        raise AssertionError("ran in a worker thread")

    monkeypatch.setattr(to_thread, "run_sync", no_thread)

    async def read() -> tuple:
        stored = await store.read_async(SHARED, "Patient", patient.id)
        found = await store.search_async(SHARED, labs)
        ctx = await store.get_session_async(store.create_session())
        pools = len(store._async._pools)
        await store.close_async()
        return stored.id, found.matches, ctx is not None, pools

    assert asyncio.run(read()) == (patient.id, [], True, 1)  # an asyncio pool of this loop served them
    store.engine.dispose()


REQUESTS = [
    ("Observation", [("patient", "{pid}"), ("code", "k"), ("_sort", "-date")], {}),
    ("Observation", [("patient", "{pid}"), ("date", "ge2150-03")], {"total": "accurate", "count": 1}),
    ("Observation", [("subject", "Patient/{pid}")], {"count": 1, "offset": 1}),
    ("Observation", [("status", "final"), ("_include", "Observation:patient")], {}),  # in a thread
    ("Observation", [("code:text", "potass")], {"total": "estimate"}),
    ("Patient", [("gender", "female")], {"count": 0, "total": "accurate"}),
    ("Observation", [("nope", "x")], {"strict": True}),
    ("Observation", [("date", "not-a-date")], {}),
]


def _search_outcome(result):
    return (
        [(s.resource_type, s.id, s.raw) for s in result.matches],
        [(s.resource_type, s.id) for s in result.includes],
        result.total,
        result.has_next,
        result.used_params,
        result.snapshot,
        (result.has_previous, result.first_cursor, result.last_cursor),
    )


def test_async_searches_equal_threaded_searches(store) -> None:
    from services.fhir_api.store import cursor
    from services.fhir_api.store.interface import InvalidSearch, SearchRequest

    patient = store.create(SHARED, {"resourceType": "Patient", "gender": "female"})
    for i, when in enumerate(("2150-01-01", "2150-04-01", "2150-06-01")):
        store.create(
            SHARED,
            {
                "resourceType": "Observation",
                "status": "final",
                "code": {"coding": [{"system": "urn:lab", "code": "k", "display": "Potassium"}]},
                "subject": {"reference": f"Patient/{patient.id}"},
                "effectiveDateTime": when,
                "valueQuantity": {"value": 4 + i},
            },
        )

    def requests():
        for rtype, params, kw in REQUESTS:
            params = [(k, v.format(pid=patient.id)) for k, v in params]
            yield SearchRequest(rtype, params, **kw)
        for sort in ("-date", "_lastUpdated"):  # keyset pages from both ends of a middle page
            params = [("patient", patient.id), ("_sort", sort)]
            middle = store.search(SHARED, SearchRequest("Observation", params, count=1, offset=1))
            for direction, at in (("after", middle.last_cursor), ("before", middle.first_cursor)):
                yield SearchRequest("Observation", params, count=1, cursor=cursor.decode(direction, at))

    def threaded(request):
        try:
            return _search_outcome(store.search(SHARED, request))
        except InvalidSearch as exc:
            return "InvalidSearch", str(exc)

    async def awaited(request):
        try:
            return _search_outcome(await store.search_async(SHARED, request))
        except InvalidSearch as exc:
            return "InvalidSearch", str(exc)

    async def both():
        pairs = [(threaded(r), await awaited(r)) for r in requests()]
        await store.close_async()
        return pairs

    pairs = asyncio.run(both())
    for threaded_result, awaited_result in pairs:
        assert threaded_result == awaited_result
    assert len(pairs[0][0][0]) == 3 and pairs[1][0][2] == 2 and pairs[3][0][1] == [("Patient", patient.id)]
    assert pairs[6][0][0] == pairs[7][0][0] == "InvalidSearch"
    keyset = [threaded_result for threaded_result, _ in pairs[len(REQUESTS) :]]
    assert len(keyset) == 4 and all(len(page[0]) == 1 for page in keyset)
    assert [(page[6][0], page[3]) for page in keyset] == [(True, False), (False, True)] * 2  # previous, next
    assert keyset[0][0] != keyset[1][0] and keyset[2][0] != keyset[3][0]
