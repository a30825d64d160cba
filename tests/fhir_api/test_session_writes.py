"""GET /sessions/{id}/writes: the sandbox's final state (what scorers check), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.app import create_app
from tests.fhir_api.conftest import assert_outcome, observation, patient
from tests.wiring import store_on

FHIR_JSON = {"Content-Type": "application/fhir+json"}


@pytest.fixture
def client(database_url: str) -> Iterator[TestClient]:
    upgrade(database_url)
    store = store_on(database_url)
    with TestClient(create_app(Settings(database_url=database_url), store)) as c:
        yield c
    store.engine.dispose()


def _session(client: TestClient) -> str:
    r = client.post("/sessions", json={"now": "2150-03-01T00:00:00Z"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_writes_are_the_final_state_of_the_session_only(client: TestClient) -> None:
    shared = client.post("/fhir/Patient", json=patient("w1"), headers=FHIR_JSON).json()["id"]
    kept = client.post("/fhir/Observation", json=observation(shared, "k", "2150-01-01T00:00:00Z"),
                       headers=FHIR_JSON).json()["id"]
    sid, other = _session(client), _session(client)
    base = f"/sessions/{sid}/fhir"
    created = client.post(f"{base}/Observation", json=observation(shared, "c", "2150-02-01T00:00:00Z", 2.0),
                          headers=FHIR_JSON).json()["id"]
    # updated twice: only the last version is the final state
    for value in (3.0, 4.0):
        body = {**observation(shared, "c", "2150-02-01T00:00:00Z", value), "id": created}
        assert client.put(f"{base}/Observation/{created}", json=body, headers=FHIR_JSON).status_code == 200
    assert client.delete(f"{base}/Observation/{kept}").status_code in (200, 204)  # shadows the shared one
    client.post(f"/sessions/{other}/fhir/Patient", json=patient("w2"), headers=FHIR_JSON)

    r = client.get(f"/sessions/{sid}/writes")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/fhir+json")
    doc = r.json()
    assert doc["resourceType"] == "Bundle" and doc["type"] == "history" and doc["total"] == 2
    entries = {e["fullUrl"].rsplit("/", 2)[-1]: e for e in doc["entry"]}
    assert set(entries) == {created, kept}
    final = entries[created]
    assert final["resource"]["valueQuantity"]["value"] == 4.0
    assert final["response"]["etag"] == 'W/"3"' and final["request"]["method"] == "PUT"
    gone = entries[kept]
    assert "resource" not in gone and gone["request"] == {"method": "DELETE", "url": f"Observation/{kept}"}
    # the shared record is untouched and the other session's write is not this session's
    assert client.get(f"/fhir/Observation/{kept}").status_code == 200
    assert client.get(f"/sessions/{other}/writes").json()["total"] == 1


def test_writes_of_a_quiet_session_and_of_an_unknown_one(client: TestClient) -> None:
    sid = _session(client)
    doc = client.get(f"/sessions/{sid}/writes").json()
    assert doc["total"] == 0 and "entry" not in doc
    assert_outcome(client.get("/sessions/nope/writes"), 404)
