"""SIGKILL the scorer service in the middle of a run's log, restart it: its scores equal a clean re-score
(none lost, none doubled) and every score event is published exactly under its id — on the SQL log and on
the real Kafka broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from sqlalchemy import func, select

from events.catalog import CATALOG
from foundation.db import make_engine
from services.consumers.scoring.api import score_run
from services.consumers.scoring.projection import ScorerProjection
from tests.consumers.scoring import world
from tests.consumers.scoring.conftest import World, make_world
from tests.events.projections.helpers import read_all
from tests.wiring import root_on

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

GROUP = "fault.scorer"
RUN = "kill-run"
STYLES = ["oracle", "nothing", "wrong_dose", "leaky"]


def _service(w: World, *extra: str) -> subprocess.Popen:
    s = w.settings
    env = {**os.environ, "ROUNDS_DATABASE_URL": s.database_url, "ROUNDS_BUS": s.bus,
           "ROUNDS_KAFKA_BOOTSTRAP": s.kafka_bootstrap or ""}
    env.pop("ROUNDS_FHIR_BASE", None)
    return subprocess.Popen(
        [sys.executable, "-m", "rounds.cli", "consume", "scorer", "--group", GROUP,
         "--topic", w.sessions, "--scores-topic", w.scores, "--deadletter-topic", f"{w.sessions}.dead",
         "--scorer-version", "live", *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )


def _scored(w: World, version: str) -> dict[str, tuple]:
    table = ScorerProjection().tables["score_sessions"]
    turns = ScorerProjection().tables["score_turns"]
    engine = make_engine(w.settings.database_url)
    try:
        with engine.connect() as conn:
            sessions = {r.session_id: (r.score, r.excluded, r.reason) for r in conn.execute(
                select(table).where(table.c.run_id == RUN, table.c.scorer_version == version))}
            query = select(turns).where(turns.c.run_id == RUN, turns.c.scorer_version == version)
            for r in conn.execute(query):
                sessions[r.session_id] += ((r.turn, r.score, r.checks),)
    except Exception:  # noqa: BLE001 - the service has not created its tables yet
        return {}
    finally:
        engine.dispose()
    return sessions


def _count(w: World) -> int:
    table = ScorerProjection().tables["score_sessions"]
    engine = make_engine(w.settings.database_url)
    try:
        with engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(table).where(table.c.run_id == RUN)).scalar()
    except Exception:  # noqa: BLE001
        return 0
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["sql-sqlite", "sql-postgres", "kafka"])
def test_sigkill_mid_log_then_restart_equals_clean_scores(backend: str,
                                                          request: pytest.FixtureRequest) -> None:
    bootstrap = request.getfixturevalue("kafka_bootstrap") if backend == "kafka" else None
    url = request.getfixturevalue("postgres_url" if backend == "sql-postgres" else "sqlite_url")
    gen = make_world(url, bootstrap)
    w = next(gen)
    started: list[subprocess.Popen] = []
    try:
        sessions = 24
        for trial in range(sessions):
            language = session_language(trial)
            session = w.session().start(w.scenario, RUN, trial=trial, language=language)
            world.play(session, w.scenario, STYLES[trial % len(STYLES)], language)
            session.end("completed" if trial % 7 else "infrastructure_error", run=RUN)
        # A consumer that makes no progress at all (seen on Kafka: kafka-python stuck finding its group
        # coordinator on a busy host) is killed and started again, as a supervisor would; a killed consumer
        # resuming is what this test is about, so the extra kill proves the same thing. Three starts at most.
        for attempt in range(3):
            service = _service(w, "--batch-size", "3")
            started.append(service)
            deadline = time.monotonic() + 90
            while _count(w) < 6 and time.monotonic() < deadline:
                assert service.poll() is None, service.stdout.read().decode()
                time.sleep(0.05)
            if _count(w) >= 6:
                break
            service.kill()
            output = service.communicate()[0].decode()[-3000:]
            if attempt == 2:
                pytest.fail(f"the scorer made no progress in three starts:\n{output}")
        service.send_signal(signal.SIGKILL)
        service.wait(timeout=30)
        killed_at = _count(w)
        assert killed_at < sessions, "the scorer finished before it was killed: the test proves nothing"

        restarted = _service(w, "--batch-size", "50", "--until-caught-up")
        started.append(restarted)
        out, _ = restarted.communicate(timeout=300)
        assert restarted.returncode == 0, out.decode()

        live = _scored(w, "live")
        clean = score_run(root_on(w.settings), RUN, scorer_version="clean", bus=w.bus, topics=(w.sessions,),
                          scores_topic=f"{w.scores}", client=w.client, timeout_s=240)
        assert len(live) == sessions and live == _scored(w, "clean")  # nothing lost, nothing doubled
        assert clean.metrics.excluded_sessions == 4 and clean.metrics.sessions == sessions - 4
        # every score event of the live group reached rounds.scores; repeats carry the same id
        records = read_all(w, w.scores, expected=2 * (sessions + (sessions - 4) * 4), timeout_s=120)
        payloads = [(r.event, CATALOG.payload(r.event)) for r in records]
        ids = {(e.type, p.scorer_version, e.subject, getattr(p, "turn", None)) for e, p in payloads}
        live_ids = {key for key in ids if key[1] == "live"}
        assert len(live_ids) == sessions + (sessions - 4) * 4
        by_id: dict[str, int] = {}
        for r in records:
            by_id[r.event.id] = by_id.get(r.event.id, 0) + 1
        assert len(by_id) == len(ids)  # one id per (version, session, turn): a repeat is the same event
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
        gen.close()


def session_language(trial: int) -> str:
    return "zh" if trial % 5 == 0 else "en"
