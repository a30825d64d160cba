"""A database that cannot answer the FHIR API's session lookup for a moment (a pool exhausted, "too many
clients", SQLite busy — what a heavily loaded host gives) is a 503 the scorer retries, never "no such
sandbox": taken for a 404, a live scorer parked the session to wait for a `rounds.sandbox.state` that nobody
would write, and lost its score — live scores then differed from a clean re-score (the SIGKILL test's flake
on PostgreSQL under load). Deterministic: the first lookups fail by construction, on both databases."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from psycopg_pool import PoolTimeout
from sqlalchemy.exc import OperationalError

from services.consumers.scoring.api import score_run
from services.fhir_api.store import async_reads, rows, sessions, sql_store
from tests.consumers.scoring import world
from tests.consumers.scoring.conftest import World, make_world
from tests.wiring import root_on

RUN = "busy-db"


@pytest.fixture
def busy_world(database_url: str) -> Iterator[World]:
    yield from make_world(database_url)


class FailingLookups:
    """The next `count` session lookups fail as the database would when it cannot answer."""

    def __init__(self, count: int) -> None:
        self.count = count

    def fail(self) -> None:
        if self.count > 0:
            self.count -= 1
            if self.count % 2:
                raise OperationalError("SELECT session", {}, Exception("sorry, too many clients already"))
            raise PoolTimeout("couldn't get a connection after 30.00 sec")

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_rows_of, real_rows = sessions.rows_of, async_reads.AsyncReader.rows

        def rows_of(conn, stmt, values, **kw):
            if stmt is rows.SESSION:
                self.fail()
            return real_rows_of(conn, stmt, values, **kw)

        async def async_rows(reader, stmt, values):
            if stmt is rows.SESSION:
                self.fail()
            return await real_rows(reader, stmt, values)

        monkeypatch.setattr(sessions, "rows_of", rows_of)
        monkeypatch.setattr(async_reads.AsyncReader, "rows", async_rows)


def test_a_session_lookup_the_database_cannot_answer_is_503_not_404(
    busy_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = busy_world
    session = w.session().start(w.scenario, RUN)
    FailingLookups(2).install(monkeypatch)
    for _ in range(2):
        response = w.client.get(f"/sessions/{session.id}/writes")
        assert response.status_code == 503, response.text
        assert response.json()["issue"][0]["code"] == "transient"
    assert w.client.get(f"/sessions/{session.id}/writes").status_code == 200
    assert w.client.get("/sessions/no-such-session/writes").status_code == 404  # unknown stays 404


def test_the_scorer_retries_a_busy_database_and_scores_every_session(
    busy_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = busy_world
    for trial, style in enumerate(["oracle", "wrong_dose", "leaky"]):
        session = w.session().start(w.scenario, RUN, trial=trial)
        world.play(session, w.scenario, style)
        session.end(run=RUN)
    failing = FailingLookups(3)
    failing.install(monkeypatch)
    # first (no rounds.sandbox.state in the log yet: a parked session would have nothing to be scored from)
    busy = score_run(root_on(w.settings), RUN, scorer_version="busy", bus=w.bus, topics=(w.sessions,),
                     scores_topic=w.scores, client=w.client, timeout_s=120)
    assert failing.count == 0  # the lookups did fail
    assert [getattr(s, "excluded", None) for s in busy.sessions] == [None, None, None]
    assert all(s.score is not None for s in busy.sessions)
    quiet = score_run(root_on(w.settings), RUN, scorer_version="quiet", bus=w.bus, topics=(w.sessions,),
                      scores_topic=w.scores, client=w.client, timeout_s=120)
    scores = lambda report: sorted((s.trial, s.score, [(t.index, t.score) for t in s.turns])  # noqa: E731
                                   for s in report.sessions)
    assert scores(busy) == scores(quiet)


def test_a_server_error_reading_the_sandbox_is_a_retry_not_poison(busy_world: World,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process FHIR API answers a failure as a remote one would (a 500 the scorer retries); raised
    through the in-process transport instead, it made the session's end a poison event: dead-lettered,
    never scored."""
    w = busy_world
    session = w.session().start(w.scenario, RUN)
    world.play(session, w.scenario, "oracle")
    session.end(run=RUN)
    real, failures = sql_store.SqlResourceStore.session_writes, [2]

    def session_writes(store, session_id):
        if failures[0] > 0:
            failures[0] -= 1
            raise OperationalError("SELECT writes", {}, Exception("server closed the connection"))
        return real(store, session_id)

    monkeypatch.setattr(sql_store.SqlResourceStore, "session_writes", session_writes)
    assert w.client.get(f"/sessions/{session.id}/writes").status_code == 500
    report = score_run(root_on(w.settings), RUN, scorer_version="flaky", bus=w.bus, topics=(w.sessions,),
                       scores_topic=w.scores, client=w.client, timeout_s=120)
    assert failures == [0] and [s.score for s in report.sessions] == [1.0]
