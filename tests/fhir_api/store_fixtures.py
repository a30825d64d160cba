"""The store's fixtures, shared by the store's tests (tests/fhir_api/store) and search's store-level tests
(tests/fhir_api/search): a migrated store on each backend (SQLite file and a fresh PostgreSQL database), and
the mapped MIMIC-IV demo cut to 25 patients loaded once per test session on each (the as-of property tests).
A pytest plugin (tests/conftest.py `pytest_plugins`): no conftest re-exports them."""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest

from foundation.db import checkpoint
from rounds.migrate import upgrade
from services.fhir_api.search.values import date_range
from services.fhir_api.store.sql_store import SqlResourceStore
from tests.shared_inputs import built_once, private_sqlite
from tests.wiring import load_on, store_on


@pytest.fixture
def store(database_url: str) -> SqlResourceStore:
    upgrade(database_url)
    s = store_on(database_url)
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
    patient, cut once per test run."""

    def build(folder: Path) -> None:
        mapped = demo_mapped[0]
        lines = (mapped / "MimicPatient.ndjson").read_bytes().splitlines()
        chosen = sorted(random.Random(13).sample(sorted(orjson.loads(x)["id"] for x in lines), PATIENTS))
        wanted = set(chosen)
        kept = []
        for path in sorted(mapped.glob("*.ndjson")):
            for line in path.read_bytes().splitlines():
                resource = orjson.loads(line)
                if _subject(resource) in wanted or _subject(resource) is None:
                    kept.append(line)
        (folder / "subset.ndjson").write_bytes(b"\n".join(kept) + b"\n")
        (folder / "chosen.json").write_bytes(orjson.dumps(chosen))

    folder = built_once(tmp_path_factory, "asof-subset", build)
    kept = [orjson.loads(line) for line in (folder / "subset.ndjson").read_bytes().splitlines() if line]
    return folder, kept, set(orjson.loads((folder / "chosen.json").read_bytes()))


def loaded_url(request, tmp_path_factory, folder: Path, name: str, resources: int) -> str:
    """A store on the fixture's backend (`request.param`) holding the NDJSON in `folder` (`resources` lines):
    the SQLite one loaded once per test run (each worker writes to its own copy), the PostgreSQL one as
    database `name` on the worker's server."""
    from sqlalchemy import create_engine, text

    def load(url: str) -> None:
        upgrade(url)
        report = load_on(url, folder, workers=2)
        assert report.errors == 0 and report.resources == resources

    if request.param == "sqlite":
        def build(work: Path) -> None:
            load(f"sqlite:///{work / 'demo.sqlite'}")
            checkpoint(work / "demo.sqlite")

        loaded = built_once(tmp_path_factory, f"{name}-sqlite", build)
        return private_sqlite(loaded / "demo.sqlite", tmp_path_factory.mktemp(f"{name}-db"))
    server = request.getfixturevalue("postgres_server")
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        conn.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    url = f"{server.rpartition('/')[0]}/{name}"
    load(url)
    return url


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def demo_store(request, demo_ndjson, tmp_path_factory):
    """(store, {patient id: (first, last) clinical instant in µs}) on each backend (`loaded_url`)."""
    folder, kept, chosen = demo_ndjson
    url = loaded_url(request, tmp_path_factory, folder, "asof_property", len(kept))
    spans: dict[str, list[int]] = {}
    for r in kept:
        pid = _subject(r)
        when = r.get("effectiveDateTime") or r.get("authoredOn") or (r.get("period") or {}).get("start")
        if pid in chosen and isinstance(when, str):
            low = date_range(when)[0]
            span = spans.setdefault(pid, [low, low])
            span[0], span[1] = min(span[0], low), max(span[1], low)
    store = store_on(url)
    yield store, spans
    store.engine.dispose()
