"""What the importer asks the loaded record, over its FHIR REST API like any client: is the question's
patient there, which gold resources does it hold (the peer's own validation step drops the others), and when
did the patient's last data become known (the session clock, so the whole record is visible).

Known times are the store's own rule (services/fhir_api/store/known_time.json through reader.known_time):
a diagnosis is known at its stay's end, a lab when resulted.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx

from services.simulator.scenarios.reader import RecordError, known_time, search

CHUNK = 100  # ids per `_id` search: 100 uuids keep the URL far below the server's 32 KiB
LATEST = {"Observation": "-date", "MedicationRequest": "-authoredon",
          "MedicationAdministration": "-effective-time", "Specimen": "-collected", "Procedure": "-date"}
NEWEST = 20  # of each type: a later-resulted one than the newest drawn is among them


async def patient_exists(client: httpx.AsyncClient, patient: str) -> bool:
    response = await client.get(f"Patient/{patient}")
    if response.status_code in (404, 410):
        return False
    if response.status_code != 200:
        raise RecordError(f"GET Patient/{patient} answered {response.status_code}: {response.text[:200]}")
    return True


async def held(client: httpx.AsyncClient, kind: str, ids: list[str]) -> dict[str, dict]:
    """The resources of `ids` the record holds, by id (the others are absent)."""
    out: dict[str, dict] = {}
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start:start + CHUNK]
        for resource in await search(client, kind, {"_id": ",".join(chunk)}):
            out[resource["id"]] = resource
    return out


async def newest(client: httpx.AsyncClient, patient: str) -> list[dict]:
    """The patient's encounters and the newest resources of each timed type."""
    found = await search(client, "Encounter", {"patient": patient})
    for kind, order in LATEST.items():
        response = await client.get(kind, params={"patient": patient, "_sort": order, "_count": NEWEST})
        if response.status_code != 200:
            raise RecordError(f"GET {kind}?patient={patient}&_sort={order} answered {response.status_code}")
        found += [e["resource"] for e in response.json().get("entry") or [] if e.get("search", {}).get(
            "mode", "match") == "match"]
    return found


def clock_after(resources: list[dict]) -> datetime | None:
    """The first whole minute after every one of `resources` became known (None: none ever does)."""
    referenced = {f"{r['resourceType']}/{r['id']}": r for r in resources}
    known = known_time(referenced)
    times = [t for r in resources if (t := known(r)) is not None]
    if not times:
        return None
    last = max(times)
    return last.replace(second=0, microsecond=0) + timedelta(minutes=1)
