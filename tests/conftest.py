"""Shared fixtures: the real Kafka broker and PostgreSQL, started once per test session by the repo's scripts.

With CI=true a service that fails to start fails the tests that need it (with its log); elsewhere a missing
Java/Maven/apt skips them with the reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

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


def _unavailable(what: str, detail: str) -> None:
    if IN_CI:
        pytest.fail(f"{what} did not start (CI=true makes this a failure):\n{detail}", pytrace=False)
    pytest.skip(f"{what} unavailable: {detail.strip().splitlines()[-1] if detail.strip() else 'unknown'}")


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
def kafka_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceHandle]:
    """A real single-node KRaft broker from scripts/kafka.sh (or ROUNDS_TEST_KAFKA_BOOTSTRAP if set)."""
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
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a real PostgreSQL from scripts/postgres.sh (or ROUNDS_TEST_POSTGRES_URL if set)."""
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


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test (dropped afterwards)."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    base, _, _ = postgres_server.rpartition("/")
    yield f"{base}/{name}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


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
