"""batch and transaction Bundles: urn:uuid resolution, order, all-or-nothing, per-entry outcomes."""

from __future__ import annotations

import base64

import orjson

from tests.fhir_api.conftest import assert_outcome, observation, patient


def _count(client, params: dict) -> int:
    return client.get(
        "/Observation" if "code" in params else "/Patient", params={**params, "_summary": "count"}
    ).json()["total"]


def test_transaction_resolves_urn_uuid_and_answers_in_request_order(client, api, tag):
    obs = observation("placeholder", f"t-{tag}", "2150-01-01T00:00:00Z")
    obs["subject"] = {"reference": "urn:uuid:11111111-1111-1111-1111-111111111111"}
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {
                "fullUrl": "urn:uuid:22222222-2222-2222-2222-222222222222",
                "resource": obs,
                "request": {"method": "POST", "url": "Observation"},
            },
            {
                "fullUrl": "urn:uuid:11111111-1111-1111-1111-111111111111",
                "resource": patient(tag),
                "request": {"method": "POST", "url": "Patient"},
            },
        ],
    }
    r = client.post("", json=bundle)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["type"] == "transaction-response"
    statuses = [e["response"]["status"] for e in body["entry"]]
    assert statuses == ["201 Created", "201 Created"]
    obs_loc, pat_loc = (e["response"]["location"] for e in body["entry"])
    assert obs_loc.startswith("Observation/") and pat_loc.startswith("Patient/")
    stored_obs = client.get("/" + obs_loc.split("/_history")[0]).json()
    assert stored_obs["subject"]["reference"] == pat_loc.split("/_history")[0]
    assert body["entry"][1]["fullUrl"] == f"{api.fhir}/{pat_loc.split('/_history')[0]}"


def test_transaction_is_all_or_nothing(client, tag):
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"resource": patient(tag), "request": {"method": "POST", "url": "Patient"}},
            {
                "resource": {"resourceType": "Patient", "gender": {"bad": 1}},
                "request": {"method": "POST", "url": "Patient"},
            },
        ],
    }
    body = assert_outcome(client.post("", json=bundle), 422)
    assert "entry 1" in body["issue"][0]["diagnostics"]
    assert _count(client, {"identifier": f"urn:test|{tag}"}) == 0
    missing = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"resource": patient(tag), "request": {"method": "POST", "url": "Patient"}},
            {"request": {"method": "GET", "url": "Patient/definitely-missing"}},
        ],
    }
    assert_outcome(client.post("", json=missing), 404)
    assert _count(client, {"identifier": f"urn:test|{tag}"}) == 0


def test_transaction_order_delete_post_put_get(client, tag):
    pid = client.post("/Patient", json=patient(tag)).json()["id"]
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {"request": {"method": "GET", "url": f"Patient?identifier=urn:test|{tag}"}},
            {
                "resource": {**patient(tag, family="Put"), "id": f"p-{tag}"},
                "request": {"method": "PUT", "url": f"Patient/p-{tag}"},
            },
            {"request": {"method": "DELETE", "url": f"Patient/{pid}"}},
            {"resource": patient(tag, family="Post"), "request": {"method": "POST", "url": "Patient"}},
        ],
    }
    body = client.post("", json=bundle).json()
    found = body["entry"][0]["resource"]  # the GET ran last: sees the PUT and the POST, not the deleted one
    families = sorted(e["resource"]["name"][0]["family"] for e in found["entry"])
    assert families == ["Post", "Put"]
    assert [e["response"]["status"][:3] for e in body["entry"]] == ["200", "201", "200", "201"]


def test_transaction_conditional_create_and_patch_entry(client, tag):
    pid = client.post("/Patient", json=patient(tag)).json()["id"]
    patch = base64.b64encode(orjson.dumps([{"op": "replace", "path": "/gender", "value": "male"}])).decode()
    bundle = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {
                "fullUrl": "urn:uuid:c0ffee00-0000-0000-0000-000000000000",
                "resource": patient(tag),
                "request": {"method": "POST", "url": "Patient", "ifNoneExist": f"identifier=urn:test|{tag}"},
            },
            {
                "resource": {
                    "resourceType": "Binary",
                    "contentType": "application/json-patch+json",
                    "data": patch,
                },
                "request": {"method": "PATCH", "url": f"Patient/{pid}"},
            },
        ],
    }
    body = client.post("", json=bundle).json()
    assert body["entry"][0]["response"]["status"] == "200 OK"  # matched the existing patient
    assert client.get(f"/Patient/{pid}").json()["gender"] == "male"


def test_batch_entries_are_independent(client, tag):
    bundle = {
        "resourceType": "Bundle",
        "type": "batch",
        "entry": [
            {"resource": patient(tag), "request": {"method": "POST", "url": "Patient"}},
            {
                "resource": {"resourceType": "Patient", "gender": {"bad": 1}},
                "request": {"method": "POST", "url": "Patient"},
            },
            {"request": {"method": "GET", "url": "Patient/definitely-missing"}},
            {"request": {"method": "BREW", "url": "Coffee"}},
            "not even an object",
        ],
    }
    r = client.post("", json=bundle)
    assert r.status_code == 200
    entries = r.json()["entry"]
    assert [e["response"]["status"][:3] for e in entries] == ["201", "422", "404", "400", "400"]
    assert entries[1]["response"]["outcome"]["resourceType"] == "OperationOutcome"
    assert _count(client, {"identifier": f"urn:test|{tag}"}) == 1


def test_bundle_shape_errors(client):
    assert_outcome(client.post("", json={"resourceType": "Bundle", "type": "collection"}), 400)
    assert_outcome(client.post("", json={"resourceType": "Patient"}), 400)
    assert_outcome(client.post("", json={"resourceType": "Bundle", "type": "batch", "entry": {"x": 1}}), 400)
    foreign = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [{"request": {"method": "GET", "url": "http://elsewhere.example/fhir/Patient/1"}}],
    }
    assert_outcome(client.post("", json=foreign), 400)
