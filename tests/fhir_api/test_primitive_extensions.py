"""FHIR JSON's primitive extensions: a `_name` sibling carries the id and extensions of primitive
`name`, on every primitive, in arrays index by index with null placeholders. What R4 allows is stored as
written; what it forbids (an empty element, arrays that do not pair, extensions on an id or Extension.url,
two types in one value[x]) is refused; the store's validation and the HTTP layer's checks together."""

from __future__ import annotations

import json

import pytest

from tests.fhir_api.conftest import assert_outcome, observation, patient

ABSENT = {"url": "http://hl7.org/fhir/StructureDefinition/data-absent-reason", "valueCode": "unknown"}
NOTE = {"url": "http://example.org/note", "valueString": "translated"}


def accepted(tag: str) -> list[tuple[str, str, dict]]:
    """(what, type, body) that R4 allows: each must be stored and read back as written."""
    good = patient(tag)
    return [
        ("a primitive's extension beside its value", "Patient",
         {**good, "gender": "female", "_gender": {"id": "g1", "extension": [NOTE]}}),
        ("an extension with no value (data absent)", "Patient",
         {**good, "_birthDate": {"extension": [ABSENT]}}),
        ("array with null placeholders", "Patient",
         {**good, "name": [{"family": "Doe", "given": ["Pat", None, "Q"],
                            "_given": [None, {"extension": [ABSENT]}, {"id": "q"}]}]}),
        ("Extension.valueString with its own extension (the v2 CodeSystems)", "Patient",
         {**good, "extension": [{"url": "http://example.org/x", "valueString": "a",
                                 "_valueString": {"extension": [NOTE]}}]}),
        ("Extension value only as extensions", "Patient",
         {**good, "extension": [{"url": "http://example.org/x", "_valueDecimal": {"extension": [ABSENT]}}]}),
        ("nested in a contained resource", "Patient",
         {**good, "contained": [{"resourceType": "Organization", "id": "o", "name": "Org",
                                 "extension": [{"url": "http://example.org/y",
                                                "_valueBoolean": {"id": "b"}}]}]}),
    ]


def refused(tag: str) -> list[tuple[str, int, dict]]:
    """(what, status, Patient body) that R4 forbids."""
    good = patient(tag)
    ext = {"url": "http://example.org/x", "valueString": "a"}
    return [
        ("null with no extension", 400, {**good, "name": [{"family": "x", "given": ["A", None]}]}),
        ("null in both arrays", 400, {**good, "name": [{"given": ["A", None], "_given": [None, None]}]}),
        ("arrays of different lengths", 400, {**good, "name": [{"given": ["A", "B"], "_given": [None]}]}),
        ("an array of extensions for a single value", 400,
         {**good, "birthDate": "2000-01-01", "_birthDate": [{"id": "x"}]}),
        ("null in an array of complex elements", 400, {**good, "name": [{"family": "x"}, None]}),
        ("empty primitive extension", 400, {**good, "_birthDate": {}}),
        ("a primitive extension that is not an object", 422,
         {**good, "extension": [{**ext, "_valueString": "text"}]}),
        ("a bad extension inside it", 422,
         {**good, "extension": [{**ext, "_valueString": {"extension": [{"url": "u", "valueNope": 1}]}}]}),
        ("Extension.value[x] of two types", 422,
         {**good, "extension": [{"url": "http://example.org/x", "valueInteger": 1,
                                 "_valueString": {"id": "s"}}]}),
        ("an array for a single Extension value", 422,
         {**good, "extension": [{"url": "http://example.org/x", "_valueString": [{"id": "s"}]}]}),
        ("Extension.url cannot be extended", 422, {**good, "extension": [{**ext, "_url": {"id": "u"}}]}),
        ("an element id cannot be extended", 422, {**good, "extension": [{**ext, "_id": {"id": "u"}}]}),
        ("no such primitive", 422, {**good, "_nickname": {"id": "n"}}),
    ]


@pytest.mark.parametrize("index", range(6))
def test_what_r4_allows_is_stored_as_written(client, tag, index):
    what, kind, body = accepted(tag)[index]
    created = client.post(f"/{kind}", json=body)
    assert created.status_code == 201, (what, created.text)
    stored = client.get(f"/{kind}/{created.json()['id']}").json()
    for key, value in body.items():
        assert stored[key] == value, (what, key)
    tx = {"resourceType": "Bundle", "type": "transaction",
          "entry": [{"resource": body, "request": {"method": "POST", "url": kind}}]}
    assert client.post("", json=tx).status_code == 200, what


def test_what_r4_forbids_is_refused_and_not_stored(client, tag):
    for what, status, body in refused(tag):
        answer = client.post("/Patient", json=body)
        assert_outcome(answer, status), what
        assert answer.status_code == status, (what, answer.text)
    found = client.get("/Patient", params={"identifier": f"urn:test|{tag}", "_summary": "count"}).json()
    assert found["total"] == 0


def test_messages_name_the_place(client, tag):
    body = refused(tag)[2][2]
    answer = assert_outcome(client.post("/Patient", json=body), 400)
    assert "name[0].given" in json.dumps(answer) or "name[0]._given" in json.dumps(answer)
    answer = assert_outcome(client.post("/Patient", json=refused(tag)[8][2]), 422)
    assert "extension.0._valueString" in answer["issue"][0]["diagnostics"]


def test_a_shared_observation_with_decimals_and_a_later_date(client, api, tag):
    """A write whose as-of views differ over time (its effective period ends after it was issued) copies the
    resource with its decimals as written: it answered 500 (JsonDecimal is not JSON for orjson) on the
    official Observation examples f002-f004."""
    pid = client.post("/Patient", json=patient(tag)).json()["id"]
    body = {**observation(pid, f"dec-{tag}", "2150-01-01T00:00:00Z", 12.6), "issued": "2150-01-02T00:00:00Z"}
    body.pop("effectiveDateTime")
    body["effectivePeriod"] = {"start": "2150-01-01T00:00:00Z", "end": "2150-01-03T00:00:00Z"}
    raw = json.dumps(body).replace("12.6", "12.60")
    created = client.post("/Observation", content=raw, headers={"Content-Type": "application/fhir+json"})
    assert created.status_code == 201, created.text
    session = client.post(f"{api.root}/sessions", json={"now": "2150-01-02T12:00:00Z"}).json()
    seen = client.get(f"{session['fhirBase']}/Observation/{created.json()['id']}")
    assert seen.status_code == 200, seen.text
    assert seen.json()["effectivePeriod"] == {"start": "2150-01-01T00:00:00Z"}  # not over yet at the clock
    assert b'"value":12.60' in seen.content.replace(b" ", b"")


def test_duplicate_full_urls_are_refused_in_every_bundle(client, tag):
    """bdl-7: fullUrl is unique within a Bundle (unless the entries' meta.versionId differ; a history Bundle
    may repeat it): a transaction and a batch are 400, a Bundle stored as a resource 422."""
    dup = f"urn:uuid:{tag}-0000-0000-0000-000000000000"[:45]
    entry = {"fullUrl": dup, "resource": patient(tag), "request": {"method": "POST", "url": "Patient"}}
    for kind in ("transaction", "batch"):
        answer = client.post("", json={"resourceType": "Bundle", "type": kind, "entry": [entry, entry]})
        assert "appears more than once" in assert_outcome(answer, 400)["issue"][0]["diagnostics"]
    stored = {"resourceType": "Bundle", "type": "collection",
              "entry": [{"fullUrl": dup, "resource": patient(tag)}] * 2}
    assert_outcome(client.post("/Bundle", json=stored), 422)
    versions = [{"fullUrl": dup, "resource": {**patient(tag), "id": "p", "meta": {"versionId": v}}}
                for v in ("1", "2")]
    assert client.post("/Bundle", json={**stored, "entry": versions}).status_code == 201
    history = {"resourceType": "Bundle", "type": "history", "entry": [
        {"fullUrl": dup, "resource": patient(tag), "request": {"method": "PUT", "url": "Patient/p"},
         "response": {"status": "200"}}] * 2}
    assert client.post("/Bundle", json=history).status_code == 201
    tx_versions = [{**e, "request": {"method": "POST", "url": "Patient"}} for e in versions]
    assert_outcome(client.post("", json={"resourceType": "Bundle", "type": "transaction",
                                         "entry": tx_versions}), 400)  # a transaction resolves by fullUrl
    found = client.get("/Patient", params={"identifier": f"urn:test|{tag}", "_summary": "count"}).json()
    assert found["total"] == 0  # nothing of the refused bundles was written
