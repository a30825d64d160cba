"""A valid request always answers (issue 38, quotas): a search whose response lists more resources than an
event can name — `Specimen?subject=…&_revinclude=Observation:specimen&_count=1000`, which answered 503 on
the demo record — is recorded with its id list in the blob store (`resourcesRef`), on SQLite and PostgreSQL,
and the scorer reads that list back as what the assistant was given."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from fastapi.testclient import TestClient

from contracts.trajectory_log import LoggedEvent, build_trajectory
from events.blobs import BlobStore
from events.envelope import MAX_EVENT_BYTES
from services.consumers.scoring import stored_text
from services.fhir_api.backbone.recorder import returned_resources
from tests.events.projections import helpers as h
from tests.fhir_api.backbone.test_recording import app_for
from tests.wiring import load_on

OBSERVATIONS = 3000  # ~75 bytes each as (type, id, version): ~320 KB of ids, over the 256 KiB event


@pytest.fixture(params=["sql-sqlite", "sql-postgres"])
def env(request: pytest.FixtureRequest) -> Iterator[h.Env]:
    url = request.getfixturevalue("postgres_url" if request.param == "sql-postgres" else "sqlite_url")
    environment = h.make_env(request.param, url)
    yield environment
    h.close_env(environment)


def _record(folder: Path) -> None:
    """One patient, one specimen and OBSERVATIONS results taken from it (ids as long as MIMIC's)."""
    folder.mkdir()
    lines = {"Patient": [{"resourceType": "Patient", "id": "p1", "gender": "female"}],
             "Specimen": [{"resourceType": "Specimen", "id": "s1", "subject": {"reference": "Patient/p1"}}],
             "Observation": [{"resourceType": "Observation", "id": f"o{n:05d}-{'0' * 56}", "status": "final",
                              "code": {"text": "potassium"}, "subject": {"reference": "Patient/p1"},
                              "specimen": {"reference": "Specimen/s1"},
                              "effectiveDateTime": "2150-01-01T08:00:00Z",
                              "valueQuantity": {"value": 4.1, "unit": "mmol/L"}}
                             for n in range(OBSERVATIONS)]}
    for kind, resources in lines.items():
        (folder / f"{kind}.ndjson").write_bytes(b"\n".join(orjson.dumps(r) for r in resources) + b"\n")


def test_a_response_listing_thousands_of_resources_is_recorded_and_answers(env: h.Env,
                                                                          tmp_path: Path) -> None:
    _record(tmp_path / "record")
    assert load_on(env.settings.database_url, tmp_path / "record", workers=1).errors == 0
    app, wired = app_for(env)
    with TestClient(app) as client:
        sid = client.post("/sessions", json={"now": "2151-01-01T00:00:00Z"}).json()["id"]
        doctor = client.get(f"/sessions/{sid}/fhir/Specimen", params={
            "subject": "Patient/p1", "_revinclude": "Observation:specimen", "_count": "1000"})
        assert doctor.status_code == 200, doctor.text[:300]
        assert len(doctor.json()["entry"]) == OBSERVATIONS + 1
    assert wired.recorder.health.check()[0] is True

    records = [r for r in h.read_all(env, env.sessions, expected=2) if r.key == sid]
    (response,) = [r for r in records if r.event.type == "rounds.ehr.response"]
    assert len(response.raw) <= MAX_EVENT_BYTES
    data = response.event.data
    assert data.get("resources") is None and data["resourcesRef"] and data["bodyRef"]
    blobs = BlobStore(env.engine)
    listed = orjson.loads(blobs.get(data["resourcesRef"]))
    assert listed == [v.to_data() for v in returned_resources(doctor.content)]
    assert blobs.get(data["bodyRef"]) == doctor.content

    # The scorer's grounding sees every resource the assistant was given.
    logged = [LoggedEvent("rounds.message.doctor", _doctor_message()),
              *(LoggedEvent(r.event.type, r.event.data) for r in records)]
    with env.engine.connect() as conn:
        log = build_trajectory(sid, logged, stored_text.load(conn, stored_text.refs(logged)))
    (call,) = log.turns[0].ehr
    assert call.status == 200 and len(call.resources) == OBSERVATIONS + 1
    assert call.resources[0] == "Specimen/s1"


def _doctor_message() -> dict:
    from events.payloads import communication

    return communication("m1", "doctor", ["assistant"], "Which results came from her last specimen?",
                         turn=0).to_data()
