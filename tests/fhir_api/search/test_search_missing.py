"""`:missing` over HTTP: true and false answer on index-row parameters and `_lastUpdated` alike; any other
value is a 400 OperationOutcome (store/modifiers.py), on type, system and form-body searches."""

from __future__ import annotations

import httpx
import pytest

from tests.fhir_api.conftest import assert_outcome, patient

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _ids(client: httpx.Client, tag: str, **params: str) -> set[str]:
    found = client.get("/Patient", params={"identifier": f"urn:test|{tag}", **params})
    assert found.status_code == 200, found.text
    return {e["resource"]["id"] for e in found.json().get("entry", [])}


def test_missing_true_and_false_select_the_resources(client, tag) -> None:
    with_gender = client.post("/Patient", json=patient(tag)).json()["id"]
    no_gender = {k: v for k, v in patient(tag).items() if k != "gender"}
    without = client.post("/Patient", json=no_gender).json()["id"]
    assert _ids(client, tag, **{"gender:missing": "true"}) == {without}
    assert _ids(client, tag, **{"gender:missing": "false"}) == {with_gender}
    assert _ids(client, tag, **{"_lastUpdated:missing": "false"}) == {with_gender, without}
    assert _ids(client, tag, **{"_lastUpdated:missing": "true"}) == set()


@pytest.mark.parametrize(
    ("path", "name", "value"),
    [
        ("/Patient", "_lastUpdated:missing", "maybe"),
        ("/Patient", "gender:missing", "maybe"),
        ("/Observation", "code:missing", "maybe"),
        ("/Observation", "subject:missing", "1"),
        ("/Patient", "_lastUpdated:missing", "TRUE"),  # FHIR booleans are lower case
        ("/Patient", "birthdate:missing", "yes"),
        ("", "_lastUpdated:missing", "maybe"),  # system-level search
    ],
)
def test_missing_takes_only_true_or_false(client, path, name, value) -> None:
    body = assert_outcome(client.get(path, params={name: value}), 400)
    assert ":missing takes true or false" in " ".join(i.get("diagnostics", "") for i in body["issue"])


@pytest.mark.parametrize("name", ["_lastUpdated:missing", "gender:missing"])
def test_missing_takes_only_true_or_false_in_a_form_body(client, name) -> None:
    body = httpx.QueryParams({name: "maybe"})
    assert_outcome(client.post("/Patient/_search", content=str(body), headers=FORM), 400)
