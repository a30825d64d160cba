"""Assistants the simulator tests run as `python:tests.simulator.sample_assistants:<name>` (good and bad)."""

from __future__ import annotations

import asyncio
import contextlib
import time


def sync_lookup(ctx) -> str:
    """Synchronous: searches the creatinine, asks the patient on the OTC turn, writes on turn 3."""
    if ctx.turn == 1:
        return "Patient says: " + ctx.ask_patient("Do you take any painkillers like ibuprofen?")
    if ctx.turn == 3:
        order = ctx.http.get("MedicationRequest/sim-apix-1").json()
        order["dosageInstruction"] = [{"text": "5 mg twice daily"}]
        assert ctx.http.put("MedicationRequest/sim-apix-1", json=order).status_code == 200
        return "Updated to 5 mg twice daily."
    params = {"patient": ctx.patient, "code": "50912", "_sort": "-date"}
    bundle = ctx.http.get("Observation", params=params).json()
    values = [e["resource"]["valueQuantity"]["value"] for e in bundle.get("entry", [])]
    return f"creatinine values {values}; history has {len(ctx.history)} items"


async def async_lookup(ctx) -> str:
    if ctx.turn == 1:
        return "Patient says: " + await ctx.ask_patient("Any over the counter medicines?")
    response = await ctx.http.get("Observation", params={"patient": ctx.patient, "code": "50912"})
    return f"{len(response.json().get('entry', []))} creatinine results (turn {ctx.turn})"


async def writes_note(ctx) -> str:
    """Writes one Communication tagged with its session id (isolation test)."""
    note = {"resourceType": "Communication", "status": "completed",
            "subject": {"reference": ctx.patient},
            "identifier": [{"system": "urn:session", "value": ctx.session}],
            "payload": [{"contentString": f"note of {ctx.session}"}]}
    created = await ctx.http.post("Communication", json=note)
    assert created.status_code == 201, created.text
    seen = (await ctx.http.get("Communication", params={"subject": ctx.patient, "_count": "200"})).json()
    owners = sorted({e["resource"]["identifier"][0]["value"] for e in seen.get("entry", [])})
    return ",".join(owners)


async def sleeps(ctx) -> str:
    await asyncio.sleep(30)
    return "too late"


def sleeps_sync(ctx) -> str:
    time.sleep(3)
    return "too late"


def raises(ctx) -> str:
    raise RuntimeError("assistant bug")


def returns_dict(ctx):
    return {"answer": 42}


def returns_empty(ctx) -> str:
    return "   "


async def invalid_fhir(ctx) -> str:
    response = await ctx.http.post("Observation", json={"resourceType": "Observation", "status": "bogus"})
    response.raise_for_status()
    return "written"


async def invalid_fhir_carries_on(ctx) -> str:
    response = await ctx.http.post("Observation", json={"resourceType": "Observation", "status": "bogus"})
    return f"the server said {response.status_code}"


async def loops(ctx) -> str:
    for _ in range(50):
        await ctx.http.get("Observation", params={"patient": ctx.patient})
    return "done"


async def loops_and_swallows(ctx) -> str:
    for _ in range(50):
        with contextlib.suppress(Exception):  # a sloppy assistant hides the refusal
            await ctx.http.get("Observation", params={"patient": ctx.patient})
    return "done anyway"


async def reads_other_session(ctx) -> str:
    shared = await ctx.http.get(ctx.fhir_base.split("/sessions/")[0] + "/fhir/Patient/sim-p1")
    return f"status {shared.status_code}"


async def fhir_lookup_raising(ctx) -> str:
    response = await ctx.http.get("Observation", params={"patient": ctx.patient, "code": "50912"})
    response.raise_for_status()
    return "ok"
