"""Every search parameter the CapabilityStatement lists is applied (its self link keeps it); every one the
server does not support is absent from it and refused under `Prefer: handling=strict` with an
OperationOutcome (lenient handling drops it from the self link). `Patient?deceased` answers what the as-of
view shows: a patient whose death is after the session's clock is not deceased there."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest
from fastapi.testclient import TestClient

from rounds.migrate import upgrade
from rounds.settings import get_settings
from services.fhir_api.search.registry import params_for
from tests.wiring import app_on

STRICT = {"Prefer": "handling=strict"}
SAMPLE = {
    "date": "ge2150-01-01",
    "number": "1",
    "quantity": "1",
    "reference": "Patient/x",
    "uri": "http://x",
    "composite": "8480-6$2150",
    "token": "x",
    "string": "x",
}


@pytest.fixture
def client(sqlite_url: str):
    upgrade(sqlite_url)
    app = app_on(get_settings().model_copy(update={"database_url": sqlite_url}))
    with TestClient(app, base_url="http://rounds") as c:
        yield c
    app.state.store.engine.dispose()


def _self_params(bundle: dict) -> set[str]:
    link = next(x["url"] for x in bundle["link"] if x["relation"] == "self")
    return {name.split(":")[0] for name, _ in parse_qsl(urlsplit(link).query)}


def test_listed_parameters_apply_and_unlisted_are_refused(client) -> None:
    statement = client.get("/fhir/metadata").json()
    resources = statement["rest"][0]["resource"]
    listed = {res["type"]: {p["name"] for p in res.get("searchParam", ())} for res in resources}
    applied = refused = 0
    for rtype, names in sorted(listed.items()):
        for name, param in params_for(rtype).items():
            value = "true" if name == "deceased" else SAMPLE.get(param.type, "x")
            if name in names:
                assert not param.unsupported, (rtype, name)
                got = client.get(f"/fhir/{rtype}", params={name: value, "_count": 1}, headers=STRICT)
                assert got.status_code == 200, (rtype, name, got.text[:200])
                assert name in _self_params(got.json()) or name.startswith("_"), (rtype, name)
                applied += 1
            elif param.unsupported:
                got = client.get(f"/fhir/{rtype}", params={name: value}, headers=STRICT)
                assert got.status_code == 400, (rtype, name, got.status_code)
                assert got.json()["resourceType"] == "OperationOutcome"
                lenient = client.get(f"/fhir/{rtype}", params={name: value})
                assert lenient.status_code == 200 and name not in _self_params(lenient.json())
                refused += 1
    assert "deceased" in listed["Patient"] and "death-date" in listed["Patient"]
    assert applied > 300 and refused > 30, (applied, refused)


def test_deceased_follows_the_session_clock(client) -> None:
    marks = (
        ("dies", {"deceasedDateTime": "2180-05-01T10:00:00Z"}),
        ("lives", {}),
        ("flag", {"deceasedBoolean": True}),
    )
    for pid, extra in marks:
        body = {"resourceType": "Patient", "id": pid, **extra}
        assert client.put(f"/fhir/Patient/{pid}", json=body).is_success

    def ids(base: str, query: dict) -> set[str]:
        bundle = client.get(f"{base}/Patient", params=query).json()
        return {e["resource"]["id"] for e in bundle.get("entry", ())}

    before = client.post("/sessions", json={"now": "2180-04-01T00:00:00Z"}).json()["fhirBase"]
    after = client.post("/sessions", json={"now": "2180-06-01T00:00:00Z"}).json()["fhirBase"]
    for base, dead in (("/fhir", {"dies", "flag"}), (before, {"flag"}), (after, {"dies", "flag"})):
        base = base.removeprefix("http://rounds")
        assert ids(base, {"deceased": "true"}) == dead, base
        assert ids(base, {"deceased": "false"}) == {"dies", "lives", "flag"} - dead, base
        assert ids(base, {"deceased": "true,false"}) == {"dies", "lives", "flag"}
        count = client.get(f"{base}/Patient", params={"deceased": "true", "_summary": "count"}).json()
        assert count["total"] == len(dead)
    # a search on the hidden death date finds nothing before it
    assert ids(before.removeprefix("http://rounds"), {"_id": "dies", "death-date": "gt2180-04-01"}) == set()
