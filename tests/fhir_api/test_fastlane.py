"""The fast lane (GET read and search without FastAPI routing) answers exactly what the routed app answers:
same status, headers and body, errors included, on the shared record and in sessions."""

from __future__ import annotations

import httpx
import orjson
import pytest

from rounds.migrate import upgrade
from rounds.settings import Settings
from services.fhir_api.app import create_app
from tests.fhir_api.conftest import observation, patient, start_live
from tests.wiring import store_on

BASE = "https://ehr.example/fhir-root"  # configured base: both servers build the same links


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory):
    url = f"sqlite:///{tmp_path_factory.mktemp('fastlane') / 'lane.sqlite'}"
    upgrade(url)
    store = store_on(url)
    started = [
        start_live(create_app(Settings(database_url=url, base_url=BASE), store, fast_lane=lane), store)
        for lane in (True, False)
    ]
    yield [api for api, _, _ in started]
    for _, server, thread in started:
        server.should_exit = True
        thread.join(timeout=10)


def _normal(response: httpx.Response, root: str) -> tuple:
    skip = ("date", "server", "content-length")
    headers = {k: v.replace(root, "ROOT") for k, v in response.headers.items() if k not in skip}
    body = response.content
    if body.startswith(b"{"):
        doc = orjson.loads(body)
        if doc.get("resourceType") == "Bundle":  # fresh per answer
            doc.pop("id")
            doc.pop("meta")
        body = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    return response.status_code, headers, body


def test_fast_lane_answers_like_the_routed_app(servers) -> None:
    lane, routed = servers
    fhir = httpx.Client(base_url=lane.fhir, timeout=60)
    pid = fhir.post("/Patient", json=patient("lane")).json()["id"]
    oids = [
        fhir.post("/Observation", json=observation(pid, code, f"2150-0{m}-01T00:00:00Z")).json()["id"]
        for m, code in ((1, "lane-a"), (2, "lane-b"), (3, "lane-a"))
    ]
    fhir.delete(f"/Observation/{oids[2]}")
    sid = httpx.post(f"{lane.root}/sessions", json={"now": "2150-01-15"}).json()["id"]
    requests: list[tuple[str, dict[str, str]]] = [
        (f"/fhir/Patient/{pid}", {}),
        (f"/fhir/Patient/{pid}", {"If-None-Match": 'W/"1"'}),
        (f"/fhir/Patient/{pid}", {"If-None-Match": 'W/"7"'}),
        (f"/fhir/Patient/{pid}", {"If-None-Match": "garbage"}),
        (f"/fhir/Patient/{pid}?_elements=gender&_format=json", {}),
        (f"/fhir/Patient/{pid}?_summary=true", {"Accept": "application/json"}),
        (f"/fhir/Patient/{pid}", {"Accept": "application/xml"}),
        (f"/fhir/Patient/{pid}?_format=xml", {}),
        ("/fhir/Patient/missing", {}),
        ("/fhir/Patient/bad$id", {}),
        ("/fhir/NoSuchType/1", {}),
        (f"/fhir/Observation/{oids[2]}", {}),
        (f"/fhir/Observation?patient={pid}&_sort=-date&_count=1", {}),
        (f"/fhir/Observation?patient={pid}&_sort=-date&_count=1&_offset=1&_total=accurate", {}),
        (f"/fhir/Observation?subject=Patient/{pid}&code=lane-a,lane-b&date=ge2150-01-15", {}),
        (f"/fhir/Observation?patient={pid}&_summary=count", {}),
        (f"/fhir/Observation?patient={pid}&unknown=1", {}),
        (f"/fhir/Observation?patient={pid}&unknown=1", {"Prefer": "handling=strict"}),
        ("/fhir/Observation?date=not-a-date", {}),
        ("/fhir/Observation?code:below=x", {}),
        ("/fhir/Observation?_sort=nonsense", {}),
        ("/fhir/Observation?_count=-1", {}),
        ("/fhir/NoSuchType?name=x", {}),
        ("/fhir/Patient?name='; DROP TABLE fhir_resource;--", {}),
        ("/fhir/metadata", {}),
        ("/fhir/_history?_count=2", {}),
        ("/fhir/Patient/_history?_count=1", {}),
        (f"/fhir/Patient/{pid}/_history", {}),
        (f"/fhir/Patient/{pid}/_history/1", {}),
        ("/fhir/Patient/", {}),
        (f"/sessions/{sid}/fhir/Patient/{pid}", {}),
        (f"/sessions/{sid}/fhir/Observation/{oids[1]}", {}),  # after the session's clock
        (f"/sessions/{sid}/fhir/Observation?patient={pid}", {}),
        ("/sessions/no-such-session/fhir/Patient/x", {}),
        ("/sessions/no-such-session/fhir/Patient", {}),
    ]
    statuses = set()
    for path, headers in requests:
        fast = httpx.get(lane.root + path, headers=headers, timeout=60)
        slow = httpx.get(routed.root + path, headers=headers, timeout=60)
        assert _normal(fast, lane.root) == _normal(slow, routed.root), path
        statuses.add(fast.status_code)
    assert {200, 304, 400, 404, 406, 410} <= statuses
