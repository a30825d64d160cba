"""Shared fixtures: the real Kafka broker and PostgreSQL, started once per test session by the repo's scripts.

With CI=true a service that fails to start fails the tests that need it (with its log); elsewhere a missing
Java/Maven/apt skips them with the reason. Under pytest-xdist each worker starts its own broker and server (on
free ports), so workers never see each other's topics or databases.

The fast lane is `pytest -m "not slow"`: every test that needs Kafka, PostgreSQL or the browser is marked slow
here at collection (by the fixtures it names, or a backend parameter such as `database_url[postgres]`), as is
every test of a whole record (HEAVY_FIXTURES); modules of whole pipelines mark themselves (`pytestmark`). A
service fixture asked for in the fast lane fails, naming the test to mark, instead of starting a service.
"""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from sqlalchemy import create_engine, text

from tests import scheduling
from tests.shared_inputs import built_once

# Fixture modules shared by several folders, registered once here (a root conftest is the only place
# pytest reads `pytest_plugins`): the fixture record's store, the FHIR store on each backend.
pytest_plugins = ["tests.fixture_record", "tests.fhir_api.store_fixtures"]

# Bytecode caches on, whatever the environment says (PYTHONDONTWRITEBYTECODE=1 on this project's machines):
# without them each xdist worker, and each `rounds` child process a test starts, rewrites the asserts of
# ~500 test modules or compiles the project from source again, every run (~5 s of CPU a worker).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# The cycle collector, tuned for a test worker: session fixtures hold large, long-lived heaps (the demo's
# builds, parsed NDJSON, the loaded apps), and every full collection walked all of them again (the figures:
# benchmarks/README.md). Rarer young collections, and each session fixture, once made, moved out of the
# collector's reach (gc.freeze, after collecting the young generations so little garbage goes with it).
gc.set_threshold(50_000, 20, 20)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):
    yield
    if fixturedef.scope == "session":
        gc.collect(1)
        gc.freeze()


REPO = Path(__file__).resolve().parent.parent
# ../shared/data beside the checkout; a git worktree one level deeper finds it one level up; or set the path.
SHARED_DATA = Path(
    os.environ.get("ROUNDS_SHARED_DATA")
    or next(
        (p for p in (REPO.parent / "shared" / "data", REPO.parent.parent / "shared" / "data") if p.exists()),
        REPO.parent / "shared" / "data",
    )
)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
SERVICE_FIXTURES = frozenset(
    {"kafka_service", "kafka_bootstrap", "postgres_server", "postgres_url", "empty_postgres_url", "chromium"})
SERVICE_PARAMS = ("postgres", "kafka")
# Fixtures that map, load or build from a whole record (seconds to minutes of CPU): their tests are slow.
HEAVY_FIXTURES = frozenset({
    "demo_mapped", "demo_run", "demo_raw", "demo_url", "demo_app", "demo_build", "synthetic_url",
    "synthetic_app", "synthetic_build", "csv_record", "record", "fhir_app", "demo_ndjson", "demo_store",
    "demo_loaded", "demo_fhir", "full_demo_url",
})


def _is_slow(item: pytest.Item) -> bool:
    if (SERVICE_FIXTURES | HEAVY_FIXTURES) & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    values = [str(value) for value in callspec.params.values()] if callspec else []
    return any(name in value for value in values for name in SERVICE_PARAMS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(scheduling, "rounds-test-order")  # its hook runs after deselection


def _refuse_in_fast_lane(request: pytest.FixtureRequest, what: str) -> None:
    """A service in the fast lane means a test reached it without the slow mark (through getfixturevalue)."""
    if "not slow" in (request.config.option.markexpr or ""):
        pytest.fail(f"{what} asked for in the fast lane (-m 'not slow') by {request.node.nodeid}: "
                    "mark the test @pytest.mark.slow", pytrace=False)


def _unavailable(what: str, detail: str) -> None:
    if IN_CI:
        pytest.fail(f"{what} did not start (CI=true makes this a failure):\n{detail}", pytrace=False)
    lines = detail.strip().splitlines()
    pytest.skip(f"{what} unavailable: {' | '.join(lines[-6:]) if lines else 'unknown'}")


def _run_script(args: list[str], env: dict[str, str], timeout: int) -> tuple[int, str, str]:
    try:
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired as exc:
        return 124, exc.stdout or "", f"timed out after {timeout}s\n{exc.stderr or ''}"
    return proc.returncode, proc.stdout, proc.stderr


class ServiceHandle:
    """A started service: where to reach it and how to stop/restart it."""

    def __init__(self, script: str, env: dict[str, str], address: str) -> None:
        self.script, self.env, self.address = script, env, address

    def call(self, action: str, timeout: int = 180) -> str:
        code, out, err = _run_script([str(REPO / "scripts" / self.script), action], self.env, timeout)
        if code != 0:
            raise RuntimeError(f"{self.script} {action} failed: {err}")
        return out


@pytest.fixture(scope="session")
def kafka_service(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceHandle]:
    """A real single-node KRaft broker from scripts/kafka.sh (or ROUNDS_TEST_KAFKA_BOOTSTRAP if set)."""
    _refuse_in_fast_lane(request, "Kafka")
    external = os.environ.get("ROUNDS_TEST_KAFKA_BOOTSTRAP")
    if external:
        yield ServiceHandle("kafka.sh", dict(os.environ), external)
        return
    state = tmp_path_factory.mktemp("kafka-state")
    env = {**os.environ, "KAFKA_STATE_DIR": str(state)}
    code, out, err = _run_script([str(REPO / "scripts" / "kafka.sh"), "start"], env, timeout=1200)
    match = re.search(r"BOOTSTRAP=(\S+)", out)
    if code != 0 or not match:
        log = (state / "server.log").read_text()[-4000:] if (state / "server.log").exists() else ""
        _unavailable("Kafka", f"{err}\n{log}")
    handle = ServiceHandle("kafka.sh", env, match.group(1))
    yield handle
    _run_script([str(REPO / "scripts" / "kafka.sh"), "stop"], env, timeout=120)


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_service: ServiceHandle) -> str:
    return kafka_service.address


@pytest.fixture(scope="session")
def postgres_server(request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a real PostgreSQL from scripts/postgres.sh (or ROUNDS_TEST_POSTGRES_URL if set)."""
    _refuse_in_fast_lane(request, "PostgreSQL")
    external = os.environ.get("ROUNDS_TEST_POSTGRES_URL")
    if external:
        yield external
        return
    state = tmp_path_factory.mktemp("pg-state") / "state"
    env = {**os.environ, "PG_STATE_FILE": str(state)}
    code, out, err = _run_script([str(REPO / "scripts" / "postgres.sh"), "start"], env, timeout=900)
    match = re.search(r"DATABASE_URL=(\S+)", out)
    if code != 0 or not match:
        _unavailable("PostgreSQL", err)
    yield match.group(1)
    _run_script([str(REPO / "scripts" / "postgres.sh"), "stop"], env, timeout=120)


@pytest.fixture(scope="session")
def postgres_head(postgres_server: str) -> Iterator[str]:
    """The name of a database this worker migrated to head once, the template of `postgres_url`'s."""
    from rounds.migrate import upgrade

    name = f"head_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    upgrade(f"{postgres_server.rpartition('/')[0]}/{name}")  # its engine is disposed: a template has no users
    yield name
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _database(postgres_server: str, template: str | None) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")))
    base, _, _ = postgres_server.rpartition("/")
    yield f"{base}/{name}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def postgres_url(postgres_server: str, postgres_head: str) -> Iterator[str]:
    """A fresh PostgreSQL database for one test (dropped afterwards), already at the migrations' head: a copy
    of `postgres_head` (CREATE DATABASE ... TEMPLATE), so `upgrade()` finds nothing to do instead of
    replaying every revision (~0.4 s a database, and some 200 tests take one)."""
    yield from _database(postgres_server, postgres_head)


@pytest.fixture
def empty_postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database (no schema): for tests of the migrations themselves."""
    yield from _database(postgres_server, None)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'rounds.sqlite'}"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> str:
    """Both storage backends: the embedded SQLite default and real PostgreSQL."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("postgres_url")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (MIMIC-IV demo, FHIR R4 examples): read in place, never copied into the repo."""
    if not SHARED_DATA.exists():
        _unavailable("../shared/data", f"{SHARED_DATA} not found")
    return SHARED_DATA


@pytest.fixture(scope="session")
def demo_mapped(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, int]:
    """The real MIMIC-IV demo mapped once per test run (by the first xdist worker that asks), validating a
    deterministic 1-in-20 sample (the benchmark validates all of it): (NDJSON folder, summary, exit code).
    Read-only: a test that changes files copies them first."""
    from fhir_mapper.pipeline import run_map

    demo = shared_data / "mimic-iv-demo"
    if not (demo / "hosp" / "patients.csv.gz").exists():
        _unavailable("MIMIC-IV demo", f"{demo} not found")

    def build(folder: Path) -> None:
        summary, code = run_map(demo, folder / "fhir", workers=2, validate_stride=20)
        (folder / "run.json").write_bytes(orjson.dumps({"summary": summary, "code": code}))

    root = built_once(tmp_path_factory, "demo-mapped", build)
    run = orjson.loads((root / "run.json").read_bytes())
    return root / "fhir", run["summary"], run["code"]


@pytest.fixture(scope="module")
def full_demo_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A private copy of a store holding the whole real demo (`demo_mapped` loaded once per test run, as
    `rounds demo` maps and loads it): the FHIR-AgentBench shared file and the careful fixtures read it.
    ROUNDS_TEST_FULL_DEMO_STORE=sqlite:///path: a store already holding it (copied, never written)."""
    import shutil

    from foundation.db import checkpoint
    from rounds.migrate import upgrade
    from tests.shared_inputs import private_sqlite
    from tests.wiring import load_on

    given = os.environ.get("ROUNDS_TEST_FULL_DEMO_STORE")
    into = tmp_path_factory.mktemp("full-demo")
    if given:
        target = into / "rounds.sqlite"
        shutil.copyfile(given.removeprefix("sqlite:///"), target)
        return f"sqlite:///{target}"
    folder, _, _ = request.getfixturevalue("demo_mapped")

    def build(work: Path) -> None:
        url = f"sqlite:///{work / 'rounds.sqlite'}"
        upgrade(url)
        assert load_on(url, folder, workers=2).errors == 0
        checkpoint(work / "rounds.sqlite")

    loaded = built_once(tmp_path_factory, "fab-full-demo", build)
    return private_sqlite(loaded / "rounds.sqlite", into)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` is one worker more than the cores: a worker spends about a third of its time waiting on a
    broker, a database, a child process or a timer, and the extra one fills those waits."""
    return len(os.sched_getaffinity(0)) + 1
