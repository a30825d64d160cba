"""The real MIMIC-IV demo mapped and loaded once per test session for the scenario builder, and one build
of it.

To keep the session cost low the fixture maps only the tables the builder reads (patients, admissions,
transfers, diagnoses, labs, microbiology, prescriptions/pharmacy, the MAR) and the lab rows of the items the
vocabulary names (the builder asks the server for those codes only, so the other rows could not change a
session). Everything is read in place from ../shared/data; nothing is copied into the repository."""

from __future__ import annotations

import asyncio
import csv
import gzip
import io
import os
import shutil
from pathlib import Path

import orjson
import pytest

from foundation.db import checkpoint
from services.simulator.scenarios import Build, build_async, output
from services.simulator.scenarios.vocabulary import vocabulary
from tests.shared_inputs import built_once, private_sqlite

TABLES = (
    "patients",
    "admissions",
    "transfers",
    "diagnoses_icd",
    "d_icd_diagnoses",
    "d_labitems",
    "microbiologyevents",
    "prescriptions",
    "pharmacy",
    "emar",  # the MAR (MedicationAdministration): what treatment-response sessions say was given
    "emar_detail",
    "poe",
)
UNUSED = ("MimicSpecimenLab.ndjson", "MimicMedicationDispense.ndjson", "MimicMedicationMix.ndjson")
SEED = 7


def lab_subset(src: Path, dst: Path) -> None:
    wanted = {lab["itemid"] for lab in vocabulary()["labs"].values()}
    with gzip.open(src, "rt", newline="") as fh:
        reader = csv.DictReader(fh)
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=reader.fieldnames, lineterminator="\n")
        writer.writeheader()
        writer.writerows(r for r in reader if r["itemid"] in wanted)
    dst.write_bytes(gzip.compress(buf.getvalue().encode(), compresslevel=1))


def load_mimic(mimic: Path, work: Path) -> str:
    """Map a MIMIC-IV folder with the project's mapper and bulk-load it into a fresh SQLite store."""
    from fhir_mapper.pipeline import run_map
    from rounds.migrate import upgrade
    from tests.wiring import load_on

    out = work / "fhir"
    run_map(mimic, out, workers=2)
    for name in UNUSED:
        (out / name).unlink(missing_ok=True)
    url = f"sqlite:///{work / 'rounds.sqlite'}"
    upgrade(url)
    report = load_on(url, out, workers=2)
    assert report.errors == 0
    return url


@pytest.fixture(scope="session")
def demo_raw(shared_data: Path) -> Path:
    demo = shared_data / "mimic-iv-demo"
    if not (demo / "hosp" / "labevents.csv.gz").exists():
        pytest.skip(f"MIMIC-IV demo not found at {demo}")
    return demo


@pytest.fixture(scope="session")
def demo_loaded(demo_raw: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the demo mapped (`fhir/`) and loaded (`rounds.sqlite`), built once per test run."""

    def build(work: Path) -> None:
        hosp = work / "mimic" / "hosp"
        hosp.mkdir(parents=True)
        for table in TABLES:
            (hosp / f"{table}.csv.gz").symlink_to(demo_raw / "hosp" / f"{table}.csv.gz")
        lab_subset(demo_raw / "hosp" / "labevents.csv.gz", hosp / "labevents.csv.gz")
        load_mimic(work / "mimic", work)
        checkpoint(work / "rounds.sqlite")

    return built_once(tmp_path_factory, "scenario-demo", build)


@pytest.fixture(scope="session")
def demo_fhir(demo_loaded: Path) -> Path:
    """The NDJSON the demo store was loaded from (read-only)."""
    return demo_loaded / "fhir"


@pytest.fixture(scope="session")
def demo_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store holding the mapped demo: each xdist worker writes to its own copy of the one loaded store
    (ROUNDS_TEST_DEMO_STORE: reuse one already loaded, quick reruns, nothing built)."""
    if os.environ.get("ROUNDS_TEST_DEMO_STORE"):
        return os.environ["ROUNDS_TEST_DEMO_STORE"]
    loaded = request.getfixturevalue("demo_loaded")
    return private_sqlite(loaded / "rounds.sqlite", tmp_path_factory.mktemp("scenario-demo"))


def app_for(url: str):
    from rounds.settings import get_settings
    from tests.wiring import app_on

    return app_on(get_settings().model_copy(update={"database_url": url}))


def served(url: str):
    """Rounds' FHIR app over a store, its connections closed after the tests."""
    app = app_for(url)
    yield app
    app.state.store.engine.dispose()


@pytest.fixture(scope="session")
def demo_app(demo_url: str):
    yield from served(demo_url)


@pytest.fixture(scope="session")
def demo_build(demo_app, tmp_path_factory: pytest.TempPathFactory) -> Build:
    """The default build of the demo: 324 multi-turn sessions + 30 tasks per MedAgentBench category (built
    once per test run from the first worker's copy of the store; the build is deterministic)."""

    return scenarios_once(demo_app, tmp_path_factory, "scenario-demo-build", SEED)


def scenarios_once(app, tmp_path_factory: pytest.TempPathFactory, name: str, seed: int) -> Build:
    """The builder's default build over `app`, made by the first worker that asks and read back by the others
    (the build is deterministic: the same store and seed give the same bytes in any process)."""

    def build(folder: Path) -> None:
        built = asyncio.run(build_async(app, seed=seed))
        output.write(folder / "scenarios.jsonl", built.scenarios, built.summary)

    out = built_once(tmp_path_factory, name, build) / "scenarios.jsonl"
    return Build(list(output.read(out)), orjson.loads(output.summary_path(out).read_bytes()))


@pytest.fixture(scope="session")
def synthetic_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`rounds synth --patients 200` data, mapped and loaded once per test run; each worker writes to its own
    copy (ROUNDS_TEST_SYNTH_STORE: reuse one)."""
    from fhir_mapper.synth import generate

    if os.environ.get("ROUNDS_TEST_SYNTH_STORE"):
        return os.environ["ROUNDS_TEST_SYNTH_STORE"]

    def build(work: Path) -> None:
        generate(work / "mimic", 200, seed=5)
        keep = {f"{table}.csv.gz" for table in (*TABLES, "labevents")}
        for path in (work / "mimic" / "hosp").glob("*.csv.gz"):  # as for the demo: what the builder reads
            if path.name not in keep:                              # (and the notes, which the demo has not)
                path.unlink()
        for module in ("icu", "ed"):
            shutil.rmtree(work / "mimic" / module)
        load_mimic(work / "mimic", work)
        checkpoint(work / "rounds.sqlite")

    loaded = built_once(tmp_path_factory, "scenario-synth", build)
    return private_sqlite(loaded / "rounds.sqlite", tmp_path_factory.mktemp("scenario-synth"))


@pytest.fixture(scope="session")
def synthetic_app(synthetic_url: str):
    yield from served(synthetic_url)


@pytest.fixture(scope="session")
def synthetic_build(synthetic_app, tmp_path_factory: pytest.TempPathFactory) -> Build:
    return scenarios_once(synthetic_app, tmp_path_factory, "scenario-synth-build", 11)
