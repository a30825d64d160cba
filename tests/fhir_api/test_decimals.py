"""Decimals written over HTTP keep their precision (FHIR: `1.50` is not `1.5`)."""

from __future__ import annotations

import httpx

from services.fhir_api import json_numbers
from tests.fhir_api.conftest import LiveApi

BODY = (
    b'{"resourceType":"Observation","status":"final","code":{"text":"Magnesium"},'
    b'"valueQuantity":{"value":1.50,"unit":"mg/dL"},'
    b'"referenceRange":[{"low":{"value":1.6},"high":{"value":2.60E0}}]}'
)
HEADERS = {"Content-Type": "application/fhir+json"}


def test_json_numbers_round_trip_keeps_text() -> None:
    value = json_numbers.loads(b'{"a":1.50,"b":[2.000e3,3],"c":0.1}')
    assert value["a"] == 1.5 and isinstance(value["b"][1], int)
    assert json_numbers.dumps(value) == b'{"a":1.50,"b":[2.000e3,3],"c":0.1}'


def test_create_update_and_patch_keep_decimal_text(api: LiveApi, client: httpx.Client) -> None:
    created = client.post(f"{api.fhir}/Observation", content=BODY, headers=HEADERS)
    assert created.status_code == 201, created.text
    oid = created.json()["id"]
    read = client.get(f"{api.fhir}/Observation/{oid}")
    assert b'"value":1.50' in read.content and b'"value":2.60E0' in read.content

    updated = BODY.replace(b'"status":"final"', b'"status":"amended","id":"' + oid.encode() + b'"')
    assert client.put(f"{api.fhir}/Observation/{oid}", content=updated, headers=HEADERS).status_code == 200
    assert b'"value":1.50' in client.get(f"{api.fhir}/Observation/{oid}").content

    patch = [{"op": "replace", "path": "/status", "value": "corrected"}]
    patched = client.patch(
        f"{api.fhir}/Observation/{oid}", json=patch, headers={"Content-Type": "application/json-patch+json"}
    )
    assert patched.status_code == 200, patched.text
    after = client.get(f"{api.fhir}/Observation/{oid}").content
    assert b'"status":"corrected"' in after and b'"value":1.50' in after
    # Search by the value still treats it as the number 1.5.
    found = client.get(f"{api.fhir}/Observation", params={"_id": oid, "value-quantity": "1.5"}).json()
    assert [e["resource"]["id"] for e in found.get("entry", [])] == [oid]
