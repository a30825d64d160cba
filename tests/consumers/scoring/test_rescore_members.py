"""A re-score split over members in several processes (`rounds score --workers N`): the same scores as one
member, each session scored once, and a member that dies costs time, never scores."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import ExitStack

import pytest
from sqlalchemy import func, select

from foundation.db import make_engine
from rounds.settings import Settings
from services.consumers.scoring import members
from services.consumers.scoring.api import score_run
from services.consumers.scoring.projection import ScorerProjection
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from tests.fixture_record import load_record
from tests.simulator.conftest import SCENARIOS, jobs, read_scenarios
from tests.wiring import bus_on, client_on, migrated, root_on

RUN = "run-members"
pytestmark = pytest.mark.slow  # child processes and a simulated run: the full suite's


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    url = f"sqlite:///{tmp_path_factory.mktemp('members') / 'rounds.sqlite'}"
    load_record(url)
    settings = Settings(database_url=url)
    plan = jobs(read_scenarios(SCENARIOS), trials=3, languages=("en", "zh"))
    summary = asyncio.run(run_scenarios(plan, "baseline", RunOptions(RUN), migrated(settings)))
    assert set(summary.by_reason) == {"completed"}
    return settings


def _documents(report) -> dict[str, dict]:
    return {s.session: s.model_dump(exclude={"scorer_version"}) for s in report.sessions}


def _stored(settings: Settings, version: str) -> tuple[int, int]:
    table = ScorerProjection().tables["score_sessions"]
    engine = make_engine(settings.database_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(func.count(), func.count(func.distinct(table.c.session_id))).where(
                table.c.run_id == RUN, table.c.scorer_version == version)).one()
    finally:
        engine.dispose()
    return rows[0], rows[1]


def test_three_members_score_like_one_and_each_session_once(settings: Settings) -> None:
    one = score_run(root_on(settings), RUN, scorer_version="one", workers=1)
    three = score_run(root_on(settings), RUN, scorer_version="three", workers=3)
    sessions = len(read_scenarios(SCENARIOS)) * 3 * 2
    assert sessions >= 6 and one.metrics.sessions == sessions and one.metrics.excluded_sessions == 0
    assert _documents(three) == _documents(one)
    assert three.metrics.model_dump() == one.metrics.model_dump()
    assert _stored(settings, "three") == (sessions, sessions)


def test_members_in_other_processes_apply_the_log_and_one_that_fails_loses_nothing(settings: Settings,
                                                                                   ) -> None:
    spec = members.MemberSpec(settings, RUN, "split", uuid.uuid4().hex[:8], engine_factory=make_engine)
    broken = members.MemberSpec(settings.model_copy(update={"database_url": "sqlite:////no/such/dir/x.db"}),
                                RUN, "split", spec.suffix, engine_factory=make_engine)
    with ExitStack() as stack:
        engine = make_engine(settings.database_url)
        stack.callback(engine.dispose)
        bus = bus_on(settings)
        stack.callback(bus.close)
        projection = members.projection_of(spec, stack.enter_context(client_on(settings)), engine)
        projection.create_tables(engine)  # what score_run's own member does before the others start
        targets = bus.end_offsets([tp for topic in projection.topics for tp in bus.partitions(topic)])
        failures = members.reap(members.spawn(spec, 2) + members.spawn(broken, 1), timeout_s=300)
        # the log's end when the re-score began (scoring live sandboxes appends their recorded state after it)
        caught_up = members.runner_of(spec, bus, engine, projection).caught_up(targets)
    assert len(failures) == 1 and "exited 1" in failures[0] and "unable to open database" in failures[0]
    assert caught_up and projection.scored == []  # the children applied the whole log, this process nothing
    sessions = len(read_scenarios(SCENARIOS)) * 3 * 2
    assert _stored(settings, "split") == (sessions, sessions)


def test_the_checks_run_before_the_batch_transaction(settings: Settings, monkeypatch) -> None:
    """Members on one SQLite file wait for each other only while writing: a batch's sessions are scored in
    its prefetch, outside the transaction, never in it."""

    def in_transaction(*_args, **_kwargs):
        raise AssertionError("a session was scored inside the batch's transaction")

    monkeypatch.setattr(ScorerProjection, "_score_now", in_transaction)
    report = score_run(root_on(settings), RUN, scorer_version="ahead", workers=1)
    assert report.metrics.sessions == len(read_scenarios(SCENARIOS)) * 3 * 2
    assert report.metrics.excluded_sessions == 0


def test_rounds_score_forks_its_members_and_scores_like_one(settings: Settings) -> None:
    """`rounds score` in a fresh process runs no thread when it starts its members: they are forked from it
    (members.start), and score each session once, as one member does."""
    import json
    import subprocess
    import sys

    one = score_run(root_on(settings), RUN, scorer_version="one-again", workers=1)
    done = subprocess.run([sys.executable, "-m", "rounds.cli", "score", "--run", RUN, "--scorer-version",
                           "forked", "--workers", "3", "--database-url", settings.database_url],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["sessions"] == one.metrics.sessions and summary["avg"] == one.metrics.avg
    sessions = len(read_scenarios(SCENARIOS)) * 3 * 2
    assert _stored(settings, "forked") == (sessions, sessions)
