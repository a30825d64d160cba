"""`rounds run` as a user runs it, and one session's log as `rounds events dump --session` prints it: on the
embedded default (SQLite + SQL log), and against a separate `rounds serve` on PostgreSQL with real Kafka."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from events.catalog import CATALOG
from events.envelope import CloudEvent
from services.simulator.orchestrator.environment import free_port
from tests.fixture_record import load_record
from tests.simulator.conftest import SCENARIOS, assert_session_order

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

REPO = Path(__file__).resolve().parents[2]
SAMPLES = "python:tests.simulator.sample_assistants"


def rounds(env: dict, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "rounds.cli", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def dumped(env: dict, *args: str) -> list[CloudEvent]:
    out = subprocess.run([sys.executable, "-m", "rounds.cli", "events", "dump", "--from-beginning", *args],
                         capture_output=True, env=env, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    return [CloudEvent.from_bytes(line) for line in out.stdout.splitlines() if line.strip()]


def sessions_of_run(env: dict, run_id: str) -> list[str]:
    return [e.subject for e in dumped(env, "--topic", "rounds.sessions")
            if e.type == "rounds.session.started" and CATALOG.payload(e).run_id == run_id]


def test_rounds_run_prints_the_run_and_its_summary_and_resumes(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    load_record(url)
    env = {**os.environ, "ROUNDS_DATABASE_URL": url, "ROUNDS_BUS": "sql"}
    first = rounds(env, "run", "--scenarios", str(SCENARIOS), "--assistant", "baseline", "--language", "both",
                   "--run-id", "cli-run", "--no-score")
    assert "run id: cli-run" in first.stdout and re.search(r"completed\s*│\s*2", first.stdout), first.stdout
    (session, other) = sessions_of_run(env, "cli-run")
    events = dumped(env, "--session", session)
    assert_session_order(events, turns=4)
    assert {e.subject for e in events} == {session}
    again = rounds(env, "run", "--scenarios", str(SCENARIOS), "--assistant", "baseline", "--language", "both",
                   "--run-id", "cli-run", "--no-score")
    assert "0 sessions run, 2 already ended" in again.stdout
    scored = rounds(env, "run", "--scenarios", str(SCENARIOS), "--assistant", "oracle", "--limit", "1")
    assert re.search(r"Avg\s*│\s*1\.000", scored.stdout), scored.stdout


def test_rounds_run_refuses_a_bad_scenario_file_and_an_unknown_assistant(tmp_path):
    env = {**os.environ, "ROUNDS_DATABASE_URL": f"sqlite:///{tmp_path / 'bad.sqlite'}"}
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "x"}\n')
    done = subprocess.run([sys.executable, "-m", "rounds.cli", "run", "--scenarios", str(broken),
                           "--assistant", "baseline"], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=120)
    assert done.returncode != 0 and "broken.jsonl:1" in done.stderr
    done = subprocess.run([sys.executable, "-m", "rounds.cli", "run", "--scenarios", str(SCENARIOS),
                           "--assistant", "gpt-magic"], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=120)
    assert done.returncode != 0 and "unknown assistant 'gpt-magic'" in done.stderr


@pytest.fixture
def served(postgres_url: str, kafka_bootstrap: str, tmp_path) -> Iterator[tuple[dict, str]]:
    """`rounds serve` on PostgreSQL with ROUNDS_BUS=kafka, the fixture record loaded."""
    load_record(postgres_url)
    env = {**os.environ, "ROUNDS_DATABASE_URL": postgres_url, "ROUNDS_BUS": "kafka",
           "ROUNDS_KAFKA_BOOTSTRAP": kafka_bootstrap, "ROUNDS_BASE_URL": ""}
    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "rounds.cli", "serve", "--port", str(port)], env=env,
                            cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{root}/fhir/metadata", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((tmp_path / "serve.log").read_text())
            time.sleep(0.2)
        yield env, root
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_a_run_against_rounds_serve_on_postgresql_and_kafka_logs_each_session_in_order(served):
    env, root = served
    run_id = f"kafka-{os.getpid()}-{time.monotonic_ns()}"
    done = rounds(env, "run", "--scenarios", str(SCENARIOS), "--assistant", f"{SAMPLES}:sync_lookup",
                  "--language", "both", "--fhir-base", f"{root}/fhir", "--run-id", run_id, "--no-score")
    assert re.search(r"completed\s*│\s*2", done.stdout), done.stdout
    for session in sessions_of_run(env, run_id):
        events = dumped(env, "--session", session)
        assert_session_order(events, turns=4)
        kinds = [e.type for e in events]
        # 4 EHR calls (a read the simulator re-sent after a dropped connection is recorded twice)
        methods = [e.data["method"] for e in events if e.type == "rounds.ehr.request"]
        assert methods.count("PUT") == 1 and len(methods) >= 4 and kinds.count("rounds.message.patient") == 1
        assert events[0].data["fhirBase"].startswith(root)
