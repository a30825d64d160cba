"""Real FHIR client libraries, unmodified, against the live server: fhirpy (sync and async) and fhirclient."""

from __future__ import annotations

import asyncio

from fhirclient import client as fhirclient
from fhirclient.models.bundle import Bundle
from fhirclient.models.observation import Observation as FcObservation
from fhirclient.models.patient import Patient as FcPatient
from fhirpy import AsyncFHIRClient, SyncFHIRClient

from tests.fhir_api.conftest import observation, patient


def test_fhirpy_sync_crud_conditional_count_and_paging(api, tag):
    fhir = SyncFHIRClient(api.fhir)
    created = fhir.resource("Patient", **patient(tag, family=f"Py{tag}"))
    created.save()
    assert created.id and created["meta"]["versionId"] == "1"
    read = fhir.reference("Patient", created.id).to_resource()
    assert read["name"][0]["family"] == f"Py{tag}"
    read["gender"] = "male"
    read.save()
    assert fhir.reference("Patient", created.id).to_resource()["gender"] == "male"
    again, created_again = (
        fhir.resources("Patient")
        .search(identifier=f"urn:test|{tag}")
        .get_or_create(fhir.resource("Patient", **patient(tag)))
    )
    assert created_again is False and again.id == created.id  # conditional create found the existing one
    fresh, created_fresh = (
        fhir.resources("Patient")
        .search(identifier=f"urn:test|new-{tag}")
        .get_or_create(fhir.resource("Patient", **patient(f"new-{tag}")))
    )
    assert created_fresh is True and fresh.id != created.id
    for _ in range(4):
        fhir.resource("Patient", **patient(tag, family=f"Py{tag}")).save()
    search = fhir.resources("Patient").search(family=f"Py{tag}")
    assert search.count() == 5
    everyone = search.limit(2).fetch_all()  # follows next links to the last page
    assert len({p.id for p in everyone}) == 5
    read.patch(active=True)
    assert fhir.reference("Patient", created.id).to_resource()["active"] is True


def test_fhirpy_async(api, tag):
    async def scenario() -> tuple[int, int]:
        fhir = AsyncFHIRClient(api.fhir)
        pat = fhir.resource("Patient", **patient(tag, family=f"As{tag}"))
        await pat.save()
        for day in range(1, 4):
            await fhir.resource(
                "Observation", **observation(pat.id, f"py-{tag}", f"2150-01-0{day}T00:00:00Z")
            ).save()
        obs = fhir.resources("Observation").search(subject=f"Patient/{pat.id}").sort("-date")
        fetched = await obs.limit(2).fetch_all()
        return await obs.count(), len(fetched)

    count, fetched = asyncio.run(scenario())
    assert count == 3 and fetched == 3


def test_fhirclient_read_search_create_update_count(api, tag):
    smart = fhirclient.FHIRClient(settings={"app_id": "rounds-tests", "api_base": api.fhir + "/"})
    server = smart.server
    created = FcPatient(patient(tag, family=f"Fc{tag}"))
    response = created.create(server)
    pid = response["id"]
    for _ in range(4):
        FcPatient(patient(tag, family=f"Fc{tag}")).create(server)
    read = FcPatient.read(pid, server)
    assert read.name[0].family == f"Fc{tag}"
    read.gender = "other"
    read.update(server)
    assert FcPatient.read(pid, server).gender == "other"
    found = list(FcPatient.where(struct={"family": f"Fc{tag}", "_count": "2"}).perform_resources_iter(server))
    assert len({p.id for p in found}) == 5  # pages followed via absolute next links
    counted = Bundle.read_from(f"Patient?family=Fc{tag}&_summary=count", server)
    assert counted.total == 5
    obs = FcObservation(observation(pid, f"fc-{tag}", "2150-01-01T00:00:00Z"))
    assert obs.create(server)["resourceType"] == "Observation"
    server.get_capability(force=True)  # our CapabilityStatement parses with fhirclient's strict models
    assert server.capabilityStatement.fhirVersion == "4.0.1"
