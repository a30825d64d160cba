"""No read may hang the server: every statement of the served store is bounded
(ROUNDS_QUERY_TIMEOUT_MS: PostgreSQL statement_timeout, a SQLite progress handler); a query stopped by the
bound answers 503 with an OperationOutcome, and the server and the store keep serving.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.store.interface import Context, QueryTimeout
from tests.fhir_api.conftest import LiveApi, assert_outcome, start_live
from tests.wiring import app_on, load_on, store_on

# Statements that run for many seconds when nothing stops them.
RUNAWAY = {
    "sqlite": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000000) "
    "SELECT count(*) FROM c",
    "postgresql": "SELECT pg_sleep(60)",
}
# A real search over every Observation of the store (every row's token text read, counted and sorted).
COSTLY = "Observation?code:text=no-such-text&_total=accurate&_sort=-date"


@pytest.fixture
def loaded(database_url: str, tmp_path) -> str:
    upgrade(database_url)
    rows = [
        {
            "resourceType": "Observation",
            "id": f"o{i}",
            "status": "final",
            "code": {"coding": [{"system": "urn:lab", "code": str(i % 50), "display": f"lab test {i % 50}"}]},
            "subject": {"reference": f"Patient/p{i % 20}"},
            "effectiveDateTime": f"2150-01-{1 + i % 28:02d}T{i % 24:02d}:00:00Z",
        }
        for i in range(6000)
    ]
    (tmp_path / "Observation.ndjson").write_text("\n".join(json.dumps(r) for r in rows))
    assert load_on(database_url, tmp_path, workers=1).errors == 0
    return database_url


def _serve(database_url: str, timeout_ms: int) -> Iterator[LiveApi]:
    app = app_on(Settings(database_url=database_url, query_timeout_ms=timeout_ms))
    api, server, thread = start_live(app, app.state.store)
    yield api
    server.should_exit = True
    thread.join(timeout=10)
    app.state.store.engine.dispose()


def test_a_runaway_statement_is_stopped_and_the_store_keeps_serving(loaded: str) -> None:
    store = store_on(loaded, query_timeout_ms=300)
    try:
        runaway = RUNAWAY[store.engine.dialect.name]
        with pytest.raises(QueryTimeout) as stopped:
            store._reading(lambda conn: conn.exec_driver_sql(runaway).all())
        assert stopped.value.status == 503 and "300 ms" in str(stopped.value)
        with pytest.raises(QueryTimeout), store._conn(write=True) as conn:  # in a write transaction too
            conn.exec_driver_sql(runaway).all()
        assert store.read(Context(), "Observation", "o7").id == "o7"  # the same connections serve on
    finally:
        store.engine.dispose()
    unbounded = store_on(loaded)  # the bound is the store's: without one, statements run to the end
    try:
        assert unbounded._reading(lambda conn: conn.exec_driver_sql("SELECT 1").scalar()) == 1
    finally:
        unbounded.engine.dispose()


def test_a_search_past_the_timeout_answers_503_and_the_server_serves_on(loaded: str) -> None:
    sessions = store_on(loaded)
    sid = sessions.create_session(None)
    sessions.engine.dispose()
    served = _serve(loaded, timeout_ms=1)  # deliberately tiny: a search over every Observation exceeds it
    api = next(served)
    try:
        with httpx.Client(timeout=60) as client:
            # (in the session, the session's own lookup may be what the bound stops first: 503 as well)
            for base in (api.fhir, f"{api.root}/sessions/{sid}/fhir"):
                body = assert_outcome(client.get(f"{base}/{COSTLY}"), 503)
                assert body["issue"][0]["code"] == "timeout"
                assert "1 ms" in body["issue"][0]["diagnostics"]
            assert client.get(f"{api.fhir}/metadata").status_code == 200  # the server answers others
    finally:
        next(served, None)
    relaxed = _serve(loaded, timeout_ms=0)  # the same search, unbounded, is a valid one
    api = next(relaxed)
    try:
        with httpx.Client(timeout=120) as client:
            answer = client.get(f"{api.fhir}/{COSTLY}")
            assert answer.status_code == 200 and answer.json()["total"] == 0
    finally:
        next(relaxed, None)


def test_the_timeout_is_configured_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("ROUNDS_QUERY_TIMEOUT_MS", "2500")
    assert Settings().query_timeout_ms == 2500
    monkeypatch.setenv("ROUNDS_QUERY_TIMEOUT_MS", "-1")
    with pytest.raises(ValueError):
        Settings()
