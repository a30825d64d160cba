"""HAPI-style leniency for real clients, replaying MedAgentBench's request shapes as its
agents send them: empty values, and an unencoded `+` in a dateTime offset (which arrives as a space)."""

from __future__ import annotations

import httpx

from services.fhir_api.http.lenient import lenient
from tests.fhir_api.conftest import assert_outcome, observation, patient

STRICT = {"Prefer": "handling=strict"}


def ids(response: httpx.Response) -> set[str]:
    assert response.status_code == 200, response.text
    return {e["resource"]["id"] for e in response.json().get("entry", [])}


def test_empty_search_values_are_ignored_unless_strict(api, client, tag):
    family = f"Lenient{tag}"
    pid = client.post("/Patient", json=patient(tag, family=family, birthDate="2100-01-01")).json()["id"]
    # MedAgentBench's patient lookup: every parameter present, some of them empty
    got = httpx.get(f"{api.fhir}/Patient?given=&family={family}&birthdate=")
    assert ids(got) == {pid}
    self_link = next(link["url"] for link in got.json()["link"] if link["relation"] == "self")
    assert "given=" not in self_link and f"family={family}" in self_link
    assert ids(httpx.get(f"{api.fhir}/Patient?given=Pat&family={family}&birthdate=2100-01-01")) == {pid}
    assert ids(httpx.get(f"{api.fhir}/Patient?given=Nope&family={family}&birthdate=")) == set()
    assert_outcome(httpx.get(f"{api.fhir}/Patient?given=&family={family}&birthdate=", headers=STRICT), 400)
    assert_outcome(httpx.get(f"{api.fhir}/Patient?family={family},"), 400)  # an empty alternative stays wrong


def test_a_plus_offset_sent_unencoded_is_read_as_plus(api, client, tag):
    pid = client.post("/Patient", json=patient(tag)).json()["id"]
    code = f"mg-{tag}"
    oid = client.post("/Observation", json=observation(pid, code, "2115-10-18T12:00:00+00:00")).json()["id"]
    url = f"{api.fhir}/Observation?patient={pid}&code={code}&date=ge"  # as MedAgentBench writes it
    assert "+" in httpx.URL(url + "2115-10-18T11:00:00+00:00").query.decode()  # sent unencoded
    assert ids(httpx.get(url + "2115-10-18T11:00:00+00:00")) == {oid}
    assert ids(httpx.get(url + "2115-10-18T13:00:00+00:00")) == set()  # the offset counts: not dropped
    assert ids(httpx.get(url + "2115-10-18T13:00:00+02:00")) == {oid}  # 11:00 UTC
    assert ids(httpx.get(f"{api.fhir}/Observation", params={"patient": pid, "code": code,
                                                             "date": "ge2115-10-18T11:00:00+00:00"})) == {oid}
    assert_outcome(httpx.get(url + "2115-10-18T11:00:00+00:00", headers=STRICT), 400)


def test_lenient_touches_nothing_else():
    params = [("name", "Pat 12:30"), ("date", "2115-10-18 00:00"), ("date", "ge2115-10-18T11:00 00:00,"
                                                                     "lt2115-10-19T11:00:00.5 05:30")]
    assert lenient(params, strict=False) == [
        ("name", "Pat 12:30"), ("date", "2115-10-18 00:00"),
        ("date", "ge2115-10-18T11:00+00:00,lt2115-10-19T11:00:00.5+05:30")]
    assert lenient([("given", ""), ("family", "x")], strict=True) == [("given", ""), ("family", "x")]
