"""Client mistakes get the right status and an OperationOutcome, never a 500; nothing half-writes."""

from __future__ import annotations

import httpx
import pytest

from tests.fhir_api.conftest import assert_outcome, patient

INJECTIONS = [
    "'; DROP TABLE fhir_resource;--",
    "x' OR '1'='1",
    "%_\\",
    "\x00",
    "ge2150' UNION SELECT 1--",
    "a|b|c",
]


def _count(client: httpx.Client, tag: str) -> int:
    return client.get("/Patient", params={"identifier": f"urn:test|{tag}", "_summary": "count"}).json()[
        "total"
    ]


def test_malformed_json_wrong_type_and_shapes(client, tag):
    assert_outcome(
        client.post(
            "/Patient",
            content=b'{"resourceType": "Patient",',
            headers={"Content-Type": "application/fhir+json"},
        ),
        400,
    )
    assert_outcome(
        client.post("/Patient", content=b"[1, 2]", headers={"Content-Type": "application/json"}), 400
    )
    assert_outcome(client.post("/Patient", content=b"", headers={"Content-Type": "application/json"}), 400)
    assert_outcome(client.post("/Patient", json={**patient(tag), "resourceType": "Observation"}), 400)
    assert_outcome(client.post("/Patient", json={"name": "no type"}), 400)
    assert _count(client, tag) == 0


def test_invalid_resource_is_422_with_messages(client, tag):
    bad = {**patient(tag), "gender": {"oops": True}, "birthDate": "not-a-date", "unknownField": 1}
    body = assert_outcome(client.post("/Patient", json=bad), 422)
    text = " ".join(i.get("diagnostics", "") for i in body["issue"])
    assert "gender" in text and "birthDate" in text and "unknownField" in text
    assert _count(client, tag) == 0


def test_put_id_rules(client, tag):
    pid = client.post("/Patient", json=patient(tag)).json()["id"]
    assert_outcome(client.put(f"/Patient/{pid}", json=patient(tag)), 400)  # no id in body
    assert_outcome(client.put(f"/Patient/{pid}", json={**patient(tag), "id": "other"}), 400)
    assert_outcome(
        client.put(f"/Patient/{pid}", json={**patient(tag), "id": pid, "resourceType": "Group"}), 400
    )
    assert_outcome(client.put("/Patient/bad id!", json={**patient(tag), "id": "bad id!"}), 400)
    assert client.get(f"/Patient/{pid}").headers["etag"] == 'W/"1"'


def test_huge_bodies_are_413_without_writing(client, tag):
    huge = {**patient(tag), "text": {"status": "generated", "div": "<div>" + "x" * 200_000 + "</div>"}}
    assert_outcome(client.post("/Patient", json=huge), 413)

    def chunks():  # no Content-Length: the limit must trip while streaming
        yield b'{"resourceType":"Patient","id":"x","text":{"div":"'
        for _ in range(100):
            yield b"y" * 4096
        yield b'"}}'

    assert_outcome(
        client.post("/Patient", content=chunks(), headers={"Content-Type": "application/json"}), 413
    )
    assert_outcome(client.post("", content=b"[" + b"1," * 100_000 + b"1]"), 413)
    assert _count(client, tag) == 0


def test_content_negotiation(client, tag):
    xml = {"Content-Type": "application/fhir+xml"}
    assert_outcome(client.post("/Patient", content=b"<Patient/>", headers=xml), 415)
    assert_outcome(client.post("/Patient", content=b"x", headers={"Content-Type": "text/plain"}), 415)
    assert_outcome(client.get("/Patient", params={"_format": "xml"}), 406)
    assert_outcome(client.get("/metadata", headers={"Accept": "application/fhir+xml"}), 406)
    assert client.get("/metadata", params={"_format": "json"}).status_code == 200
    plain = client.get("/metadata", headers={"Accept": "application/json"})
    assert plain.status_code == 200 and plain.headers["content-type"].startswith("application/json")
    assert (
        client.post("/Patient", json=patient(tag), headers={"Content-Type": "application/json"}).status_code
        == 201
    )


def test_not_found_method_and_gone(client):
    assert_outcome(client.get("/NoSuchType/1"), 404)
    assert_outcome(client.get("/NoSuchType"), 404)
    assert_outcome(client.get("/Patient/does-not-exist"), 404)
    assert_outcome(client.post("/Patient/123", json={}), 405)
    assert_outcome(httpx.get(str(client.base_url).replace("/fhir", "/nowhere")), 404)


def test_vread_and_version_garbage(client):
    assert_outcome(client.get("/Patient/x/_history/1"), 404)
    assert_outcome(client.get("/Patient/x/_history/-1"), 404)


@pytest.mark.parametrize("resource_type", ["Patient", "Observation", "Encounter", "MedicationRequest"])
def test_sql_metacharacters_in_every_search_parameter(client, resource_type):
    statement = client.get("/metadata").json()
    entry = next(r for r in statement["rest"][0]["resource"] if r["type"] == resource_type)
    names = [p["name"] for p in entry["searchParam"]]
    assert len(names) > 5
    for name in names:
        for value in INJECTIONS:
            modifiers = (
                (name, f"{name}:missing", f"{name}:exact", f"{name}.name")
                if value == INJECTIONS[0]
                else (name,)
            )
            for key in modifiers:
                r = client.get(f"/{resource_type}", params={key: value})
                assert r.status_code in (200, 400), (key, value, r.status_code, r.text[:300])
                if r.status_code == 400:
                    assert_outcome(r, 400)
    assert client.get("/Patient", params={"_summary": "count"}).status_code == 200  # the tables still exist


def test_garbage_query_strings_and_result_params(client):
    for query in [
        "%%%",
        "=&=&",
        "a=%ZZ",
        "_sort=;DROP",
        "_include=*:*",
        "_revinclude=Nope:x",
        "_count=1e9",
        "_id=" + "x" * 5000,
        "_lastUpdated=gt'",
        "_offset=abc",
        "_snapshot=-5",
        "_elements=,,,",
    ]:
        r = client.get(f"/Patient?{query}")
        assert r.status_code in (200, 400), (query, r.status_code, r.text[:300])
        assert r.json()["resourceType"] in ("Bundle", "OperationOutcome")


def test_out_of_range_integers_never_reach_the_database(client):
    huge = "9" * 25
    for path, params in [
        ("/Patient", {"_offset": huge}),
        ("/Patient", {"_snapshot": huge}),
        ("/Patient", {"_count": huge}),
        ("/Patient/_history", {"_offset": huge}),
        ("/Patient/x/$everything", {"_offset": huge}),
    ]:
        r = client.get(path, params=params)
        assert r.status_code in (200, 400, 404), (path, params, r.text[:200])
    assert_outcome(client.get(f"/Patient/x/_history/{huge}"), 404)
    assert_outcome(
        client.put("/Patient/x", json={**patient("x"), "id": "x"}, headers={"If-Match": f'W/"{huge}"'}), 400
    )


def test_bad_values_of_known_params_are_400(client):
    for params in (
        {"birthdate": "not-a-date"},
        {"_lastUpdated": "yesterday"},
        {"_count": "x"},
        {"_sort": "nosuchparam"},
    ):
        assert_outcome(client.get("/Patient", params=params), 400)
