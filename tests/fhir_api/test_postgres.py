"""The same HTTP behaviour on PostgreSQL: transactions roll back, paging is stable, sessions isolate."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.fhir_api.conftest import assert_outcome, live_api, observation, patient


@pytest.mark.postgres
def test_http_on_postgres(postgres_url):
    for api in live_api(postgres_url):
        fhir = httpx.Client(base_url=api.fhir, timeout=120)
        pid = fhir.post("/Patient", json=patient("pg")).json()["id"]
        for day in range(1, 6):
            fhir.post("/Observation", json=observation(pid, "pg-lab", f"2150-0{day}-01T00:00:00Z"))
        page = fhir.get("/Observation", params={"patient": pid, "_count": 2, "_sort": "-date"}).json()
        fhir.post("/Observation", json=observation(pid, "pg-lab", "2150-09-01T00:00:00Z"))  # between pages
        seen = [e["resource"]["effectiveDateTime"][:7] for e in page["entry"]]
        while nxt := next((link["url"] for link in page["link"] if link["relation"] == "next"), None):
            page = httpx.get(nxt).json()
            seen += [e["resource"]["effectiveDateTime"][:7] for e in page["entry"]]
        assert seen == ["2150-05", "2150-04", "2150-03", "2150-02", "2150-01"]

        bad_tx = {
            "resourceType": "Bundle",
            "type": "transaction",
            "entry": [
                {"resource": patient("pg-tx"), "request": {"method": "POST", "url": "Patient"}},
                {"request": {"method": "DELETE", "url": "Patient/missing"}},
                {
                    "resource": {"resourceType": "Patient", "id": "x"},
                    "request": {"method": "PUT", "url": "Patient/y"},
                },
            ],
        }
        assert_outcome(fhir.post("", json=bad_tx), 400)
        assert (
            fhir.get("/Patient", params={"identifier": "urn:test|pg-tx", "_summary": "count"}).json()["total"]
            == 0
        )

        session = httpx.post(f"{api.root}/sessions", json={"now": "2150-03-15"}).json()
        in_session = httpx.Client(base_url=session["fhirBase"], timeout=120)
        counted = in_session.get("/Observation", params={"patient": pid, "_summary": "count"}).json()["total"]
        assert counted == 3
        written = in_session.post("/Observation", json=observation(pid, "pg-lab", "2150-03-10T00:00:00Z"))
        assert written.status_code == 201
        assert fhir.get(f"/Observation/{written.json()['id']}").status_code == 404
        assert (
            in_session.get("/Observation", params={"patient": pid, "_summary": "count"}).json()["total"] == 4
        )
        r = fhir.get(
            "/Observation", params={"code": "'; DROP TABLE fhir_resource;--", "date": "ge2150' OR 1=1"}
        )
        assert r.status_code in (200, 400)
        for key in ("name", "identifier", "_id", "birthdate", "general-practitioner"):
            assert_outcome(fhir.get("/Patient", params={key: "a\x00b"}), 400)  # PostgreSQL text has no NUL
        assert fhir.get("/Observation", params={"patient": pid, "_summary": "count"}).json()["total"] == 6


def _scalar(database_url: str, sql: str) -> int:
    """One value from a connection of its own (outside the API's pools)."""
    admin = create_engine(database_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        value = conn.execute(text(sql)).scalar_one()
    admin.dispose()
    return value


def _burst(base: str, paths: list[str]) -> list[int]:
    """Statuses of GETs of all `paths` at once."""

    async def run() -> list[int]:
        async with httpx.AsyncClient(base_url=base, timeout=120) as c:
            return [r.status_code for r in await asyncio.gather(*(c.get(p) for p in paths))]

    return asyncio.run(run())


@pytest.mark.postgres
def test_concurrent_requests_reuse_pooled_connections(postgres_url):
    """More concurrent requests than pooled connections wait for a connection: none is opened per request."""
    started = "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
    for api in live_api(postgres_url):
        pid = httpx.post(f"{api.fhir}/Patient", json=patient("pool")).json()["id"]
        paths = [f"/Patient/{pid}", f"/Observation?patient={pid}"] * 40
        for _ in range(5):  # warm up until the pools hold their steady connections (a burst opened none)
            warm = _scalar(postgres_url, started)
            assert _burst(api.fhir, paths) == [200] * 80
            if _scalar(postgres_url, started) - warm <= 1:
                break
        before = _scalar(postgres_url, started)
        assert _burst(api.fhir, paths) == [200] * 80
        assert _scalar(postgres_url, started) - before <= 1  # only this check's own connection


@pytest.mark.postgres
def test_reads_survive_dropped_connections(postgres_url):
    """Read connections are not pinged at checkout: a read whose connection the server dropped (restart,
    idle timeout, failover) runs again on fresh connections instead of failing."""
    drop = (
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    for api in live_api(postgres_url):
        fhir = httpx.Client(base_url=api.fhir, timeout=120)
        pid = fhir.post("/Patient", json=patient("dropped")).json()["id"]
        fhir.post("/Observation", json=observation(pid, "dropped-lab", "2150-01-01T00:00:00Z"))
        sid = httpx.post(f"{api.root}/sessions", json={"now": "2150-06-01"}).json()["id"]
        paths = [f"/Patient/{pid}", f"/Observation?patient={pid}", f"/Patient/{pid}/_history/1"] * 8
        assert _burst(api.fhir, paths) == [200] * 24  # several pooled connections
        assert _scalar(postgres_url, drop) >= 2
        assert [fhir.get(p).status_code for p in paths[:3]] == [200, 200, 200]
        assert httpx.get(f"{api.root}/sessions/{sid}/fhir/Patient/{pid}").status_code == 200
        assert _scalar(postgres_url, drop) >= 1
        assert _burst(api.fhir, paths) == [200] * 24
        assert httpx.get(f"{api.root}/sessions/{sid}/fhir/Observation?patient={pid}").status_code == 200
        assert fhir.get(f"/Patient/{pid}/_history").json()["total"] == 1
