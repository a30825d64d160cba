"""Sessions over HTTP: the sessions API, copy-on-write isolation, the as-of clock (hidden by the store)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.fhir_api.conftest import assert_outcome, observation, patient


def open_session(api, now: str | None = "2150-03-01T00:00:00Z") -> dict:
    r = httpx.post(f"{api.root}/sessions", json={"now": now} if now else {})
    assert r.status_code == 201, r.text
    return r.json()


@pytest.fixture
def record(client, tag) -> dict:
    """A patient in the shared record with one lab before and one after 2150-03-01."""
    pid = client.post("/Patient", json=patient(tag)).json()["id"]
    early = client.post("/Observation", json=observation(pid, f"s-{tag}", "2150-01-15T08:00:00Z")).json()[
        "id"
    ]
    late = client.post("/Observation", json=observation(pid, f"s-{tag}", "2150-06-15T08:00:00Z")).json()["id"]
    return {"patient": pid, "early": early, "late": late, "code": f"http://loinc.org|s-{tag}"}


def test_sessions_api_shape(api):
    s = open_session(api)
    assert s["fhirBase"] == f"{api.root}/sessions/{s['id']}/fhir" and s["now"].startswith(
        "2150-03-01T00:00:00"
    )
    got = httpx.get(f"{api.root}/sessions/{s['id']}")
    assert got.status_code == 200 and got.json() == s
    assert httpx.delete(f"{api.root}/sessions/{s['id']}").status_code == 204
    assert_outcome(httpx.get(f"{api.root}/sessions/{s['id']}"), 404)
    assert_outcome(httpx.get(f"{s['fhirBase']}/metadata"), 404)
    assert_outcome(httpx.delete(f"{api.root}/sessions/{s['id']}"), 404)
    assert open_session(api, now=None)["now"] is None


def test_bad_session_requests(api):
    assert_outcome(httpx.post(f"{api.root}/sessions", json={"now": "next tuesday"}), 400)
    assert_outcome(httpx.post(f"{api.root}/sessions", json={"now": 2150}), 400)
    assert_outcome(
        httpx.post(f"{api.root}/sessions", content=b"{nope", headers={"Content-Type": "application/json"}),
        400,
    )
    assert_outcome(httpx.get(f"{api.root}/sessions/'; DROP TABLE fhir_session;--/fhir/Patient"), 404)


def test_now_hides_later_labs_everywhere(api, record):
    s = open_session(api)
    fhir = httpx.Client(base_url=s["fhirBase"], timeout=30)
    assert fhir.get(f"/Observation/{record['early']}").status_code == 200
    assert_outcome(fhir.get(f"/Observation/{record['late']}"), 404)
    found = fhir.get("/Observation", params={"code": record["code"], "_total": "accurate"}).json()
    assert [e["resource"]["id"] for e in found["entry"]] == [record["early"]] and found["total"] == 1
    assert fhir.get("/Observation", params={"code": record["code"], "_summary": "count"}).json()["total"] == 1
    everything = fhir.get(f"/Patient/{record['patient']}/$everything").json()
    ids = {e["resource"]["id"] for e in everything["entry"]}
    assert record["early"] in ids and record["late"] not in ids
    rev = fhir.get("/Patient", params={"_id": record["patient"], "_revinclude": "Observation:subject"}).json()
    included = {e["resource"]["id"] for e in rev["entry"] if e["search"]["mode"] == "include"}
    assert included == {record["early"]}
    assert all(e["fullUrl"].startswith(s["fhirBase"] + "/") for e in everything["entry"])
    shared = httpx.get(f"{api.fhir}/Observation", params={"code": record["code"], "_summary": "count"}).json()
    assert shared["total"] == 2  # the shared record has no clock


def test_writes_stay_in_their_session_until_it_is_deleted(api, record, tag):
    a, b = open_session(api), open_session(api)
    new = observation(record["patient"], f"w-{tag}", "2150-02-01T00:00:00Z")
    created = httpx.post(f"{a['fhirBase']}/Observation", json=new)
    assert created.status_code == 201
    oid = created.json()["id"]
    assert created.headers["location"].startswith(a["fhirBase"] + "/Observation/")
    assert httpx.get(f"{a['fhirBase']}/Observation/{oid}").status_code == 200
    assert httpx.get(f"{b['fhirBase']}/Observation/{oid}").status_code == 404
    assert httpx.get(f"{api.fhir}/Observation/{oid}").status_code == 404
    # an update in session a shadows the shared resource there only
    shared_patient = httpx.get(f"{api.fhir}/Patient/{record['patient']}").json()
    changed = httpx.put(
        f"{a['fhirBase']}/Patient/{record['patient']}", json={**shared_patient, "gender": "male"}
    )
    assert changed.status_code == 200
    assert httpx.get(f"{a['fhirBase']}/Patient/{record['patient']}").json()["gender"] == "male"
    assert httpx.get(f"{b['fhirBase']}/Patient/{record['patient']}").json()["gender"] == "female"
    assert httpx.get(f"{api.fhir}/Patient/{record['patient']}").json()["gender"] == "female"
    assert httpx.delete(f"{api.root}/sessions/{a['id']}").status_code == 204
    again = open_session(api)
    assert httpx.get(f"{again['fhirBase']}/Observation/{oid}").status_code == 404
    assert httpx.get(f"{api.fhir}/Patient/{record['patient']}").json()["gender"] == "female"


def test_concurrent_sessions_never_see_each_other(api, record, tag):
    sessions = [open_session(api) for _ in range(2)]

    def write(s: dict) -> list[str]:
        with httpx.Client(base_url=s["fhirBase"], timeout=30) as c:
            return [
                c.post(
                    "/Observation",
                    json=observation(record["patient"], f"c-{tag}", "2150-02-01T00:00:00Z", value=i),
                ).json()["id"]
                for i in range(8)
            ]

    with ThreadPoolExecutor(2) as pool:
        written = list(pool.map(write, sessions))
    for s, own in zip(sessions, written, strict=True):
        seen = httpx.get(
            f"{s['fhirBase']}/Observation", params={"code": f"http://loinc.org|c-{tag}", "_count": 100}
        ).json()
        assert sorted(e["resource"]["id"] for e in seen["entry"]) == sorted(own)


def test_a_clocked_session_serves_as_of_views_over_http_and_in_bundles(api, client, tag):
    """Reads, searches and batch/transaction GETs of a clocked session answer from the as-of views."""
    pid = client.post("/Patient", json=patient(tag, deceasedDateTime="2150-06-01T00:00:00Z")).json()["id"]
    s = open_session(api)  # now = 2150-03-01
    fhir = httpx.Client(base_url=s["fhirBase"], timeout=30)
    assert "deceasedDateTime" not in fhir.get(f"/Patient/{pid}").json()
    assert client.get(f"/Patient/{pid}").json()["deceasedDateTime"].startswith("2150-06-01")
    dead = fhir.get("/Patient", params={"_id": pid, "death-date": "gt2150-03-01"}).json()
    assert dead.get("total", 0) == 0 and not dead.get("entry")
    for kind in ("batch", "transaction"):
        bundle = {
            "resourceType": "Bundle",
            "type": kind,
            "entry": [
                {"request": {"method": "GET", "url": f"Patient/{pid}"}},
                {"request": {"method": "GET", "url": f"Patient?_id={pid}"}},
            ],
        }
        answered = fhir.post("/", json=bundle).json()
        read, searched = (e["resource"] for e in answered["entry"])
        assert "deceasedDateTime" not in read, kind
        assert "deceasedDateTime" not in searched["entry"][0]["resource"], kind
