"""The scorer as a consumer group on rounds.sessions (the exactly-once projection runner).

It buffers each open session's events in its own tables. For a batch holding `rounds.session.ended`, its
`prefetch` reads the ended sandboxes' final state over the FHIR API OUTSIDE the database transaction (an
unreachable FHIR API is `RetryLater`, never poison) and asks the optional judge the verdicts of the sessions
the batch scores (from the group's buffered events and the batch's); then, in the batch's ONE transaction (no
network call inside), it scores every
turn (scorer.py), replaces that (run, scorer version, session)'s score rows, emits `rounds.score.turn|session`
(the outbox: published if and only if the transaction commits) and the `rounds.sandbox.state` it read, and the
runner moves the group's positions. A crash repeats the batch or nothing: scores are never lost or doubled,
and a repeated publish has the same event ids.

A log loaded where the sandbox does not exist is scored from its `rounds.sandbox.state` (appended after the
session's end by the first scorer that read it; a large one stored in `event_blobs`): the session waits for
it. A session the log holds no state for is scored at the end of a re-score from its replayed writes
(api.py, replay.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
from sqlalchemy import Engine, delete, select
from sqlalchemy.schema import SchemaItem

from contracts.end_reasons import NOT_ASSISTANT_FAULT
from contracts.scenario import Scenario
from contracts.score import SessionScore
from contracts.trajectory import Trajectory
from contracts.trajectory_log import LoggedEvent, build_trajectory
from events import blobs
from events import payloads as p
from events.bus import Record
from events.envelope import CloudEvent
from events.outbox import OUTBOX
from events.projections.projection import (
    Projection,
    ProjectionTx,
    bound_values,
    bulk_insert,
    bulk_update,
    in_bound,
)
from events.projections.retry import RetryLater
from events.topics import SCORES, SESSIONS
from services.consumers.scoring import snapshot, stored_text, tables
from services.consumers.scoring.check_inputs import CheckResult, FinalState
from services.consumers.scoring.fhir_state import SandboxMissing
from services.consumers.scoring.judge import Verdicts
from services.consumers.scoring.one_session import StateOf, score_trajectory
from services.consumers.scoring.scenarios import scenario_of
from services.consumers.scoring.score_rows import Scored, document_digest, scored, store_scores
from services.consumers.scoring.scorer import SCORER_VERSION, judge_requests
from services.consumers.scoring.turn_parts import Judge

ENDED, STARTED, SNAPSHOT = p.SessionEnded.TYPE, p.SessionStarted.TYPE, p.SandboxState.TYPE
SESSION_TYPES = frozenset({
    STARTED, ENDED, SNAPSHOT, *p.MESSAGE_TYPES.values(),
    p.EhrRequest.TYPE, p.EhrResponse.TYPE, p.ToolCall.TYPE, p.ToolResult.TYPE, p.CdsExchange.TYPE,
})
StateReader = Callable[[str, Scenario], FinalState]
MISSING = object()  # prefetched: the sandbox does not exist here
READERS = 8  # sandboxes read (and verdicts asked) at once by a batch's prefetch


def _known(state: FinalState) -> StateOf:
    """The final state the prefetch already holds, as `score_trajectory` asks for it."""
    return lambda _log, _scenario: state


def _recorded_in_batch(records: Sequence[Record]) -> set[str]:
    """Sessions whose `rounds.sandbox.state` follows their `rounds.session.ended` in these records."""
    ended: set[str] = set()
    recorded: set[str] = set()
    for r in records:
        sid = r.key or r.event.subject
        if r.event.type == ENDED:
            ended.add(sid)
        elif r.event.type == SNAPSHOT and sid in ended:
            recorded.add(sid)
    return recorded


@dataclass
class Prefetched:
    """What a batch's prefetch found: final states by session, the judge's verdicts by (session, turn,
    item id), and the sessions it scored (with their rows and events: score_rows.py)."""

    states: dict[str, Any] = field(default_factory=dict)
    verdicts: dict[tuple[str, int, str], CheckResult] = field(default_factory=dict)
    scores: dict[str, Scored] = field(default_factory=dict)


class ScorerProjection(Projection):
    name = "scorer"
    topics = (SESSIONS,)
    types = SESSION_TYPES
    migrated = True  # 0019_projection_tables

    def __init__(
        self,
        suffix: str = "",
        topics: tuple[str, ...] | None = None,
        *,
        read_state: StateReader | None = None,
        engine: Engine | None = None,
        run_id: str | None = None,
        scorer_version: str = SCORER_VERSION,
        scenarios: dict[str, Scenario] | None = None,
        judge: Judge | None = None,
        scores_topic: str = SCORES,
    ) -> None:
        super().__init__(suffix, topics)
        if judge is not None and engine is None:
            raise ValueError("a judge needs the engine: its verdicts are asked before the transaction, from "
                             "the group's buffered events")
        self.read_state, self.engine, self.run_id, self.version = read_state, engine, run_id, scorer_version
        self.scenarios, self.judge, self.scores_topic = scenarios, judge, scores_topic
        self.scored: list[SessionScore] = []  # this process's results, newest last (for callers and tests)
        # the same by the digest of their stored document: load_report takes a stored document it finds here
        # as this score instead of validating it again
        self.documents: dict[bytes, SessionScore] = {}

    def table_name(self, base: str) -> str:
        return f"proj_{base}" if base in tables.SHARED_TABLES else super().table_name(base)

    def schema(self) -> dict[str, list[SchemaItem]]:
        return tables.schema()

    # -- slow I/O, outside the transaction -----------------------------------------------------------------
    def _mine(self, data: dict[str, Any]) -> bool:
        return self.run_id is None or data.get("runId") == self.run_id

    def _started(self, records: Sequence[Record], ended: list[str]) -> dict[str, p.SessionStarted]:
        """session.started of the ended sessions: from the batch, else from this group's buffer."""
        found = {r.key: r.event.data for r in records if r.event.type == STARTED and r.key in ended}
        wanted = [sid for sid in ended if sid not in found]
        if wanted and self.engine is not None:
            table = self.tables["scoring_events"]
            with self.engine.connect() as conn:
                rows = conn.execute(select(table.c.session_id, table.c.data).where(
                    table.c.session_id.in_(wanted), table.c.type == STARTED))
                found.update({sid: orjson.loads(data) for sid, data in rows})
        return {sid: p.SessionStarted.model_validate(data) for sid, data in found.items()}

    def prefetch(self, records: Sequence[Record]) -> Prefetched:
        """The final state of each sandbox whose session ends in this batch (MISSING: not on this server, or
        the batch itself holds the state recorded after the end: the session is then scored from that, as
        first scored, without a read), with a judge its verdicts, then the scores of the sessions the batch
        will score: all slow I/O and the checks' CPU of the batch, done before its transaction opens (so
        the transaction only writes, and members of one group in several processes score at once)."""
        ended = [r.key for r in records if r.event.type == ENDED and self._mine(r.event.data or {})
                 and (r.event.data or {}).get("reason") not in NOT_ASSISTANT_FAULT]
        states: dict[str, Any] = {}
        if ended and self.read_state is not None:
            recorded = _recorded_in_batch(records)
            states = {sid: MISSING for sid in ended if sid in recorded}
            starts = self._started(records, [sid for sid in ended if sid not in recorded])
            jobs = [(sid, scenario) for sid in ended if sid in starts and sid not in recorded
                    and (scenario := scenario_of(starts[sid], self.scenarios)) is not None]
            states |= dict(zip([sid for sid, _ in jobs], self._parallel(lambda job: self._read(*job), jobs),
                              strict=True))
        snapshots: dict[str, CloudEvent] = {}
        for r in records:
            if r.event.type == SNAPSHOT and isinstance(r.event.data, dict):
                snapshots.setdefault(r.key, r.event)
        stored: dict[str, bytes] = {}
        if self.engine is not None and (refs := snapshot.stored_refs(snapshots.values())):
            with self.engine.connect() as conn:
                stored = snapshot.load_stored(conn, refs)
        missing = {sid for sid in ended if states.get(sid) is MISSING}
        waiting = set(snapshots) & (missing | self._waiting(set(snapshots) - missing))
        live = [sid for sid in ended if isinstance(states.get(sid), FinalState)]
        judged = [sid for sid in ended if states.get(sid) is not MISSING] if self.judge is not None else live
        wanted = [*judged, *sorted(waiting - set(judged))]
        logged, stored_texts = self._logged(records, wanted) if self.engine is not None else ({}, {})
        verdicts = self._judge_ahead([build_trajectory(sid, logged[sid], stored_texts) for sid in logged]
                                     ) if self.judge is not None else {}  # the judge reads trajectories
        judge = Verdicts(self.judge, verdicts) if self.judge else None
        scores: dict[str, Scored] = {}
        for sid, state, is_live in [*((sid, states[sid], True) for sid in live),
                                    *((sid, snapshot.from_event(snapshots[sid], stored), False)
                                      for sid in waiting)]:
            if sid in logged and state is not None:
                log, _, score = score_trajectory(sid, logged[sid], stored_texts, _known(state),
                                                 version=self.version, judge=judge, scenarios=self.scenarios)
                scores[sid] = self._scored(log, score, state, is_live)
        return Prefetched(states, verdicts, scores)

    def _scored(self, log: Trajectory, score: SessionScore, state: FinalState | None, live: bool,
                store: snapshot.Store | None = None) -> Scored:
        """Rows and events of a score; a large state read live is stored through `store`, by default (the
        prefetch, outside the transaction) in the engine's blob store, written before its event exists."""
        if store is None and self.engine is not None:
            store = blobs.BlobStore(self.engine).put
        return scored(log, score, state, live=live, version=self.version, scores_topic=self.scores_topic,
                      sessions_topic=self.topics[0], store=store)

    def _parallel(self, work: Callable[[Any], Any], jobs: list) -> list:
        """`work` over `jobs`, READERS at once (they wait on an API, not the CPU)."""
        if len(jobs) <= 1:
            return [work(job) for job in jobs]
        with ThreadPoolExecutor(min(READERS, len(jobs))) as pool:
            return list(pool.map(work, jobs))

    def _judge_ahead(self, logs: list[Trajectory]) -> dict[tuple[str, int, str], CheckResult]:
        """The judge's verdicts for every session this batch scores: those ending in it with a state, and
        those whose `rounds.sandbox.state` arrives in it while they wait (or ended in it without one)."""
        requests = [(item, ctx) for log in logs
                    for item, ctx in judge_requests(log, scenario_of(log.started, self.scenarios))]
        assert self.judge is not None
        results = self._parallel(lambda request: self.judge(*request), requests)  # type: ignore[misc]
        return {(ctx.session.session_id, ctx.log.index, item.id): result
                for (item, ctx), result in zip(requests, results, strict=True)}

    def _waiting(self, sessions: set[str]) -> set[str]:
        if not sessions or self.engine is None:
            return set()
        table = self.tables["scoring_open"]
        with self.engine.connect() as conn:
            return set(conn.execute(select(table.c.session_id).where(
                table.c.session_id.in_(sorted(sessions)), table.c.status == "waiting")).scalars())

    def _logged(self, records: Sequence[Record], sessions: list[str],
                ) -> tuple[dict[str, list[LoggedEvent]], dict[str, str]]:
        """The events the batch's transaction will score these sessions from: the group's buffered events
        (committed by earlier batches), then the batch's own up to the session's end; with the whole texts
        and bodies they refer to (stored_text.py)."""
        if not sessions:
            return {}, {}
        rows: dict[str, list[LoggedEvent]] = {sid: [] for sid in sessions}
        if self.engine is not None:
            table = self.tables["scoring_events"]
            with self.engine.connect() as conn:
                for sid, kind, data, time in conn.execute(
                        select(table.c.session_id, table.c.type, table.c.data, table.c.time)
                        .where(table.c.session_id.in_(sessions))
                        .order_by(table.c.session_id, table.c.position)):
                    rows[sid].append(LoggedEvent(kind, orjson.loads(data), time))
        closed = {sid for sid, logged in rows.items() if any(e.type == ENDED for e in logged)}
        for record in records:
            sid = record.key or record.event.subject
            if sid in rows and sid not in closed and record.event.type != SNAPSHOT:
                data = record.event.data if isinstance(record.event.data, dict) else {}
                rows[sid].append(LoggedEvent(record.event.type, data, record.event.time))
                if record.event.type == ENDED:
                    closed.add(sid)
        stored: dict[str, str] = {}
        if self.engine is not None:
            with self.engine.connect() as conn:
                wanted = {ref for sid in sessions for ref in stored_text.refs(rows[sid])}
                stored = stored_text.load(conn, wanted)
        return rows, stored

    def _read(self, session_id: str, scenario: Scenario) -> FinalState | object:
        try:
            return self.read_state(session_id, scenario)
        except SandboxMissing:
            return MISSING
        except (httpx.TransportError, httpx.HTTPStatusError) as exc:
            raise RetryLater(f"FHIR API unavailable reading session {session_id}: {exc}") from exc

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
        session = tx.state["open"].setdefault(session_id, {"session_id": session_id, "status": "open",
                                                           "next_position": 0})
        data = event.data if isinstance(event.data, dict) else {}
        if event.type == SNAPSHOT:
            if session["status"] == "waiting":
                cached = tx.prefetched.scores.get(session_id) if tx.prefetched else None
                state = None
                if cached is None or cached.live:
                    state = snapshot.from_event(event, snapshot.load_stored(tx.conn,
                                                                            snapshot.stored_refs([event])))
                    if state is None:
                        return  # its stored copy is not in this database: waits on (replayed at the end)
                self._score(tx, session_id, state, live=False)  # the prefetch's score needs no state
                self._forget(tx, session, "scored")
            return
        if session["status"] != "open":
            return  # another run's session, or events after the end
        if event.type in (STARTED, ENDED) and not self._mine(data):
            self._forget(tx, session, "ignored")
            return
        row = {"session_id": session_id, "position": session["next_position"], "type": event.type,
               "data": data, "time": event.time}  # serialised at finish, only if still buffered
        session["next_position"] += 1
        tx.state["buffered"].setdefault(session_id, []).append(row)
        if event.type == ENDED:
            state = tx.prefetched.states.get(session_id) if tx.prefetched else None
            if state is MISSING:
                session["status"] = "waiting"  # until the log's rounds.sandbox.state for it
                return
            self._score(tx, session_id, state, live=True)
            self._forget(tx, session, "scored")

    def finish(self, tx: ProjectionTx) -> None:
        self._flush_scores(tx)
        rows = [{**row, "data": orjson.dumps(row["data"]).decode()}
                for buffered in tx.state["buffered"].values() for row in buffered]
        bulk_insert(tx.conn, self.tables["scoring_events"], rows)
        table, existing = self.tables["scoring_open"], tx.state["existing"]
        touched = sorted(tx.state["open"].values(), key=lambda s: s["session_id"])
        bulk_insert(tx.conn, table, [s for s in touched if s["session_id"] not in existing])
        bulk_update(tx.conn, table, [s for s in touched if s["session_id"] in existing], key=("session_id",))

    # -- scoring -----------------------------------------------------------------------------------------
    def _forget(self, tx: ProjectionTx, session: dict[str, Any], status: str) -> None:
        session["status"] = status
        tx.state["buffered"].pop(session["session_id"], None)
        if session["session_id"] in tx.state["existing"]:  # a session first seen in this batch has no rows
            table = self.tables["scoring_events"]
            tx.conn.execute(delete(table).where(table.c.session_id == session["session_id"]))

    def _events(self, tx: ProjectionTx, session_id: str) -> list[LoggedEvent]:
        """The session's events: those earlier batches buffered (only a session seen before has any), then
        this batch's (their data as decoded from the log: JSON values, the same as a buffered event's)."""
        stored: list[LoggedEvent] = []
        if session_id in tx.state["existing"]:
            table = self.tables["scoring_events"]
            stored = [LoggedEvent(t, orjson.loads(d), tm) for t, d, tm in tx.conn.execute(
                select(table.c.type, table.c.data, table.c.time)
                .where(table.c.session_id == session_id).order_by(table.c.position))]
        return stored + [LoggedEvent(r["type"], r["data"], r["time"])
                         for r in tx.state["buffered"].get(session_id, [])]

    def _score(self, tx: ProjectionTx, session_id: str, state: FinalState | None, live: bool) -> None:
        done = tx.prefetched.scores.get(session_id) if tx.prefetched else None
        if done is None or done.live != live:  # not scored by the prefetch from the same events
            log, state, score = self._score_now(tx, session_id, state, live)
            done = self._scored(log, score, state, live, store=lambda body: blobs.write(tx.conn, body))
        tx.state.setdefault("scores", {})[session_id] = done.rows  # written at finish, one statement a table
        tx.state.setdefault("emits", []).extend((event, session_id, topic) for event, topic in done.emits)
        self.scored.append(done.score)
        self.documents[document_digest(done.rows.session["document"])] = done.score

    def _score_now(self, tx: ProjectionTx, session_id: str, state: FinalState | None, live: bool,
                   ) -> tuple[Trajectory, FinalState | None, SessionScore]:
        events = self._events(tx, session_id)

        def state_of(log: Trajectory, scenario: Scenario | None) -> FinalState | None:
            if state is None and live and scenario is not None and self.read_state is not None \
                    and log.reason not in NOT_ASSISTANT_FAULT:
                found = self._read(session_id, scenario)  # not prefetched (no engine to find its start)
                return None if found is MISSING else found  # type: ignore[return-value]
            return state

        verdicts = tx.prefetched.verdicts if tx.prefetched else {}
        judge = Verdicts(self.judge, verdicts) if self.judge else None
        return score_trajectory(session_id, events, stored_text.load(tx.conn, stored_text.refs(events)),
                                state_of, version=self.version, judge=judge, scenarios=self.scenarios)

    def _flush_scores(self, tx: ProjectionTx) -> None:
        """Write the batch's scores, then emit its events in the transaction (outbox); an id already queued
        (the same version scored again, or the same sandbox state) is the same event: not queued twice."""
        scores = list(tx.state.pop("scores", {}).values())
        if scores:
            store_scores(tx.conn, self.tables, self.version, scores)
        emits = tx.state.pop("emits", [])
        if emits:
            ids = sorted({event.id for event, _, _ in emits})
            queued = set(tx.conn.execute(select(OUTBOX.c.event_id).where(
                in_bound(OUTBOX.c.event_id, tx.conn.dialect.name, "ids")),
                {"ids": bound_values(tx.conn.dialect.name, ids)}).scalars())
            for event, key, topic in emits:
                if event.id not in queued:
                    queued.add(event.id)
                    tx.emit(event, topic=topic, key=key)

