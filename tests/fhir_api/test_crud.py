"""Instance interactions over real HTTP: CRUD, versions, conditional forms, PATCH, Prefer, headers."""

from __future__ import annotations

from email.utils import parsedate_to_datetime

import httpx

from tests.fhir_api.conftest import assert_outcome, patient


def _create(client: httpx.Client, tag: str, **extra) -> httpx.Response:
    r = client.post("/Patient", json=patient(tag, **extra))
    assert r.status_code == 201, r.text
    return r


def test_create_sets_location_etag_last_modified(client, api, tag):
    r = _create(client, tag)
    body = r.json()
    assert r.headers["content-type"].startswith("application/fhir+json")
    assert r.headers["location"] == f"{api.fhir}/Patient/{body['id']}/_history/1"
    assert r.headers["etag"] == 'W/"1"'
    assert parsedate_to_datetime(r.headers["last-modified"]).year >= 2024
    assert body["meta"]["versionId"] == "1"


def test_create_ignores_client_id(client, tag):
    r = client.post("/Patient", json={**patient(tag), "id": "chosen-by-client"})
    assert r.status_code == 201
    assert r.json()["id"] != "chosen-by-client"


def test_read_serves_stored_bytes_verbatim(client, tag):
    # key order (status before resourceType) would not survive a model round trip; bytes are served as stored
    raw = (
        '{"status":"final","resourceType":"Observation","code":{"text":"k"},'
        '"valueQuantity":{"value":1.25,"unit":"mmol/L"},"subject":{"display":"' + tag + '"}}'
    )
    r = client.post("/Observation", content=raw, headers={"Content-Type": "application/fhir+json"})
    assert r.status_code == 201, r.text
    read = client.get(f"/Observation/{r.json()['id']}")
    assert read.status_code == 200
    assert read.content.startswith(b'{"status":"final","resourceType":"Observation"')
    assert read.content == r.content


def test_update_versions_and_vread(client, tag):
    pid = _create(client, tag).json()["id"]
    r = client.put(f"/Patient/{pid}", json={**patient(tag, family="Roe"), "id": pid})
    assert r.status_code == 200 and r.headers["etag"] == 'W/"2"'
    assert client.get(f"/Patient/{pid}").json()["name"][0]["family"] == "Roe"
    v1 = client.get(f"/Patient/{pid}/_history/1")
    assert v1.status_code == 200 and v1.json()["name"][0]["family"] == "Doe"
    assert v1.headers["etag"] == 'W/"1"'
    assert_outcome(client.get(f"/Patient/{pid}/_history/9"), 404)
    assert_outcome(client.get(f"/Patient/{pid}/_history/x"), 404)


def test_update_as_create_with_client_id(client, api, tag):
    pid = f"client-{tag}"
    r = client.put(f"/Patient/{pid}", json={**patient(tag), "id": pid})
    assert r.status_code == 201
    assert r.headers["location"] == f"{api.fhir}/Patient/{pid}/_history/1"


def test_if_match_conflict_is_412_and_match_succeeds(client, tag):
    pid = _create(client, tag).json()["id"]
    body = {**patient(tag), "id": pid}
    stale = client.put(f"/Patient/{pid}", json=body, headers={"If-Match": 'W/"7"'})
    assert_outcome(stale, 412)
    ok = client.put(f"/Patient/{pid}", json=body, headers={"If-Match": 'W/"1"'})
    assert ok.status_code == 200 and ok.headers["etag"] == 'W/"2"'
    assert_outcome(client.put(f"/Patient/{pid}", json=body, headers={"If-Match": "garbage"}), 400)


def test_if_none_match_on_read_gives_304(client, tag):
    pid = _create(client, tag).json()["id"]
    assert client.get(f"/Patient/{pid}", headers={"If-None-Match": 'W/"1"'}).status_code == 304
    assert client.get(f"/Patient/{pid}", headers={"If-None-Match": 'W/"2"'}).status_code == 200


def test_conditional_create_header_and_query(client, tag):
    first = client.post(
        "/Patient", json=patient(tag), headers={"If-None-Exist": f"identifier=urn:test|{tag}"}
    )
    assert first.status_code == 201
    again = client.post(
        "/Patient", json=patient(tag), headers={"If-None-Exist": f"identifier=urn:test|{tag}"}
    )
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    via_query = client.post("/Patient", params={"identifier": f"urn:test|{tag}"}, json=patient(tag))
    assert via_query.status_code == 200 and via_query.json()["id"] == first.json()["id"]
    client.post("/Patient", json=patient(tag))  # a second match makes the criteria ambiguous
    ambiguous = client.post(
        "/Patient", json=patient(tag), headers={"If-None-Exist": f"identifier=urn:test|{tag}"}
    )
    assert_outcome(ambiguous, 412)


def test_conditional_update(client, tag):
    created = client.put("/Patient", params={"identifier": f"urn:test|{tag}"}, json=patient(tag))
    assert created.status_code == 201
    pid = created.json()["id"]
    updated = client.put(
        "/Patient", params={"identifier": f"urn:test|{tag}"}, json=patient(tag, family="Poe")
    )
    assert updated.status_code == 200 and updated.json()["id"] == pid
    assert client.get(f"/Patient/{pid}").json()["name"][0]["family"] == "Poe"
    assert_outcome(client.put("/Patient", json=patient(tag)), 400)  # neither id nor criteria


def test_delete_then_read_is_410_and_history_keeps_it(client, tag):
    pid = _create(client, tag).json()["id"]
    r = client.delete(f"/Patient/{pid}")
    assert r.status_code == 200 and r.json()["resourceType"] == "OperationOutcome"
    assert_outcome(client.get(f"/Patient/{pid}"), 410)
    history = client.get(f"/Patient/{pid}/_history").json()
    assert history["type"] == "history" and history["total"] == 2
    methods = [e["request"]["method"] for e in history["entry"]]
    assert sorted(methods) == ["DELETE", "POST"]
    deleted = next(e for e in history["entry"] if e["request"]["method"] == "DELETE")
    assert "resource" not in deleted
    assert client.get(f"/Patient/{pid}/_history/1").status_code == 200  # the old version stays readable
    assert_outcome(client.get(f"/Patient/{pid}/_history/2"), 410)  # the deletion itself
    minimal = _create(client, tag).json()["id"]
    assert client.delete(f"/Patient/{minimal}", headers={"Prefer": "return=minimal"}).status_code == 204


def test_conditional_delete(client, tag):
    pid = _create(client, tag).json()["id"]
    assert client.delete("/Patient", params={"identifier": f"urn:test|{tag}"}).status_code == 200
    assert_outcome(client.get(f"/Patient/{pid}"), 410)


def test_json_patch_with_if_match(client, tag):
    pid = _create(client, tag).json()["id"]
    ops = [
        {"op": "replace", "path": "/gender", "value": "male"},
        {"op": "add", "path": "/active", "value": True},
    ]
    headers = {"Content-Type": "application/json-patch+json"}
    r = client.patch(f"/Patient/{pid}", content=httpx.Request("X", "/", json=ops).content, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["gender"] == "male" and r.json()["active"] is True and r.headers["etag"] == 'W/"2"'
    stale = client.patch(f"/Patient/{pid}", json=ops, headers={**headers, "If-Match": 'W/"1"'})
    assert_outcome(stale, 412)
    failing_test = [{"op": "test", "path": "/gender", "value": "female"}]
    assert_outcome(client.patch(f"/Patient/{pid}", json=failing_test, headers=headers), 422)
    assert_outcome(client.patch(f"/Patient/{pid}", json=[{"op": "explode"}], headers=headers), 400)
    assert_outcome(client.patch(f"/Patient/{pid}", json={"op": "x"}, headers=headers), 400)
    change_id = [{"op": "replace", "path": "/id", "value": "other"}]
    assert_outcome(client.patch(f"/Patient/{pid}", json=change_id, headers=headers), 400)
    invalid = [{"op": "replace", "path": "/gender", "value": {"not": "a code"}}]
    assert_outcome(client.patch(f"/Patient/{pid}", json=invalid, headers=headers), 422)
    assert client.get(f"/Patient/{pid}").headers["etag"] == 'W/"2"'  # failed patches wrote nothing


def test_merge_patch_as_fhirpy_sends_it(client, tag):
    pid = _create(client, tag).json()["id"]
    r = client.patch(
        f"/Patient/{pid}",
        json={"gender": "other", "name": None},
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["gender"] == "other" and "name" not in r.json()


def test_prefer_return(client, tag):
    minimal = client.post("/Patient", json=patient(tag), headers={"Prefer": "return=minimal"})
    assert minimal.status_code == 201 and minimal.content == b"" and minimal.headers["location"]
    oo = client.post("/Patient", json=patient(tag), headers={"Prefer": "return=OperationOutcome"})
    assert oo.status_code == 201 and oo.json()["resourceType"] == "OperationOutcome"


def test_history_type_and_since(client, tag):
    pid = _create(client, tag).json()["id"]
    first = client.get(f"/Patient/{pid}").json()["meta"]["lastUpdated"]
    client.put(f"/Patient/{pid}", json={**patient(tag, family="Two"), "id": pid})
    since = client.get(f"/Patient/{pid}/_history", params={"_since": first}).json()
    assert {e["response"]["etag"] for e in since["entry"]} >= {'W/"2"'}
    paged = client.get("/Patient/_history", params={"_count": 1}).json()
    assert len(paged["entry"]) == 1 and any(link["relation"] == "next" for link in paged["link"])
    assert client.get("/_history", params={"_count": 2}).json()["type"] == "history"
    assert_outcome(client.get("/Patient/_history", params={"_since": "yesterday"}), 400)


def test_history_pages_are_stable_under_concurrent_writes(client, tag):
    pid = _create(client, tag).json()["id"]
    for family in ("Two", "Three", "Four"):
        client.put(f"/Patient/{pid}", json={**patient(tag, family=family), "id": pid})
    first = client.get(f"/Patient/{pid}/_history", params={"_count": 2}).json()
    assert [e["response"]["etag"] for e in first["entry"]] == ['W/"4"', 'W/"3"']
    client.put(f"/Patient/{pid}", json={**patient(tag, family="Five"), "id": pid})  # comes first: would shift
    nxt = next(link["url"] for link in first["link"] if link["relation"] == "next")
    assert "_snapshot=" in nxt
    second = httpx.get(nxt).json()
    assert [e["response"]["etag"] for e in second["entry"]] == ['W/"2"', 'W/"1"']
    assert second["total"] == first["total"] == 4
    assert not any(link["relation"] == "next" for link in second["link"])
