"""A migrated store on each backend (SQLite file and a fresh PostgreSQL database), and the mapped MIMIC-IV
demo cut to 25 patients loaded once per test session on each (the as-of property tests)."""

from __future__ import annotations

import random

import orjson
import pytest

from rounds.migrate import upgrade
from services.fhir_api.load import load_ndjson
from services.fhir_api.search.values import date_range
from services.fhir_api.store import open_store
from services.fhir_api.store.sql_store import SqlResourceStore


@pytest.fixture
def store(database_url: str) -> SqlResourceStore:
    upgrade(database_url)
    s = open_store(database_url)
    yield s
    s.engine.dispose()


PATIENTS = 25


def _subject(resource: dict) -> str | None:
    for key in ("subject", "patient"):
        ref = (resource.get(key) or {}).get("reference", "")
        if ref.startswith("Patient/"):
            return ref.removeprefix("Patient/")
    return resource["id"] if resource["resourceType"] == "Patient" else None


@pytest.fixture(scope="session")
def demo_ndjson(demo_mapped, tmp_path_factory) -> tuple[object, list[dict], set[str]]:
    """The mapped demo (mapped once per test run) cut to PATIENTS patients (seeded) and everything without a
    patient."""
    mapped = demo_mapped[0]
    lines = (mapped / "MimicPatient.ndjson").read_bytes().splitlines()
    patients = sorted(orjson.loads(x)["id"] for x in lines)
    chosen = set(random.Random(13).sample(patients, PATIENTS))
    kept = []
    for path in sorted(mapped.glob("*.ndjson")):
        for line in path.read_bytes().splitlines():
            resource = orjson.loads(line)
            if _subject(resource) in chosen or _subject(resource) is None:
                kept.append(resource)
    folder = tmp_path_factory.mktemp("asof-subset")
    (folder / "subset.ndjson").write_bytes(b"\n".join(orjson.dumps(r) for r in kept) + b"\n")
    return folder, kept, chosen


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def demo_store(request, demo_ndjson, tmp_path_factory):
    """(store, {patient id: (first, last) clinical instant in µs}) on each backend."""
    from sqlalchemy import create_engine, text

    from rounds.migrate import upgrade
    from services.fhir_api.store import open_store

    folder, kept, chosen = demo_ndjson
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('asof-db') / 'demo.sqlite'}"
    else:
        server = request.getfixturevalue("postgres_server")
        admin = create_engine(server, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text("DROP DATABASE IF EXISTS asof_property WITH (FORCE)"))
            conn.execute(text("CREATE DATABASE asof_property"))
        admin.dispose()
        url = f"{server.rpartition('/')[0]}/asof_property"
    upgrade(url)
    report = load_ndjson(url, folder, workers=2)
    assert report.errors == 0 and report.resources == len(kept)
    spans: dict[str, list[int]] = {}
    for r in kept:
        pid = _subject(r)
        when = r.get("effectiveDateTime") or r.get("authoredOn") or (r.get("period") or {}).get("start")
        if pid in chosen and isinstance(when, str):
            low = date_range(when)[0]
            span = spans.setdefault(pid, [low, low])
            span[0], span[1] = min(span[0], low), max(span[1], low)
    store = open_store(url)
    yield store, spans
    store.engine.dispose()
