"""What the assistant saw is on the log: a session's rounds.ehr.response events rebuild exactly the resources
(ids, versions, bodies) its client was given — inline bodies and stored copies of bodies too large for an
event — on the SQL log (SQLite, PostgreSQL) and on Kafka. A failure to record is a 503, a counter and an
unhealthy /health, never a swallowed log line."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from fastapi.testclient import TestClient

from events.blobs import BlobStore
from events.envelope import MAX_EVENT_BYTES
from services.fhir_api.app import create_app
from services.fhir_api.backbone.recorder import returned_resources
from services.fhir_api.backbone.wiring import BackboneSettings, install_event_backbone
from tests.events.projections import helpers as h
from tests.wiring import store_on

FHIR_JSON = {"Content-Type": "application/fhir+json"}
NARRATIVE = '<div xmlns="http://www.w3.org/1999/xhtml">{}</div>'


@pytest.fixture(params=h.BACKENDS)
def env(request: pytest.FixtureRequest) -> Iterator[h.Env]:
    backend = request.param
    bootstrap = request.getfixturevalue("kafka_bootstrap") if backend == "kafka" else None
    url = request.getfixturevalue("postgres_url" if backend == "sql-postgres" else "sqlite_url")
    environment = h.make_env(backend, url, bootstrap)
    yield environment
    h.close_env(environment)


def app_for(env: h.Env, sessions_topic: str | None = None):
    app = create_app(env.settings, store=store_on(env.settings.database_url))
    wired = install_event_backbone(app, env.settings, bus=env.bus,
                                   backbone=BackboneSettings(outbox_relay="off"),
                                   sessions_topic=sessions_topic or env.sessions,
                                   changes_topic=env.fhir_changes)
    return app, wired


def client_session(client: TestClient) -> list:
    """An assistant's reads and writes through one session base; returns every response it was given."""
    sid = client.post("/sessions", json={}).json()["id"]
    base = f"/sessions/{sid}/fhir"
    given = []
    first = {"resourceType": "Patient", "gender": "female"}
    patient = client.post(f"{base}/Patient", content=orjson.dumps(first), headers=FHIR_JSON)
    pid = patient.json()["id"]
    given.append(patient)
    observation = {"resourceType": "Observation", "status": "final",
                   "subject": {"reference": f"Patient/{pid}"},
                   "code": {"coding": [{"system": "http://loinc.org", "code": "2823-3"}]},
                   "valueQuantity": {"value": 4.50, "unit": "mmol/L"}}
    raw = orjson.dumps(observation).replace(b"4.5", b"4.50")  # the decimal's text is part of the record
    given.append(client.post(f"{base}/Observation", content=raw, headers=FHIR_JSON))
    oid = given[-1].json()["id"]
    given.append(client.put(f"{base}/Patient/{pid}", headers=FHIR_JSON, content=orjson.dumps(
        {"resourceType": "Patient", "id": pid, "gender": "female", "birthDate": "1970-01-01"})))
    big = {"resourceType": "Patient", "gender": "male",
           "text": {"status": "generated", "div": NARRATIVE.format("x" * (MAX_EVENT_BYTES + 10_000))}}
    given.append(client.post(f"{base}/Patient", content=orjson.dumps(big), headers=FHIR_JSON))
    big_id = given[-1].json()["id"]
    given.append(client.get(f"{base}/Patient/{pid}"))
    given.append(client.get(f"{base}/Observation/{oid}"))
    given.append(client.get(f"{base}/Observation", params={"patient": pid}))
    given.append(client.get(f"{base}/Patient", params={"_count": "50"}))  # includes the large one: stored
    given.append(client.get(f"{base}/Patient/{big_id}"))
    given.append(client.get(f"{base}/Patient/does-not-exist"))
    given.append(client.get(f"{base}/Patient/{pid}/_history"))
    assert [r.status_code for r in given] == [201, 201, 200, 201, 200, 200, 200, 200, 200, 404, 200]
    assert b"4.50" in given[5].content
    return sid, given


def test_response_events_rebuild_exactly_what_the_client_was_given(env: h.Env) -> None:
    app, wired = app_for(env)
    with TestClient(app) as client:
        sid, given = client_session(client)
    records = [r for r in h.read_all(env, env.sessions, expected=2 * len(given)) if r.key == sid]
    responses = [r.event.data for r in records if r.event.type == "rounds.ehr.response"]
    assert len(responses) == len(given)
    blobs = BlobStore(env.engine)
    stored = 0
    rebuilt: dict[tuple, dict] = {}
    for response, answer in zip(responses, given, strict=True):
        if response.get("bodyRef"):
            body = blobs.get(response["bodyRef"])
            stored += 1
            assert "body" not in response or response["body"] is None
        else:
            body = response["body"].encode()
        assert body == answer.content  # byte for byte what the client read
        assert response["bodySize"] == len(answer.content) and response["status"] == answer.status_code
        assert response["contentType"] == answer.headers["content-type"]
        refs = [(r["resourceType"], r["id"], r.get("versionId")) for r in response["resources"]]
        assert refs == [(v.resource_type, v.id, v.version_id) for v in returned_resources(answer.content)]
        doc = orjson.loads(body)
        for entry in doc.get("entry", []) if doc.get("resourceType") == "Bundle" else [{"resource": doc}]:
            resource = entry["resource"]
            if resource.get("id"):
                rebuilt[(resource["resourceType"], resource["id"], resource["meta"]["versionId"])] = resource
    assert stored >= 2  # the large Patient's read, and the search page holding it
    client_saw = {}
    for answer in given:
        doc = answer.json()
        for entry in doc.get("entry", []) if doc.get("resourceType") == "Bundle" else [{"resource": doc}]:
            resource = entry["resource"]
            if resource.get("id"):
                key = (resource["resourceType"], resource["id"], resource["meta"]["versionId"])
                client_saw[key] = resource
    assert rebuilt == client_saw
    assert {key[2] for key in rebuilt if key[0] == "Patient"} >= {"1", "2"}  # both versions of the patient
    requests = [r.event.data for r in records if r.event.type == "rounds.ehr.request"]
    big_request = requests[3]
    assert big_request["bodyRef"] and len(blobs.get(big_request["bodyRef"])) == big_request["bodySize"]
    assert wired.recorder.health.check()[0] is True


def test_a_failure_to_record_is_a_503_a_counter_and_unhealthy_until_it_recovers(env: h.Env) -> None:
    missing = f"{env.sessions}.never-created"  # publishing to it fails (UnknownTopic), like a lost topic
    app, wired = app_for(env, sessions_topic=missing)
    with TestClient(app) as client:
        sid = client.post("/sessions", json={}).json()["id"]
        assert client.get("/health").status_code == 200
        failed = client.get(f"/sessions/{sid}/fhir/Patient")
        assert failed.status_code == 503 and failed.json()["resourceType"] == "OperationOutcome"
        assert "could not be recorded" in failed.json()["issue"][0]["diagnostics"]
        health = client.get("/health")
        assert health.status_code == 503 and health.json()["status"] == "unhealthy"
        recorder = health.json()["checks"]["event-recorder"]
        assert (recorder["failed"], recorder["recorded"]) == (1, 0)
        assert "UnknownTopic" in recorder["lastError"]
        assert client.get("/fhir/Patient").status_code == 200  # the shared record is not recorded: unaffected
        env.bus.ensure_topics([h.TopicSpec(missing, 3)])  # the outage ends
        assert client.get(f"/sessions/{sid}/fhir/Patient").status_code == 200
        health = client.get("/health").json()
        assert health["status"] == "ok" and health["checks"]["event-recorder"]["recorded"] == 1
    assert wired.recorder.health.failed == 1


def test_concurrent_exchanges_are_recorded_in_pairs_with_dense_sequences(env: h.Env) -> None:
    import asyncio

    import httpx

    app, wired = app_for(env)

    async def traffic() -> dict[str, int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            sids = [(await client.post("/sessions", json={})).json()["id"] for _ in range(3)]
            calls = [client.get(f"/sessions/{sid}/fhir/Patient", params={"_count": str(n)})
                     for n in range(1, 11) for sid in sids]
            answers = await asyncio.gather(*calls)
        assert {a.status_code for a in answers} == {200}
        return {sid: 10 for sid in sids}

    with TestClient(app):  # runs the lifespan; the traffic goes through the ASGI transport concurrently
        expected = asyncio.run(traffic())
    records = h.read_all(env, env.sessions, expected=60)
    for sid, count in expected.items():
        events = [r.event for r in records if r.key == sid]
        assert [e.sequence for e in events] == list(range(1, 2 * count + 1))  # log order = sequence order
        for request, response in zip(events[0::2], events[1::2], strict=True):
            assert (request.type, response.type) == ("rounds.ehr.request", "rounds.ehr.response")
            assert response.causationid == request.id
    assert wired.recorder.health.recorded == 30


def test_a_path_naming_no_possible_session_is_a_404_not_a_failure_to_record(sqlite_url) -> None:
    """`/sessions/0/fhir/...` (all digits, or characters no session id has) names no session Rounds can
    open: a 404 like any unknown session, not an event with an invalid subject, a 503 and an unhealthy
    /health (schemathesis against `rounds serve` found it)."""
    environment = h.make_env("sql-sqlite", sqlite_url)
    try:
        app, wired = app_for(environment)
        with TestClient(app) as client:
            for sid in ("0", "12345", "%C3%97%C3%B8", "a%20b", "nope"):
                for method, path in (("GET", "/Patient/p1"), ("DELETE", "/Patient/p1"), ("POST", "")):
                    answer = client.request(method, f"/sessions/{sid}/fhir{path}", json={})
                    assert answer.status_code == 404, (sid, method, answer.text)
            assert client.get("/health").status_code == 200
        assert wired.recorder.health.failed == 0
    finally:
        h.close_env(environment)
