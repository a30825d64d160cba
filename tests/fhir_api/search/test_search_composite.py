"""Composite search parameters over HTTP: Observation's code-value-* pairs a code with a value of the same
resource (store/composite.py); composites over repeating elements stay unsupported; bad values are 400."""

from __future__ import annotations

import httpx
import pytest
from fhirpy import SyncFHIRClient

from tests.fhir_api.conftest import assert_outcome, patient

LOINC = "http://loinc.org"
UCUM = "http://unitsofmeasure.org"
STRICT = {"Prefer": "handling=strict"}


def _observation(tag: str, codes: list[str], **value) -> dict:
    return {
        "resourceType": "Observation",
        "identifier": [{"system": "urn:test", "value": tag}],
        "status": "final",
        "code": {"coding": [{"system": LOINC, "code": code} for code in codes]},
        **value,
    }


def _quantity(number: float, unit: str = "mmol/L") -> dict:
    return {"valueQuantity": {"value": number, "unit": unit, "system": UCUM, "code": unit}}


def _ids(client: httpx.Client, tag: str, headers: dict | None = None, **params: str) -> set[str]:
    found = client.get("/Observation", params={"identifier": f"urn:test|{tag}", **params}, headers=headers)
    assert found.status_code == 200, found.text
    return {e["resource"]["id"] for e in found.json().get("entry", [])}


def _post(client: httpx.Client, resource: dict) -> str:
    created = client.post("/Observation", json=resource)
    assert created.status_code == 201, created.text
    return created.json()["id"]


def test_code_value_quantity_pairs_the_code_with_the_value_of_the_same_observation(client, tag) -> None:
    high_k = _post(client, _observation(tag, ["2823-3"], **_quantity(5.6)))
    low_k = _post(client, _observation(tag, ["2823-3"], **_quantity(3.9)))
    high_na = _post(client, _observation(tag, ["2951-2"], **_quantity(141)))
    both = _post(client, _observation(tag, ["2823-3", "6298-4"], **_quantity(6.1)))  # two codings, one value

    def search(value: str) -> set[str]:
        return _ids(client, tag, **{"code-value-quantity": value})

    assert search(f"{LOINC}|2823-3$gt5") == {high_k, both}
    assert search("2823-3$lt5") == {low_k}
    assert search("6298-4$6.1") == {both}
    assert search("2951-2$gt5") == {high_na}
    assert search("2951-2$lt5") == set()  # a low value exists, but not on a sodium
    assert search(f"2823-3$gt5|{UCUM}|mmol/L") == {high_k, both}
    assert search("2823-3$gt5||mg/dL") == set()
    assert search("2823-3$lt5,2951-2$gt140") == {low_k, high_na}  # comma: alternatives
    page = client.get("/Observation", params={
        "identifier": f"urn:test|{tag}", "code-value-quantity": "2823-3$gt5", "_count": 1})
    first = [e["resource"]["id"] for e in page.json()["entry"]]
    link = next(x["url"] for x in page.json()["link"] if x["relation"] == "next")
    second = [e["resource"]["id"] for e in httpx.get(link, timeout=60).json()["entry"]]
    assert len(first) == len(second) == 1 and set(first + second) == {high_k, both}  # paged like any search
    # Several parameters AND as usual, and a composite joins a plain filter of the same search.
    assert _ids(client, tag, **{"code-value-quantity": "2823-3$gt5", "value-quantity": "lt6"}) == {high_k}


def test_composite_inside_has(client, tag) -> None:
    """Patients with a potassium above 5: `_has` runs the composite on the referring Observations."""
    ids = []
    for number in (5.6, 3.9):
        pid = client.post("/Patient", json=patient(tag)).json()["id"]
        subject = {"reference": f"Patient/{pid}"}
        _post(client, {**_observation(tag, ["2823-3"], **_quantity(number)), "subject": subject})
        ids.append(pid)
    found = client.get("/Patient", params={
        "identifier": f"urn:test|{tag}", "_has:Observation:subject:code-value-quantity": "2823-3$gt5"})
    assert found.status_code == 200, found.text
    assert [e["resource"]["id"] for e in found.json()["entry"]] == ids[:1]


def test_concept_string_and_date_pairs(client, tag) -> None:
    concept = {"coding": [{"system": "http://snomed.info/sct", "code": "10828004"}]}
    positive = _post(client, _observation(tag, ["94500-6"], valueCodeableConcept=concept))
    text = _post(client, _observation(tag, ["8251-1"], valueString="pain $ 7/10, worse at night"))
    dated = _post(client, _observation(tag, ["21112-8"], valueDateTime="1960-05-01"))

    snomed = "http://snomed.info/sct"
    assert _ids(client, tag, **{"code-value-concept": f"94500-6${snomed}|10828004"}) == {positive}
    assert _ids(client, tag, **{"code-value-concept": "94500-6$260385009"}) == set()
    assert _ids(client, tag, **{"code-value-string": r"8251-1$pain \$ 7/10\, worse"}) == {text}
    assert _ids(client, tag, **{"code-value-string": "8251-1$night"}) == set()  # string: prefix match
    assert _ids(client, tag, **{"code-value-date": "21112-8$lt1970"}) == {dated}
    assert _ids(client, tag, **{"code-value-date": "21112-8$ge1970"}) == set()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"code-value-quantity": "2823-3"}, "takes 2 values joined by '$'"),
        ({"code-value-quantity": "2823-3$5$6"}, "takes 2 values joined by '$'"),
        ({"code-value-quantity": "$5"}, "takes 2 values joined by '$'"),
        ({"code-value-quantity": "2823-3$abc"}, ""),  # the quantity component's own syntax error
        ({"code-value-quantity:missing": "true"}, "not supported on composite"),
        ({"_sort": "code-value-quantity"}, "cannot sort by composite"),
    ],
)
def test_bad_composite_searches_are_400(client, params, message) -> None:
    body = assert_outcome(client.get("/Observation", params=params), 400)
    assert message in " ".join(i.get("diagnostics", "") for i in body["issue"])


def test_component_composites_pair_code_and_value_of_one_component(client, tag) -> None:
    systolic = {"code": {"coding": [{"system": LOINC, "code": "8480-6"}]}, **_quantity(150, "mm[Hg]")}
    diastolic = {"code": {"coding": [{"code": "8462-4"}]}, **_quantity(90, "mm[Hg]")}  # no system
    bp = _post(client, _observation(tag, ["85354-9"], component=[systolic, diastolic]))
    potassium = _post(client, _observation(tag, ["2823-3"], **_quantity(5.6)))
    rhythm = {"coding": [{"system": "http://snomed.info/sct", "code": "271636001"}]}
    finding = {"code": {"coding": [{"system": LOINC, "code": "8867-4"}]}, "valueCodeableConcept": rhythm}
    pulse = _post(client, _observation(tag, ["8867-4"], component=[finding]))

    def search(name: str, value: str) -> set[str]:
        return _ids(client, tag, **{name: value})

    # Diastolic > 100 is false although "some component has that code" and "some component has a value
    # > 100" are both true: the pair is matched within one component.
    assert search("component-code-value-quantity", "8462-4$gt100") == set()
    assert search("component-code-value-quantity", "8480-6$gt100") == {bp}
    assert search("component-code-value-quantity", f"{LOINC}|8480-6$gt140") == {bp}
    assert search("component-code-value-quantity", f"{LOINC}|8462-4$lt100") == set()  # it has no system
    assert search("component-code-value-quantity", "|8462-4$lt100") == {bp}
    assert search("component-code-value-quantity", "8480-6$gt140,8462-4$gt100") == {bp}
    assert search("component-code-value-quantity", "2823-3$gt5") == set()  # not a component's
    assert search("code-value-quantity", "8480-6$gt140") == set()  # not the resource's own pair
    # combo-: the resource's own pair or one component's
    assert search("combo-code-value-quantity", "8480-6$gt140") == {bp}
    assert search("combo-code-value-quantity", "2823-3$gt5") == {potassium}
    assert search("combo-code-value-quantity", "2823-3$gt5,8462-4$90") == {bp, potassium}
    assert search("component-code-value-concept", "8867-4$http://snomed.info/sct|271636001") == {pulse}
    assert search("component-code-value-concept", "8480-6$271636001") == set()
    # An update re-indexes the pairs: the diastolic is now 110.
    current = client.get(f"/Observation/{bp}").json()
    current["component"][1]["valueQuantity"]["value"] = 110
    assert client.put(f"/Observation/{bp}", json=current).status_code == 200
    assert search("component-code-value-quantity", "8462-4$gt100") == {bp}
    assert search("component-code-value-quantity", "8462-4$lt100") == set()


def test_unsupported_composites_and_the_capability_statement(client) -> None:
    # relationship pairs a Reference with a code per relatesTo: not a token and a plain value.
    params = {"relationship": "DocumentReference/x$replaces"}
    assert_outcome(client.get("/DocumentReference", params=params, headers=STRICT), 400)
    assert_outcome(client.get("/Observation", params={"component-code-value-quantity": "|$5"}), 400)
    capability = client.get("/metadata").json()
    resources = {r["type"]: r for r in capability["rest"][0]["resource"]}
    advertised = {p["name"]: p["type"] for p in resources["Observation"]["searchParam"]}
    for name in ("code-value-quantity", "code-value-date", "component-code-value-quantity",
                 "combo-code-value-concept"):
        assert advertised[name] == "composite", name
    assert "relationship" not in {p["name"] for p in resources["DocumentReference"].get("searchParam", [])}


def test_fhirpy_sends_a_composite_search(api, tag) -> None:
    """A real client (fhirpy, unmodified) builds the query; the server answers the pair."""
    fhir = SyncFHIRClient(api.fhir)
    for codes, number in ((["2823-3"], 5.6), (["2823-3"], 3.9), (["2951-2"], 141)):
        fhir.resource("Observation", **_observation(tag, codes, **_quantity(number))).save()
    search = fhir.resources("Observation").search(identifier=f"urn:test|{tag}")
    found = search.search(**{"code-value-quantity": f"{LOINC}|2823-3$gt5"}).fetch_all()
    assert [o["valueQuantity"]["value"] for o in found] == [5.6]
