"""Reads patient charts through the FHIR R4 REST API (any server holding MIMIC-on-FHIR-shaped data).

A real FHIR client: searches with paging (`link[next]`), patient-scoped, `_count=1000`. Rounds' own server is
reached in-process (httpx's ASGI transport over `create_app`), any other by its base URL. A server that fails
(HTTP error, timeout, unreadable body) raises `RecordError` with what was asked and what came back; the
builder
skips that patient and reports why, or stops when the patient list itself cannot be read."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

import httpx
import orjson

from services.fhir_api.search.values import MAX_US, from_us
from services.fhir_api.store.known_time import known_at
from services.simulator.scenarios import vocabulary as vocab
from services.simulator.scenarios.chart import (
    Administration,
    Chart,
    Condition,
    Encounter,
    Isolate,
    Lab,
    Med,
    Note,
    Susceptibility,
)

PAGE = 1000
RETRY_PAUSE = 1.0  # seconds before the one retry
MICRO = "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-microbiology-"
MICRO_PROFILE = "http://mimic.mit.edu/fhir/mimic/StructureDefinition/mimic-observation-micro-"
MEDICATION_NAME = "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-medication-name"
NOT_GIVEN = {"not given", "not given per sliding scale", "hold dose", "held", "delayed", "not started",
             "not flushed", "stopped", "not confirmed"}  # MIMIC emar event_txt, lower case


class RecordError(RuntimeError):
    """The FHIR server could not answer a read the builder needs."""


async def search(client: httpx.AsyncClient, resource_type: str, params: dict[str, Any]) -> list[dict]:
    """Every resource of a search, following `next` links."""
    url: str | None = f"{resource_type}"
    query: dict[str, Any] | None = {**params, "_count": PAGE}
    found: list[dict] = []
    base = str(client.base_url).rstrip("/")
    while url:
        response = await _get(client, url, query, resource_type, base)
        if response.status_code != 200:
            raise RecordError(
                f"FHIR server {base} answered {response.status_code} to GET {resource_type}"
                f"?{response.request.url.query.decode()}: {response.text[:200]}"
            )
        try:
            bundle = orjson.loads(response.content)
        except orjson.JSONDecodeError as exc:
            raise RecordError(f"FHIR server {base} sent a body that is not JSON for {resource_type}") from exc
        found.extend(e["resource"] for e in bundle.get("entry", ()) if "resource" in e)
        nxt = [link["url"] for link in bundle.get("link", ()) if link.get("relation") == "next"]
        url, query = (nxt[0].removeprefix(base + "/") if nxt else None), None
    return found


async def _get(
    client: httpx.AsyncClient, url: str, query: dict | None, what: str, base: str
) -> httpx.Response:
    """One GET, tried again once (after RETRY_PAUSE s) on a timeout, a broken connection or a 5xx: a busy
    server should not drop a patient, a failing one still does."""
    for attempt in range(2):
        try:
            response = await client.get(url, params=query)
        except httpx.TimeoutException as exc:
            if attempt:
                raise RecordError(f"FHIR server {base} timed out on GET {what} ({exc!r})") from exc
        except httpx.HTTPError as exc:
            if attempt:
                raise RecordError(f"FHIR server {base} unreachable on GET {what}: {exc!r}") from exc
        else:
            if response.status_code < 500 or attempt:
                return response
        await asyncio.sleep(RETRY_PAUSE)
    raise AssertionError("unreachable")


async def list_patients(client: httpx.AsyncClient) -> list[dict]:
    return sorted(await search(client, "Patient", {}), key=lambda p: p["id"])


Known = Callable[[dict], "datetime | None"]


def known_time(referenced: dict[str, dict]) -> Known:
    """When a resource of this chart became known, by the store's own known-time rule (store/known_time.json):
    None when no clocked session ever sees it (a diagnosis of an Encounter without an end). `referenced`: the
    chart's resources by "Type/id" (a diagnosis is known at its Encounter's end)."""

    def known(resource: dict) -> datetime | None:
        us = known_at(resource, referenced.get)
        return None if us is None or us >= MAX_US - 1 else from_us(us)

    return known


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _ref(node: dict | None) -> str | None:
    return (node or {}).get("reference")


def _coding(concept: dict | None) -> dict:
    codings = (concept or {}).get("coding") or [{}]
    return codings[0]


def _labs(observations: list[dict], known_of: Known, keys: dict[str, str]) -> dict[str, list[Lab]]:
    """The observations coded by one of `keys` (itemid -> vocabulary lab), by lab, in known-time order."""
    labs: dict[str, list[Lab]] = {}
    for obs in observations:
        coding = next((c for c in obs["code"]["coding"] if c.get("system") == vocab.LABITEMS), None)
        quantity = obs.get("valueQuantity") or {}
        effective = _time(obs.get("effectiveDateTime"))
        if coding is None or coding["code"] not in keys or quantity.get("value") is None or effective is None:
            continue
        key = keys[coding["code"]]
        low, high = _reference_range(obs)
        labs.setdefault(key, []).append(
            Lab(
                ref=f"Observation/{obs['id']}",
                key=key,
                code=f"{vocab.LABITEMS}|{coding['code']}",
                value=float(quantity["value"]),
                unit=quantity.get("unit"),
                effective=effective,
                known=known_of(obs) or effective,
                encounter=_ref(obs.get("encounter")),
                low=low,
                high=high,
            )
        )
    for series in labs.values():
        series.sort(key=lambda lab: (lab.known, lab.effective, lab.ref))
    return labs


def _reference_range(obs: dict) -> tuple[float | None, float | None]:
    """The Observation's own normal range (its first `referenceRange`: MIMIC's ref_range_lower/upper)."""
    ranges = obs.get("referenceRange") or [{}]
    return ((ranges[0].get("low") or {}).get("value"), (ranges[0].get("high") or {}).get("value"))


def _administrations(given: list[dict], orders: dict[str, str | None]) -> list[Administration]:
    """The doses given; a MAR entry whose event says the dose was not given is no administration. The drug is
    its order's (`orders`: MedicationRequest ref -> vocabulary key) when it carried one out: a MAR entry
    names its drug by a formulary code more often than by name."""
    out = []
    for ma in given:
        when = _time(ma.get("effectiveDateTime"))
        dosage = ma.get("dosage") or {}
        method = _coding(dosage.get("method")).get("code") or ""
        if when is None or ma.get("status") not in (None, "completed") or method.lower() in NOT_GIVEN:
            continue
        name = _coding(ma.get("medicationCodeableConcept")).get("code") or ""
        dose = dosage.get("dose") or {}
        out.append(
            Administration(
                ref=f"MedicationAdministration/{ma['id']}",
                key=orders.get(_ref(ma.get("request")) or "") or vocab.drug_key(name),
                name=name,
                time=when,
                request=_ref(ma.get("request")),
                dose=dose.get("value"),
                dose_unit=dose.get("unit"),
                encounter=_ref(ma.get("context")),
            )
        )
    return sorted(out, key=lambda a: (a.time, a.ref))


def _med_name(request: dict, medications: dict[str, dict]) -> str:
    concept = request.get("medicationCodeableConcept")
    if concept:
        coding = _coding(concept)
        return coding.get("display") or coding.get("code") or concept.get("text", "")
    medication = medications.get(_ref(request.get("medicationReference")) or "", {})
    for ident in medication.get("identifier", ()):
        if ident.get("system") == MEDICATION_NAME:
            return ident.get("value", "")
    return _coding(medication.get("code")).get("code", "")


def _meds(requests: list[dict], medications: dict[str, dict]) -> list[Med]:
    meds = []
    for req in requests:
        authored = _time(req.get("authoredOn"))
        if authored is None:
            continue
        name = _med_name(req, medications)
        dosage = (req.get("dosageInstruction") or [{}])[0]
        dose = ((dosage.get("doseAndRate") or [{}])[0]).get("doseQuantity") or {}
        period = (req.get("dispenseRequest") or {}).get("validityPeriod") or {}
        meds.append(
            Med(
                ref=f"MedicationRequest/{req['id']}",
                key=vocab.drug_key(name),
                name=name,
                route=_coding(dosage.get("route")).get("code"),
                dose=dose.get("value"),
                dose_unit=dose.get("unit"),
                authored=authored,
                start=_time(period.get("start")),
                end=_time(period.get("end")),
                encounter=_ref(req.get("encounter")),
                status=req.get("status"),
                frequency=_coding((dosage.get("timing") or {}).get("code")).get("code"),
            )
        )
    return sorted(meds, key=lambda m: (m.authored, m.ref))


def _isolates(observations: list[dict], known_of: Known) -> list[Isolate]:
    by_ref = {f"Observation/{o['id']}": o for o in observations}
    isolates = []
    for ref, obs in by_ref.items():
        coding = _coding(obs.get("code"))
        if coding.get("system") != MICRO + "organism":
            continue
        suscs = []
        for member in obs.get("hasMember", ()):
            s = by_ref.get(member["reference"])
            interp = _coding(s.get("valueCodeableConcept")).get("code") if s else None
            when = known_of(s) if s else None
            if s and interp in ("S", "I", "R") and when:
                suscs.append(
                    Susceptibility(member["reference"], _coding(s["code"]).get("display", ""), interp, when)
                )
        test_ref = next((d["reference"] for d in obs.get("derivedFrom", ())), None)
        test = by_ref.get(test_ref or "", {})
        collected = _time(test.get("effectiveDateTime")) or _time(obs.get("effectiveDateTime"))
        if collected is None:
            continue
        times = [collected, *(s.known for s in suscs)]
        if (org_known := known_of(obs)) is not None:
            times.append(org_known)
        isolates.append(
            Isolate(
                ref=ref,
                organism=coding.get("display") or coding.get("code", ""),
                test_ref=test_ref,
                specimen=_coding(test.get("code")).get("display"),
                collected=collected,
                known=max(times),
                susceptibilities=tuple(sorted(suscs, key=lambda s: (s.antibiotic, s.ref))),
                encounter=_ref(test.get("encounter")),
            )
        )
    return sorted(isolates, key=lambda i: (i.known, i.ref))


def _note_text(doc: dict) -> str:
    import base64

    for content in doc.get("content", ()):
        data = (content.get("attachment") or {}).get("data")
        if data:
            return base64.b64decode(data).decode("utf-8", "replace")
    return ""


async def read_chart(
    client: httpx.AsyncClient, patient: dict, medications: dict[str, dict], lock: asyncio.Lock
) -> Chart:
    """One patient's chart: encounters, diagnoses, the vocabulary's labs, microbiology, orders, notes."""
    pid = patient["id"]
    lab_codes = ",".join([vocab.lab_code(key) for key in vocab.vocabulary()["labs"]]
                         + [f"{vocab.LABITEMS}|{itemid}" for itemid in vocab.repeat_keys_by_itemid()])
    # by profile: the MIMIC-on-FHIR micro profiles (a system-only code search is far slower on most servers)
    micro_profiles = ",".join(MICRO_PROFILE + kind for kind in ("test", "org", "susc"))
    scoped = {"patient": pid}
    encounters, conditions, labs, micro, requests, notes, given = await asyncio.gather(
        search(client, "Encounter", scoped),
        search(client, "Condition", scoped),
        search(client, "Observation", {**scoped, "code": lab_codes}),
        search(client, "Observation", {**scoped, "_profile": micro_profiles}),
        search(client, "MedicationRequest", scoped),
        search(client, "DocumentReference", scoped),
        search(client, "MedicationAdministration", scoped),
    )
    wanted = sorted({r for req in requests if (r := _ref(req.get("medicationReference")))} - set(medications))
    for start in range(0, len(wanted), 100):
        ids = ",".join(r.split("/", 1)[1] for r in wanted[start : start + 100])
        found = await search(client, "Medication", {"_id": ids})
        async with lock:
            medications.update({f"Medication/{m['id']}": m for m in found})
    chart = Chart(
        patient=f"Patient/{pid}",
        mrn=next((i.get("value") for i in patient.get("identifier", ()) if i.get("value")), None),
        name=" ".join(
            [
                *((patient.get("name") or [{}])[0].get("given") or []),
                (patient.get("name") or [{}])[0].get("family", ""),
            ]
        ).strip(),
        birth_date=date.fromisoformat(patient["birthDate"]) if patient.get("birthDate") else None,
        gender=patient.get("gender"),
    )
    for enc in encounters:
        start = _time((enc.get("period") or {}).get("start"))
        if start:
            chart.encounters.append(
                Encounter(
                    f"Encounter/{enc['id']}",
                    start,
                    _time(enc["period"].get("end")),
                    _coding(enc.get("class")).get("code") or (enc.get("class") or {}).get("code"),
                )
            )
    chart.encounters.sort(key=lambda e: (e.start, e.ref))
    known_of = known_time({f"Encounter/{enc['id']}": enc for enc in encounters})
    for cond in conditions:
        coding = _coding(cond.get("code"))
        chart.diagnoses.append((coding.get("code", ""), _ref(cond.get("encounter"))))
        key = vocab.condition_key(coding.get("system", ""), coding.get("code", ""))
        if key:
            chart.conditions.append(
                Condition(
                    f"Condition/{cond['id']}",
                    key,
                    coding["code"],
                    coding.get("display", ""),
                    _ref(cond.get("encounter")),
                    known_of(cond),
                )
            )
    chart.diagnoses.sort(key=lambda d: (d[0], d[1] or ""))
    chart.conditions.sort(key=lambda c: (c.known is None, c.known.timestamp() if c.known else 0.0, c.ref))
    chart.labs = _labs(labs, known_of, vocab.lab_keys_by_itemid())
    chart.repeats = _labs(labs, known_of, vocab.repeat_keys_by_itemid())
    chart.isolates = _isolates(micro, known_of)
    chart.meds = _meds(requests, medications)
    chart.administrations = _administrations(given, {m.ref: m.key for m in chart.meds})
    for doc in notes:
        when = known_of(doc)
        if when:
            chart.notes.append(Note(f"DocumentReference/{doc['id']}", when, _note_text(doc)))
    chart.notes.sort(key=lambda n: (n.known, n.ref))
    chart.references = {e.ref: e.start for e in chart.encounters}
    chart.references.update({c.ref: c.known for c in chart.conditions})
    chart.references.update({lab.ref: lab.known for series in chart.labs.values() for lab in series})
    chart.references.update({f"MedicationRequest/{r['id']}": known_of(r) for r in requests})
    chart.references.update({i.ref: i.known for i in chart.isolates})
    chart.references.update({n.ref: n.known for n in chart.notes})
    chart.references.update({a.ref: a.time for a in chart.administrations})
    return chart
