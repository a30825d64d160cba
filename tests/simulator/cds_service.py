"""A CDS Hooks 2.0 service written for the tests from the specification's examples (cds-hooks.hl7.org/2.0:
the discovery response, the `patient-greeting` patient-view service, an order-sign service with a
suggestion, the feedback endpoint), served by FastAPI/uvicorn in a thread. Nothing of Rounds is imported:
it sees only what a real service would — the hook request, its prefetch, and `fhirServer`.

Modes (`CdsService.mode`): `good` warns on an apixaban 5 mg order with creatinine >= 1.5 and suggests 2.5 mg;
`noisy` also warns on patient-view and suggests the wrong dose; `broken` answers 500; `slow` sleeps."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

CREATININE = "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-d-labitems|50912"
DISCOVERY = {"services": [
    {"hook": "patient-view", "id": "patient-greeting", "title": "Patient greeting",
     "description": "Display which patient the user is currently working with",
     "prefetch": {"patientToGreet": "Patient/{{context.patientId}}"}},
    {"hook": "order-select", "id": "medication-echo", "title": "Medication echo",
     "description": "The spec's example: echoes the medication the user selects"},
    {"hook": "encounter-discharge", "id": "discharge-creatinine", "title": "Creatinine at discharge",
     "description": "Reads the stay's creatinines through fhirServer (no prefetch) and flags an AKI"},
    {"hook": "order-sign", "id": "renal-dosing", "title": "Renal dose check",
     "description": "Anticoagulant doses against the latest creatinine",
     "prefetch": {"creatinine": f"Observation?patient={{{{context.patientId}}}}&code={CREATININE}"
                                "&_sort=-date&_count=1"}},
]}


@dataclass
class CdsService:
    mode: str = "good"
    url: str = ""
    calls: list[dict] = field(default_factory=list)
    feedback: list[dict] = field(default_factory=list)
    reads: list[int] = field(default_factory=list)  # statuses of its own reads on fhirServer


def _card(summary: str, indicator: str, **extra) -> dict:
    return {"uuid": str(uuid.uuid4()), "summary": summary, "indicator": indicator,
            "source": {"label": "Rounds test CDS service", "url": "https://cds-hooks.hl7.org"}, **extra}


def _greeting(state: CdsService, body: dict) -> dict:
    auth = body.get("fhirAuthorization")
    if auth:  # a service reading more than its prefetch, with the token the EHR handed it
        url = f"{body['fhirServer']}/Patient/{body['context']['patientId']}"
        headers = {"Authorization": f"Bearer {auth['access_token']}"}
        state.reads.append(httpx.get(url, headers=headers, timeout=30).status_code)
    patient = (body.get("prefetch") or {}).get("patientToGreet") or {}
    name = " ".join((patient.get("name") or [{}])[0].get("given") or []) or "unknown"
    cards = [_card(f"Now seeing: {name}", "info", links=[{"label": "SMART app", "url": "https://example.org",
                                                          "type": "absolute"}])]
    if state.mode == "noisy":
        cards.append(_card("Review all medications", "warning"))
    return {"cards": cards}


def _renal(state: CdsService, body: dict) -> dict:
    bundle = (body.get("prefetch") or {}).get("creatinine") or {}
    latest = next((e["resource"] for e in bundle.get("entry") or ()), None)
    value = ((latest or {}).get("valueQuantity") or {}).get("value", 0)
    cards = []
    for entry in body["context"]["draftOrders"]["entry"]:
        order = entry["resource"]
        drug = (order.get("medicationCodeableConcept") or {}).get("text", "")
        dose = " ".join(d.get("text", "") for d in order.get("dosageInstruction") or ())
        if drug.lower() == "apixaban" and "5 mg" in dose and value >= 1.5:
            keep = "5 mg twice daily" if state.mode == "noisy" else "2.5 mg twice daily"
            suggested = {**order, "status": "active", "dosageInstruction": [{"text": keep}]}
            cards.append(_card(
                f"Apixaban {dose} with creatinine {value} mg/dL", "warning",
                detail="Reduced renal function: the 2.5 mg twice daily dose may still be the right one.",
                suggestions=[{"label": f"Keep apixaban {keep}", "uuid": str(uuid.uuid4()),
                              "isRecommended": True,
                              "actions": [{"type": "update", "description": f"Order apixaban {keep}",
                                           "resource": suggested}]}],
                overrideReasons=[{"code": "benefit", "display": "benefit outweighs risk"}]))
    return {"cards": cards, "systemActions": []}


def _echo(body: dict) -> dict:
    """Echoes the selected draft orders (info), as the spec's order-select example does."""
    selected = set(body["context"]["selections"])
    drafts = [e["resource"] for e in body["context"]["draftOrders"]["entry"]]
    names = [(d.get("medicationCodeableConcept") or {}).get("text", "?") for d in drafts
             if f"{d['resourceType']}/{d['id']}" in selected]
    return {"cards": [_card(f"Selected: {', '.join(names)}", "info")]}


def _discharge(body: dict) -> dict:
    """Reads the stay's creatinines itself, as a service may, from `fhirServer` with `fhirAuthorization`."""
    auth = body.get("fhirAuthorization") or {}
    headers = {"Authorization": f"Bearer {auth['access_token']}"} if auth else {}
    found = httpx.get(f"{body['fhirServer']}/Observation", headers=headers, timeout=30, params={
        "patient": body["context"]["patientId"], "code": CREATININE, "_sort": "date", "_count": "100"}).json()
    values = [e["resource"]["valueQuantity"]["value"] for e in found.get("entry") or ()]
    if len(values) < 2 or max(values) < 1.5 * values[0]:
        return {"cards": []}
    return {"cards": [_card(f"Creatinine peaked at {max(values)} mg/dL during the stay (last {values[-1]})",
                            "warning", detail="Acute kidney injury: recheck creatinine within a week.")]}


def app(state: CdsService) -> FastAPI:
    api = FastAPI()

    @api.get("/cds-services")
    def discovery() -> dict:
        return DISCOVERY

    @api.post("/cds-services/{service}")
    async def hook(service: str, request: Request):
        body = await request.json()
        state.calls.append({"service": service, **body})
        if state.mode == "broken":
            return JSONResponse({"error": "boom"}, status_code=500)
        if state.mode == "slow":
            time.sleep(4)
        if service == "discharge-creatinine":
            return _discharge(body)
        if service == "medication-echo":
            return _echo(body)
        return _greeting(state, body) if service == "patient-greeting" else _renal(state, body)

    @api.post("/cds-services/{service}/feedback")
    async def feedback(service: str, request: Request) -> dict:
        state.feedback.append({"service": service, **(await request.json())})
        return {}

    return api


def serve(state: CdsService, port: int) -> uvicorn.Server:
    server = uvicorn.Server(uvicorn.Config(app(state), host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the CDS service did not start"
        time.sleep(0.02)
    state.url = f"http://127.0.0.1:{port}/cds-services"
    return server
