"""A patient-confined session token by every route that could leave the compartment: batch and
transaction entries, type / instance / system `_history`, `_include` / `_revinclude`, `$everything`, and
conditional create. The client is fhirpy passing the session's token; the record holds a second patient whose
data must never come back. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fhirpy import SyncFHIRClient
from fhirpy.base.exceptions import ForbiddenError

from services.fhir_api.auth.scopes import parse_scopes
from services.fhir_api.auth.tokens import issue
from tests.fhir_api.conftest import LiveApi, observation, patient, secured_api

# R4's Patient CompartmentDefinition as the server reads it: type -> parameter -> element paths
COMPARTMENT = json.loads((Path(__file__).resolve().parents[2] / "services" / "fhir_api" / "auth" / "data"
                          / "patient_compartment.json").read_text())["resources"]


def fhir(base: str, token: str) -> SyncFHIRClient:
    return SyncFHIRClient(base, authorization=f"Bearer {token}")


def seed(admin: SyncFHIRClient) -> dict:
    """Patients a and b, each with labs and an encounter; one practitioner who performed labs of both; a panel
    of a's that (wrongly, as real data sometimes does) has a lab of b as member; a lab moved from b to a; one
    deleted lab each; and b's lab carrying the identifier a conditional create will look for."""
    ids: dict = {}
    doctor = admin.resource("Practitioner", name=[{"family": "Shared"}])
    doctor.save()
    ids["doctor"] = doctor.id
    for name in ("a", "b"):
        p = admin.resource("Patient", **patient(f"conf-{name}"))
        p.save()
        ids[name] = p.id
        lab = admin.resource("Observation", **observation(p.id, f"conf-{name}", "2150-01-01T00:00:00Z"),
                             performer=[{"reference": f"Practitioner/{doctor.id}"}],
                             identifier=[{"system": "urn:lab", "value": f"lab-{name}"}])
        lab.save()
        lab["valueQuantity"]["value"] = 2.0
        lab.save()  # a second version
        ids[f"lab_{name}"] = lab.id
        gone = admin.resource("Observation", **observation(p.id, f"gone-{name}", "2150-01-02T00:00:00Z"))
        gone.save()
        gone.delete()
        ids[f"gone_{name}"] = gone.id
        admin.resource("Encounter", status="finished", subject={"reference": f"Patient/{p.id}"},
                       **{"class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode",
                                    "code": "IMP"}}).save()
    panel = admin.resource("Observation", **observation(ids["a"], "conf-panel", "2150-01-03T00:00:00Z"),
                           hasMember=[{"reference": f"Observation/{ids['lab_b']}"}])
    panel.save()
    ids["panel"] = panel.id
    moved = admin.resource("Observation", **observation(ids["b"], "conf-moved", "2150-01-04T00:00:00Z"))
    moved.save()
    moved["subject"] = {"reference": f"Patient/{ids['a']}"}
    moved.save()
    ids["moved"] = moved.id
    return ids


def resources_in(value: object) -> Iterator[dict]:
    """Every resource in an answer, bundles inside bundles (batch entries) included."""
    if isinstance(value, dict):
        if "resourceType" in value:
            yield value
        for item in value.values():
            yield from resources_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from resources_in(item)


def _at(node: object, steps: list[str]) -> Iterator[object]:
    if isinstance(node, list):
        for item in node:
            yield from _at(item, steps)
    elif not steps:
        yield node
    elif isinstance(node, dict):
        yield from _at(node.get(steps[0]), steps[1:])


def in_compartment_of(resource: dict, patient_id: str) -> bool:
    """Whether the compartment table puts `resource` in `patient_id`'s compartment (or it is that Patient)."""
    if resource.get("resourceType") == "Patient":
        return resource.get("id") == patient_id
    paths = [p for params in COMPARTMENT.get(resource.get("resourceType"), {}).values() for p in params]
    return any(isinstance(ref, dict) and str(ref.get("reference", "")).split("/_history/")[0]
               == f"Patient/{patient_id}" for path in paths for ref in _at(resource, path.split(".")))


def assert_nothing_of_b(answer: dict, ids: dict) -> None:
    """No resource in b's compartment (by the table), none of b's by id, none with b's codes; a's panel may
    name b's lab's id."""
    for resource in resources_in(answer):
        assert resource.get("id") not in (ids["b"], ids["lab_b"], ids["gone_b"]), resource
        assert not in_compartment_of(resource, ids["b"]), resource
        text = json.dumps(resource)
        for marker in ('"conf-b"', '"gone-b"'):
            assert marker not in text or resource["resourceType"] == "Bundle", (marker, resource)


def entries(bundle: dict) -> list[dict]:
    return [e["resource"] for e in bundle.get("entry", []) if "resource" in e]


def check_confinement(api: LiveApi) -> None:
    admin_token = issue(api.app.state.auth.key, parse_scopes("system/*.cruds"), expires_in=600)
    ids = seed(fhir(api.fhir, admin_token))
    a, b = ids["a"], ids["b"]
    opened = httpx.post(f"{api.root}/sessions", json={"patient": f"Patient/{a}"},
                        headers={"Authorization": f"Bearer {admin_token}"})
    assert opened.status_code == 201, opened.text
    session = opened.json()
    client = fhir(session["fhirBase"], session["accessToken"])

    # _include / _revinclude: what lies outside the compartment is left out, the rest comes
    panel = client.execute("Observation", method="get",
                           params={"_id": ids["panel"], "_include": "Observation:has-member"})
    assert [r["id"] for r in entries(panel)] == [ids["panel"]]
    by_doctor = client.execute("Practitioner", method="get",
                               params={"_id": ids["doctor"], "_revinclude": "Observation:performer"})
    assert {r["id"] for r in entries(by_doctor)} == {ids["doctor"], ids["lab_a"]}
    labs = client.execute("Observation", method="get", params={
        "_include": ["Observation:subject", "Observation:performer", "Observation:has-member"],
        "_revinclude": "Observation:has-member"})
    assert {r["id"] for r in entries(labs) if r["resourceType"] == "Patient"} == {a}
    assert ids["doctor"] in {r["id"] for r in entries(labs)}
    mine = client.execute("Patient", method="get", params={"_revinclude": ["Observation:subject",
                                                                           "Encounter:subject"]})
    assert {r["resourceType"] for r in entries(mine)} == {"Patient", "Observation", "Encounter"}
    for answer in (panel, by_doctor, labs, mine):
        assert_nothing_of_b(answer, ids)

    # _history, type / instance / system level: only the compartment's versions (tombstones included)
    history = client.execute("Observation/_history", method="get", params={"_count": 100})
    assert "total" not in history
    urls = [e["request"]["url"] for e in history["entry"]]
    assert f"Observation/{ids['gone_a']}" in urls and f"Observation/{ids['lab_a']}" in urls
    assert sum(u == f"Observation/{ids['moved']}" for u in urls) == 1  # its version about b is left out
    moved = client.execute(f"Observation/{ids['moved']}/_history", method="get")
    assert [r["subject"]["reference"] for r in entries(moved)] == [f"Patient/{a}"]
    assert len(entries(client.execute(f"Observation/{ids['lab_a']}/_history", method="get"))) == 2
    everything_history = client.execute("_history", method="get", params={"_count": 500})
    assert everything_history.get("entry")
    for answer in (history, moved, everything_history):
        assert_nothing_of_b(answer, ids)
    for path in (f"Observation/{ids['lab_b']}/_history", f"Patient/{b}/_history",
                 f"Observation/{ids['lab_b']}/_history/1"):
        with pytest.raises(ForbiddenError):
            client.execute(path, method="get")

    # $everything: the patient's own, without what is outside; another patient's refused
    everything = client.execute(f"Patient/{a}/$everything", method="get")
    assert ids["panel"] in {r["id"] for r in entries(everything)}
    assert_nothing_of_b(everything, ids)
    with pytest.raises(ForbiddenError):
        client.execute(f"Patient/{b}/$everything", method="get")

    # conditional create: criteria matching b's lab do not hand it out
    made = httpx.post(f"{session['fhirBase']}/Observation",
                      json=observation(a, "conf-cond", "2150-02-01T00:00:00Z"),
                      headers={"Authorization": f"Bearer {session['accessToken']}",
                               "If-None-Exist": "identifier=urn:lab|lab-b"})
    assert made.status_code == 201 and made.json()["subject"]["reference"] == f"Patient/{a}", made.text

    # batch: each entry held to the compartment, refused ones are that entry's 403
    batch = client.execute("", data={"resourceType": "Bundle", "type": "batch", "entry": [
        {"request": {"method": "GET", "url": "Observation?_count=100"}},
        {"request": {"method": "GET", "url": f"Observation/{ids['lab_b']}"}},
        {"request": {"method": "GET", "url": f"Patient/{b}"}},
        {"request": {"method": "GET", "url": f"Patient/{b}/$everything"}},
        {"request": {"method": "GET", "url": f"Patient/{a}/$everything"}},
        {"request": {"method": "GET",
                     "url": f"Observation?_id={ids['panel']}&_include=Observation:has-member"}},
        {"request": {"method": "GET", "url": "Observation/_history"}},
        {"request": {"method": "GET", "url": f"Observation/{ids['lab_b']}/_history"}},
        {"request": {"method": "POST", "url": "Observation"},
         "resource": observation(b, "conf-batch-b", "2150-03-01T00:00:00Z")},
        {"request": {"method": "POST", "url": "Observation"},
         "resource": observation(a, "conf-batch-a", "2150-03-01T00:00:00Z")},
        {"request": {"method": "POST", "url": "Observation", "ifNoneExist": "identifier=urn:lab|lab-b"},
         "resource": observation(a, "conf-batch-cond", "2150-03-01T00:00:00Z")},
        {"request": {"method": "DELETE", "url": f"Observation/{ids['lab_b']}"}},
        {"request": {"method": "DELETE", "url": "Observation?identifier=urn:lab|lab-b"}},
        {"request": {"method": "PUT", "url": f"Observation/{ids['lab_b']}"},
         "resource": {**observation(a, "conf-steal", "2150-03-01T00:00:00Z"), "id": ids["lab_b"]}},
        {"request": {"method": "POST", "url": "Patient"}, "resource": patient("conf-new")},
        {"request": {"method": "GET", "url": "metadata"}},  # a route entries do not serve: closed
    ]})
    statuses = [e["response"]["status"].split()[0] for e in batch["entry"]]
    assert statuses == ["200", "403", "403", "403", "200", "200", "200", "403", "403", "201", "201", "403",
                        "200", "403", "403", "403"], statuses
    for index in (1, 2, 3, 7, 8, 11, 13, 14, 15):
        assert batch["entry"][index]["response"]["outcome"]["issue"][0]["code"] == "forbidden"
    assert batch["entry"][10]["resource"]["subject"]["reference"] == f"Patient/{a}"
    answers = [e.get("resource", {}) for e in batch["entry"]]
    assert_nothing_of_b({"entry": [r for r in answers if r.get("resourceType") != "OperationOutcome"]}, ids)

    # transaction: all about a goes through; one entry outside refuses all of it
    good = client.execute("", data={"resourceType": "Bundle", "type": "transaction", "entry": [
        {"request": {"method": "POST", "url": "Observation"},
         "resource": observation(a, "conf-tx-ok", "2150-04-01T00:00:00Z")},
        {"request": {"method": "GET", "url": "Observation?code=conf-b"}}]})
    assert [e["response"]["status"].split()[0] for e in good["entry"]] == ["201", "200"]
    assert "entry" not in good["entry"][1]["resource"]  # b's lab is not found through the narrowed search
    for outside in (
        {"request": {"method": "POST", "url": "Observation"},
         "resource": observation(b, "conf-tx-b", "2150-04-01T00:00:00Z")},
        {"request": {"method": "GET", "url": f"Observation/{ids['lab_b']}"}},
        {"request": {"method": "DELETE", "url": f"Observation/{ids['lab_b']}"}},
        {"request": {"method": "PATCH", "url": f"Observation/{ids['panel']}"},
         "resource": {"resourceType": "Binary", "contentType": "application/json-patch+json",
                      "data": "W3sib3AiOiAicmVwbGFjZSIsICJwYXRoIjogIi9zdWJqZWN0IiwgInZhbHVlIjoge319XQ=="}},
    ):
        with pytest.raises(ForbiddenError):
            client.execute("", data={"resourceType": "Bundle", "type": "transaction", "entry": [
                {"request": {"method": "POST", "url": "Observation"},
                 "resource": observation(a, "conf-tx-lost", "2150-04-01T00:00:00Z")}, outside]})
    admin = fhir(session["fhirBase"], admin_token)
    assert admin.resources("Observation").search(code="conf-tx-lost").fetch() == []  # nothing written
    assert admin.resources("Observation").search(code="conf-tx-ok").fetch()
    assert admin.resources("Observation").search(code="conf-tx-b").fetch() == []
    assert admin.resources("Observation").search(code="conf-batch-b").fetch() == []
    lab_b = admin.reference("Observation", ids["lab_b"]).to_resource()  # untouched in the session too
    assert lab_b["subject"]["reference"] == f"Patient/{b}"

    # other tokens: a session's own token batches freely; a scoped token's entries meet its scopes
    plain = httpx.post(f"{api.root}/sessions", json={}, headers={"Authorization": f"Bearer {admin_token}"})
    own = fhir(plain.json()["fhirBase"], plain.json()["accessToken"])
    free = own.execute("", data={"resourceType": "Bundle", "type": "batch", "entry": [
        {"request": {"method": "GET", "url": f"Observation/{ids['lab_b']}"}},
        {"request": {"method": "GET", "url": "Observation/_history"}}]})
    assert [e["response"]["status"].split()[0] for e in free["entry"]] == ["200", "200"]
    reader = fhir(api.fhir, issue(api.app.state.auth.key, parse_scopes("system/Observation.rs"),
                                  expires_in=600))
    scoped = reader.execute("", data={"resourceType": "Bundle", "type": "batch", "entry": [
        {"request": {"method": "GET", "url": f"Observation/{ids['lab_b']}"}},
        {"request": {"method": "GET", "url": f"Patient/{b}"}},
        {"request": {"method": "DELETE", "url": f"Observation/{ids['lab_b']}"}}]})
    assert [e["response"]["status"].split()[0] for e in scoped["entry"]] == ["200", "403", "403"]


def test_patient_token_stays_in_its_compartment_by_every_route_on_sqlite(tmp_path):
    with secured_api(f"sqlite:///{tmp_path / 'confined.sqlite'}") as api:
        check_confinement(api)


@pytest.mark.postgres
def test_patient_token_stays_in_its_compartment_by_every_route_on_postgres(postgres_url):
    with secured_api(postgres_url) as api:
        check_confinement(api)
