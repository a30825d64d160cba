"""`rounds score --group NAME`: a member started elsewhere with `--join` (its own process, as on another
machine) and the reporting process form one consumer group; the scores equal one member's."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import inspect

from services.consumers.scoring.api import score_run
from services.consumers.scoring.members import group_suffix
from services.consumers.scoring.projection import ScorerProjection
from tests.consumers.scoring import world
from tests.consumers.scoring.conftest import World
from tests.wiring import root_on

RUN = "run-group"
REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow  # a member in its own process


def _documents(report) -> dict[str, dict]:
    return {s.session: s.model_dump(exclude={"scorer_version"}) for s in report.sessions}


def test_a_member_joined_from_another_process_scores_like_one(scoring_world: World) -> None:
    w = scoring_world
    sessions = 6
    for trial in range(sessions):
        session = w.session().start(w.scenario, RUN, trial=trial)
        world.play(session, w.scenario, ("oracle", "wrong_dose", "nothing")[trial % 3])
        session.end("completed", run=RUN)
    one = score_run(root_on(w.settings), RUN, scorer_version="one", topics=(w.sessions,),
                    scores_topic=w.scores)
    joined = subprocess.Popen(
        [sys.executable, "-m", "rounds.cli", "score", "--run", RUN, "--group", "g43", "--join", "--topic",
         w.sessions, "--scores-topic", w.scores, "--scorer-version", "grouped", "--database-url",
         w.settings.database_url],
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        grouped = score_run(root_on(w.settings), RUN, scorer_version="grouped", topics=(w.sessions,),
                            scores_topic=w.scores, group="g43")
        output = joined.communicate(timeout=300)[0].decode()
    finally:
        joined.kill()
    assert joined.returncode == 0, output
    assert one.metrics.sessions == sessions
    assert _documents(grouped) == _documents(one)
    assert grouped.metrics.model_dump() == one.metrics.model_dump()


def test_a_group_name_must_fit_a_table_name() -> None:
    assert group_suffix("nightly_2026") == "g_nightly_2026"
    for bad in ("", "a-b", "x" * 41, "a;drop"):
        with pytest.raises(ValueError):
            group_suffix(bad)


def test_a_member_outlived_by_its_group_leaves_cleanly(scoring_world: World,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The reporting process drops the group's buffers once it has reported; a member (another machine's)
    whose next statement then fails leaves without an error, and any other database error still raises."""
    from sqlalchemy import select, text
    from sqlalchemy.exc import DBAPIError

    from events.projections.runner import ProjectionRunner
    from foundation.db import make_engine
    from services.consumers.scoring import members

    w = scoring_world
    spec = members.MemberSpec(w.settings, RUN, "late", group_suffix("late43"), None, (w.sessions,), w.scores,
                              engine_factory=make_engine)
    engine = make_engine(w.settings.database_url)
    ScorerProjection(spec.suffix).create_tables(engine)  # the reporting process started the group

    def finished_elsewhere(self: ProjectionRunner, **_: object) -> None:
        for base in ("scoring_events", "scoring_open"):  # what the reporting process does at its end
            self.projection.tables[base].drop(self.engine)
        assert members.group_ended(self.engine, self.projection)
        with self.engine.begin() as conn:  # the member's next statement
            conn.execute(select(self.projection.tables["scoring_events"]))

    monkeypatch.setattr(ProjectionRunner, "run", finished_elsewhere)
    members.run_member(spec)

    def broken(self: ProjectionRunner, **_: object) -> None:
        assert not members.group_ended(self.engine, self.projection)
        with self.engine.begin() as conn:
            conn.execute(text("SELECT * FROM no_such_table_43"))

    ScorerProjection(spec.suffix).create_tables(engine)
    monkeypatch.setattr(ProjectionRunner, "run", broken)
    with pytest.raises(DBAPIError):
        members.run_member(spec)
    engine.dispose()


def test_a_member_waits_for_the_reporting_process_to_make_the_groups_tables(
        scoring_world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the process that starts a group makes its tables (two processes making them race on every
    CREATE): a member started first waits for them and makes none, one started after the group finished
    leaves, and one whose group never starts says so once its wait is over."""
    from events.projections.runner import ProjectionRunner
    from foundation.db import make_engine
    from services.consumers.scoring import members

    w = scoring_world
    spec = members.MemberSpec(w.settings, RUN, "early", group_suffix("early43"), None, (w.sessions,),
                              w.scores, engine_factory=make_engine, join_wait_s=60)
    engine = make_engine(w.settings.database_url)
    reporting = ScorerProjection(spec.suffix)
    names = [table.name for table in reporting.tables.values() if spec.suffix in table.name]
    assert names
    ran_with: list[set[str]] = []

    def run(self: ProjectionRunner, **_: object) -> None:
        ran_with.append({n for n in names if inspect(self.engine).has_table(n)})

    monkeypatch.setattr(ProjectionRunner, "run", run)
    failed: list[BaseException] = []
    member = threading.Thread(target=lambda: _catching(failed, members.run_member, spec))
    member.start()
    time.sleep(2.0)  # the member is waiting: it has made nothing
    assert member.is_alive() and not ran_with
    assert not any(inspect(engine).has_table(n) for n in names)
    reporting.create_tables(engine)
    member.join(timeout=60)
    assert not member.is_alive() and not failed, failed
    assert ran_with == [set(names)]

    from sqlalchemy import insert

    from events.projections.tracking import POSITIONS

    for table in reporting.tables.values():  # the group applied the log and reported: its buffers are gone
        if spec.suffix in table.name:
            table.drop(engine)
    with engine.begin() as conn:  # ... and it recorded where it got to
        conn.execute(insert(POSITIONS), [{"group_id": spec.group_id, "topic": w.sessions, "partition": 0,
                                          "next_offset": 1}])
    members.run_member(spec)  # come too late: leaves at once, without waiting and without making anything
    assert ran_with == [set(names)] and not any(inspect(engine).has_table(n) for n in names)

    never = members.MemberSpec(w.settings, RUN, "never", group_suffix("never43"), None, (w.sessions,),
                               w.scores, engine_factory=make_engine, join_wait_s=1)
    with pytest.raises(TimeoutError, match="scorer.rescore.g_never43"):
        members.run_member(never)
    assert not any(inspect(engine).has_table(n.replace("early43", "never43")) for n in names)
    engine.dispose()


def _catching(failed: list[BaseException], work, *args: object) -> None:
    try:
        work(*args)
    except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
        failed.append(exc)
