"""The scorer as a consumer group on rounds.sessions (the exactly-once projection runner).

It buffers each open session's events in its own tables; when `rounds.session.ended` arrives it reads the
sandbox's final state over the FHIR API, scores every turn (scorer.py) and, in the batch's ONE transaction,
replaces that (run, scorer version, session)'s score rows, queues `rounds.score.turn|session` in the outbox
(published to rounds.scores by the relay after commit) and moves the group's positions. A crash anywhere
repeats the batch or nothing: scores are never lost or doubled; a repeated publish has the same event ids.

Tables: `proj_score_sessions`, `proj_score_turns`, `proj_score_versions` are shared by every group (versions
sit beside each other, keyed by run and scorer version); the buffers `proj_scoring_events[_suffix]` and
`proj_scoring_open[_suffix]` belong to one group (a re-score uses a fresh suffix)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import Column, Float, Integer, PrimaryKeyConstraint, String, Text, delete, insert, select
from sqlalchemy.schema import SchemaItem

from events.bus import Record
from events.envelope import CloudEvent
from events.outbox import OutboxEntry
from events.projections.projection import Projection, ProjectionTx, bulk_insert, bulk_update
from events.topics import SCORES, SESSIONS
from services.consumers.report.model import SessionScore
from services.consumers.scoring.events_out import session_event, turn_event
from services.consumers.scoring.fhir_state import SandboxMissing
from services.consumers.scoring.model import FinalState
from services.consumers.scoring.scenarios import scenario_of
from services.consumers.scoring.scorer import SCORER, SCORER_VERSION, Judge, score_session
from services.consumers.scoring.session_log import LoggedEvent, build_log
from services.simulator.data_model.scenario import Scenario

SHARED_TABLES = ("score_sessions", "score_turns", "score_versions")
SESSION_TYPES = frozenset({
    "rounds.session.started", "rounds.session.ended", "rounds.message.doctor", "rounds.message.patient",
    "rounds.message.assistant", "rounds.ehr.request", "rounds.ehr.response", "rounds.tool.call",
    "rounds.tool.result",
})
OUTBOX = OutboxEntry.__table__
StateReader = Callable[[str, Scenario], FinalState]


class ScorerProjection(Projection):
    name = "scorer"
    topics = (SESSIONS,)
    types = SESSION_TYPES

    def __init__(
        self,
        suffix: str = "",
        topics: tuple[str, ...] | None = None,
        *,
        read_state: StateReader | None = None,
        run_id: str | None = None,
        scorer_version: str = SCORER_VERSION,
        scenarios: dict[str, Scenario] | None = None,
        judge: Judge | None = None,
        scores_topic: str = SCORES,
    ) -> None:
        super().__init__(suffix, topics)
        self.read_state, self.run_id, self.version = read_state, run_id, scorer_version
        self.scenarios, self.judge, self.scores_topic = scenarios, judge, scores_topic
        self.scored: list[SessionScore] = []  # this process's results, newest last (for callers and tests)

    def table_name(self, base: str) -> str:
        return f"proj_{base}" if base in SHARED_TABLES else super().table_name(base)

    def schema(self) -> dict[str, list[SchemaItem]]:
        def key() -> list[Column]:
            return [Column("run_id", String(200), nullable=False),
                    Column("scorer_version", String(64), nullable=False),
                    Column("session_id", String(200), nullable=False)]

        return {
            "score_sessions": [
                *key(), Column("scenario", String(200)), Column("trial", Integer),
                Column("language", String(8)),
                Column("variant", String(16)), Column("family", String(100)), Column("difficulty", String(8)),
                Column("persona", String(100)), Column("reason", String(40)), Column("excluded", String(40)),
                Column("score", Float), Column("document", Text, nullable=False),
                PrimaryKeyConstraint("run_id", "scorer_version", "session_id"),
            ],
            "score_turns": [
                *key(), Column("turn", Integer, nullable=False), Column("task_type", String(20)),
                Column("score", Float, nullable=False), Column("checks", Text, nullable=False),
                PrimaryKeyConstraint("run_id", "scorer_version", "session_id", "turn"),
            ],
            "score_versions": [
                Column("run_id", String(200), primary_key=True),
                Column("scorer_version", String(64), primary_key=True),
                Column("first_scored", String(40), nullable=False),
            ],
            "scoring_events": [
                Column("session_id", String(200), nullable=False),
                Column("position", Integer, nullable=False),
                Column("type", String(100), nullable=False), Column("data", Text, nullable=False),
                Column("time", String(40)), PrimaryKeyConstraint("session_id", "position"),
            ],
            "scoring_open": [
                Column("session_id", String(200), primary_key=True),
                Column("status", String(10), nullable=False),  # open | ignored | scored
                Column("next_position", Integer, nullable=False),
            ],
        }

    # -- batch -------------------------------------------------------------------------------------------
    def prepare(self, tx: ProjectionTx, records: Sequence[Record]) -> None:
        table = self.tables["scoring_open"]
        ids = sorted({r.key or r.event.subject for r in records})
        rows = tx.conn.execute(select(table).where(table.c.session_id.in_(ids))).all() if ids else []
        tx.state["open"] = {row.session_id: {"session_id": row.session_id, "status": row.status,
                                             "next_position": row.next_position} for row in rows}
        tx.state["existing"] = set(tx.state["open"])
        tx.state["buffered"] = {}  # session -> [event rows] not yet written

    def handle(self, tx: ProjectionTx, record: Record) -> None:
        event = record.event
        session_id = record.key or event.subject
        sessions = tx.state["open"]
        session = sessions.setdefault(session_id, {"session_id": session_id, "status": "open",
                                                   "next_position": 0})
        if session["status"] != "open":
            return  # another run's session, or events after the end
        data = event.data if isinstance(event.data, dict) else {}
        if self.run_id is not None and event.type in ("rounds.session.started", "rounds.session.ended") \
                and data.get("runId") != self.run_id:
            self._forget(tx, session, "ignored")
            return
        row = {"session_id": session_id, "position": session["next_position"], "type": event.type,
               "data": orjson.dumps(data).decode(), "time": event.time}
        session["next_position"] += 1
        tx.state["buffered"].setdefault(session_id, []).append(row)
        if event.type == "rounds.session.ended":
            self._score(tx, session_id)
            self._forget(tx, session, "scored")

    def finish(self, tx: ProjectionTx) -> None:
        rows = [row for buffered in tx.state["buffered"].values() for row in buffered]
        bulk_insert(tx.conn, self.tables["scoring_events"], rows)
        table, existing = self.tables["scoring_open"], tx.state["existing"]
        touched = sorted(tx.state["open"].values(), key=lambda s: s["session_id"])
        bulk_insert(tx.conn, table, [s for s in touched if s["session_id"] not in existing])
        bulk_update(tx.conn, table, [s for s in touched if s["session_id"] in existing], key=("session_id",))

    # -- scoring -----------------------------------------------------------------------------------------
    def _forget(self, tx: ProjectionTx, session: dict[str, Any], status: str) -> None:
        session["status"] = status
        tx.state["buffered"].pop(session["session_id"], None)
        table = self.tables["scoring_events"]
        tx.conn.execute(delete(table).where(table.c.session_id == session["session_id"]))

    def _events(self, tx: ProjectionTx, session_id: str) -> list[LoggedEvent]:
        table = self.tables["scoring_events"]
        stored = tx.conn.execute(select(table.c.type, table.c.data, table.c.time)
                                 .where(table.c.session_id == session_id).order_by(table.c.position)).all()
        rows = [(t, d, tm) for t, d, tm in stored] + [
            (r["type"], r["data"], r["time"]) for r in tx.state["buffered"].get(session_id, [])]
        return [LoggedEvent(kind, orjson.loads(data), time) for kind, data, time in rows]

    def _score(self, tx: ProjectionTx, session_id: str) -> None:
        log = build_log(session_id, self._events(tx, session_id))
        scenario = scenario_of(log.started, self.scenarios)
        state = None
        if scenario is not None and self.read_state is not None and log.reason not in (
                "infrastructure_error", "patient_error"):
            try:
                state = self.read_state(session_id, scenario)
            except SandboxMissing:
                state = None
        score = score_session(log, scenario, state, self.judge)
        self._store(tx, score)
        self._emit(tx, [*(turn_event(score, t, log, self.version, SCORER) for t in score.turns if t.reached
                          is not False), session_event(score, log, self.version, SCORER)], session_id)
        self.scored.append(score)

    def _store(self, tx: ProjectionTx, score: SessionScore) -> None:
        sessions, turns = self.tables["score_sessions"], self.tables["score_turns"]
        key = {"run_id": score.run, "scorer_version": self.version, "session_id": score.session}
        for table in (sessions, turns):
            tx.conn.execute(delete(table).where(*(table.c[k] == v for k, v in key.items())))
        tx.conn.execute(insert(sessions).values(
            **key, scenario=score.scenario, trial=score.trial, language=score.language, variant=score.variant,
            family=score.family, difficulty=score.difficulty, persona=getattr(score, "persona", None),
            reason=score.reason, excluded=getattr(score, "excluded", None), score=score.score,
            document=score.model_dump_json()))
        rows = [{**key, "turn": t.index, "task_type": t.task_type, "score": t.score,
                 "checks": orjson.dumps([c.model_dump() for c in t.checks]).decode()} for t in score.turns]
        bulk_insert(tx.conn, turns, rows)
        versions = self.tables["score_versions"]
        seen = tx.conn.execute(select(versions.c.run_id).where(
            versions.c.run_id == score.run, versions.c.scorer_version == self.version)).first()
        if seen is None:
            tx.conn.execute(insert(versions).values(run_id=score.run, scorer_version=self.version,
                                                    first_scored=datetime.now(UTC).isoformat()))

    def _emit(self, tx: ProjectionTx, events: list[CloudEvent], key: str) -> None:
        """Queue the events in the outbox in this transaction; an id already queued (same version scored
        again) is the same event and is not queued twice."""
        ids = [e.id for e in events]
        queued = set(tx.conn.execute(select(OUTBOX.c.event_id).where(OUTBOX.c.event_id.in_(ids))).scalars())
        now = datetime.now(UTC)
        rows = [{"event_id": e.id, "topic": self.scores_topic, "key": key, "payload": e.to_bytes(),
                 "created_at": now} for e in events if e.id not in queued]
        if rows:
            tx.conn.execute(insert(OUTBOX), rows)
