"""FHIR interactions through a session base become rounds.ehr.request/response events in order, with the
session id; writes through /fhir reach the FHIR changes topic through the outbox and the in-process relay."""

from __future__ import annotations

import hashlib
import threading

import orjson
from fastapi.testclient import TestClient

from events.sequences import SessionSequences
from foundation.db import make_engine
from rounds.migrate import upgrade
from services.fhir_api.app import create_app
from services.fhir_api.backbone.wiring import BackboneSettings, install_event_backbone
from tests.events.projections.helpers import Env, read_all
from tests.wiring import store_on

PATIENT = {"resourceType": "Patient", "name": [{"family": "Doe"}], "gender": "female"}


def app_for(env: Env, relay: str):
    app = create_app(env.settings, store=store_on(env.settings.database_url))
    wired = install_event_backbone(app, env.settings, bus=env.bus,
                                   backbone=BackboneSettings(outbox_relay=relay),
                                   sessions_topic=env.sessions, changes_topic=env.fhir_changes)
    return app, wired


def test_session_interactions_are_recorded_in_order(env: Env) -> None:
    app, _ = app_for(env, relay="off")
    body = orjson.dumps(PATIENT)
    with TestClient(app) as client:
        sid = client.post("/sessions", json={}).json()["id"]
        base = f"/sessions/{sid}/fhir"
        created = client.post(f"{base}/Patient", content=body,
                              headers={"Content-Type": "application/fhir+json"})
        pid = created.json()["id"]
        read = client.get(f"{base}/Patient/{pid}")
        client.get(f"{base}/Patient", params={"family": "Doe", "_count": "5"})
        missing = client.get(f"{base}/Patient/does-not-exist")
        client.get(f"/sessions/{sid}")  # the sessions API itself is not an EHR interaction
        client.get("/fhir/Patient")  # the shared record is not a session: not recorded
    records = read_all(env, env.sessions, expected=8)
    assert len(records) == 8
    events = [r.event for r in records]
    assert {r.key for r in records} == {sid} and {e.subject for e in events} == {sid}
    assert [e.sequence for e in events] == list(range(1, 9))
    assert [e.type for e in events] == ["rounds.ehr.request", "rounds.ehr.response"] * 4
    requests, responses = events[0::2], events[1::2]
    assert [(e.data["method"], e.data["url"]) for e in requests] == [
        ("POST", "Patient"), ("GET", f"Patient/{pid}"), ("GET", "Patient"), ("GET", "Patient/does-not-exist")]
    assert requests[2].data["query"] == {"family": ["Doe"], "_count": ["5"]}
    assert missing.status_code == 404
    assert [e.data["status"] for e in responses] == [201, 200, 200, 404]
    assert requests[0].data["bodyDigest"] == "sha256:" + hashlib.sha256(body).hexdigest()
    assert responses[1].data["bodyDigest"] == "sha256:" + hashlib.sha256(read.content).hexdigest()
    for request, response in zip(requests, responses, strict=True):
        assert response.causationid == request.id
        assert response.data["requestId"] == request.data["requestId"] == request.correlationid
        assert response.data["latencyMs"] >= 0


def test_write_through_fhir_reaches_fhir_changes_via_in_process_relay(env: Env) -> None:
    app, wired = app_for(env, relay="in-process")
    with TestClient(app) as client:
        created = client.post("/fhir/Patient", content=orjson.dumps(PATIENT),
                              headers={"Content-Type": "application/fhir+json"})
        assert created.status_code == 201
        pid = created.json()["id"]
        [record] = read_all(env, env.fhir_changes, expected=1, timeout_s=60)
    assert wired.relay_thread is not None and wired._closed  # the app's shutdown stopped the relay
    assert record.key == f"Patient/{pid}"
    assert record.event.type == "rounds.fhir.resource.created"
    assert record.event.data == {"resourceType": "Patient", "id": pid, "versionId": "1"}
    assert read_all(env, env.sessions, expected=0, timeout_s=1) == []  # /fhir is not a session


def test_session_sequences_are_dense_and_unique_under_concurrency(database_url: str) -> None:
    upgrade(database_url)
    engine = make_engine(database_url)
    sequences = SessionSequences(engine)
    got: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(10):
            allocated = sequences.allocate("s-concurrent", 2)
            with lock:
                got.extend(allocated)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(1, 81))
    assert sequences.last("s-concurrent") == 80 and sequences.last("s-other") == 0
    engine.dispose()
