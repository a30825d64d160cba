"""A patient-confined token against every resource type of the CapabilityStatement, on SQLite and PostgreSQL.

The shared record gets one resource of patient b per type (the first HL7 R4 example of the type, with every
Patient reference turned into b), plus a Medication b is prescribed. A session opened for patient a then tries
each one by read, search, type and instance `_history`, a batch of both, and `_has` / chains that reach from
a type outside the compartment into b's resources. A success is any answer that shows b's data: a resource
naming `Patient/b` (or b itself), or, for `_has` and chains, any match. Types outside every compartment
(Medication, Location, Organization, Practitioner …) stay readable: the control."""

from __future__ import annotations

import json
import re
import tarfile
from functools import cache

import httpx
import pytest

from tests.fhir_api.conftest import patient, secured_api
from tests.security.tally import Tally, admin_headers, created

pytestmark = pytest.mark.slow  # every type of the CapabilityStatement, a few minutes a backend

EXAMPLES = "hl7.fhir.r4.examples-4.0.1.tgz"
_PATIENT_REF = re.compile(r"^(?:.*/)?Patient/[^/]+(?:/_history/.*)?$")


@cache
def first_examples(path: str) -> dict[str, dict]:
    """Resource type -> its first example (by file name) of the R4 examples package."""
    found: dict[str, dict] = {}
    with tarfile.open(path) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            name = member.name.rsplit("/", 1)[-1]
            rtype = name.split("-", 1)[0]
            if rtype in found or not name.endswith(".json") or "-" not in name or not rtype[:1].isupper():
                continue
            doc = json.load(tar.extractfile(member))
            if doc.get("resourceType") == rtype and rtype not in ("Bundle", "Parameters"):
                found[rtype] = doc
    return found


def of_patient(value: object, patient_id: str) -> object:
    """`value` with every Patient reference naming `patient_id`, and no id or meta at the top."""
    if isinstance(value, dict):
        out = {k: of_patient(v, patient_id) for k, v in value.items()}
        if isinstance(out.get("reference"), str) and _PATIENT_REF.match(out["reference"]):
            out["reference"] = f"Patient/{patient_id}"
        return out
    if isinstance(value, list):
        return [of_patient(v, patient_id) for v in value]
    return value


def shows_b(answer: httpx.Response, b: str) -> bool:
    text = answer.text.replace(" ", "")
    return answer.is_success and (f"Patient/{b}" in text or f'"id":"{b}"' in text)


def matches(answer: httpx.Response) -> bool:
    return answer.is_success and bool(answer.json().get("entry"))


def _seed(api, admin: dict, examples: dict[str, dict], types: list[str], b: str) -> dict[str, str]:
    planted: dict[str, str] = {}
    for rtype in types:
        if rtype == "Patient" or rtype not in examples:
            continue
        body = {k: v for k, v in of_patient(examples[rtype], b).items() if k not in ("id", "meta")}
        if rtype == "Subscription":  # its endpoint and Authorization header are refused unless it is off
            body["status"] = "off"
        answer = httpx.post(f"{api.fhir}/{rtype}", json=body, headers=admin)
        if answer.status_code == 201:
            planted[rtype] = answer.json()["id"]
    planted["Patient"] = b
    return planted


def _attack(base: str, token: str, planted: dict[str, str], b: str, tally: Tally) -> None:
    http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    for rtype, id in planted.items():
        tally.attempt("read", shows_b(http.get(f"/{rtype}/{id}"), b), rtype)
        tally.attempt("search", shows_b(http.get(f"/{rtype}", params={"_id": id}), b), rtype)
        tally.attempt("search", shows_b(http.post(f"/{rtype}/_search", data={"_id": id}), b), rtype)
        tally.attempt("_history", shows_b(http.get(f"/{rtype}/_history"), b), rtype)
        tally.attempt("_history", shows_b(http.get(f"/{rtype}/{id}/_history"), b), rtype)
        batch = {"resourceType": "Bundle", "type": "batch", "entry": [
            {"request": {"method": "GET", "url": f"{rtype}/{id}"}},
            {"request": {"method": "GET", "url": f"{rtype}?_id={id}"}},
            {"request": {"method": "GET", "url": f"{rtype}/{id}/_history"}}]}
        tally.attempt("batch", shows_b(http.post("", json=batch), b), rtype)
        for has in (f"_has:Observation:subject:subject=Patient/{b}", f"_has:Encounter:subject:_id={b}",
                    f"_has:MedicationRequest:medication:subject=Patient/{b}",
                    f"_has:Provenance:target:patient=Patient/{b}"):
            name, value = has.split("=", 1)
            tally.attempt("_has", matches(http.get(f"/{rtype}", params={name: value})), f"{rtype}?{has}")
        tally.attempt("chain", shows_b(http.get(f"/{rtype}", params={"subject:Patient._id": b}), b), rtype)
        tally.attempt("_include", shows_b(http.get(f"/{rtype}", params={"_id": id, "_include": "*",
                                                                         "_revinclude": "*"}), b), rtype)
    tally.attempt("_history", shows_b(http.get("/_history"), b), "system")
    medication = http.get("/Medication", params={"_has:MedicationRequest:medication:subject": f"Patient/{b}"})
    tally.attempt("_has", matches(medication), "the issue's Medication?_has:MedicationRequest")


@pytest.mark.parametrize("database_url", ["sqlite", "postgres"], indirect=True)
def test_every_type_stays_in_the_compartment(database_url: str, shared_data) -> None:
    examples = first_examples(str(shared_data / "fhir-r4-examples" / EXAMPLES))
    tally = Tally(f"compartment attacks ({database_url.split(':')[0]})")
    with secured_api(database_url) as api:
        admin = admin_headers(api)
        a, b = (created(api, patient(f"matrix-{n}"), admin) for n in ("a", "b"))
        metadata = httpx.get(f"{api.fhir}/metadata").json()
        types = [r["type"] for r in metadata["rest"][0]["resource"]]
        planted = _seed(api, admin, examples, types, b)
        medication = created(api, {"resourceType": "Medication", "code": {"text": "matrix-drug"}}, admin)
        created(api, {"resourceType": "MedicationRequest", "status": "active", "intent": "order",
                      "medicationReference": {"reference": f"Medication/{medication}"},
                      "subject": {"reference": f"Patient/{b}"}}, admin)
        session = httpx.post(f"{api.root}/sessions", json={"patient": f"Patient/{a}"}, headers=admin).json()
        _attack(session["fhirBase"], session["accessToken"], planted, b, tally)
        # the control: outside every compartment, readable; a's own record, readable
        bearer = {"Authorization": f"Bearer {session['accessToken']}"}
        own = httpx.Client(base_url=session["fhirBase"], headers=bearer)
        assert own.get(f"/Medication/{medication}").status_code == 200
        assert own.get(f"/Patient/{a}").status_code == 200
        if "Location" in planted:
            assert own.get(f"/Location/{planted['Location']}").status_code == 200
    print(f"{len(planted)} of {len(types)} CapabilityStatement types seeded with an example of patient b")
    assert len(planted) >= 100, sorted(set(types) - set(planted))
    tally.assert_none(at_least=12 * len(planted))
