"""The session transcript projection: per session, its ordered entries (messages, EHR calls, tool calls) and
counts — what scorers read instead of re-parsing the log.

Entries are numbered 1..n per session in log order (the log is totally ordered per session key), so a replay
from the beginning reproduces exactly the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Integer,
    PrimaryKeyConstraint,
    Select,
    String,
    Text,
    select,
)
from sqlalchemy.schema import SchemaItem

from events import payloads as p
from events.bus import Record
from events.projections.projection import (
    Projection,
    ProjectionTx,
    bound_values,
    bulk_insert,
    bulk_update,
    in_bound,
)
from events.topics import SESSIONS

ROLES = ("doctor", "patient", "assistant")


def _message(data: dict[str, Any]) -> dict[str, Any]:
    text = "\n".join(part["contentString"] for part in data["payload"])
    return {"role": data["sender"]["identifier"]["value"], "text": text, "ref": data["id"]}


def _ehr_request(data: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "ref": data["requestId"], "method": data["method"], "url": data["url"]}


def _ehr_response(data: dict[str, Any]) -> dict[str, Any]:
    return {"role": "ehr", "ref": data["requestId"], "status": data["status"],
            "latency_ms": data["latencyMs"]}


def _tool_call(data: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "ref": data["callId"], "name": data["name"]}


def _tool_result(data: dict[str, Any]) -> dict[str, Any]:
    return {"role": "tool", "ref": data["callId"], "name": data["name"], "text": data.get("error"),
            "latency_ms": data.get("latencyMs")}


def _lifecycle(data: dict[str, Any]) -> dict[str, Any]:
    return {"role": "system", "text": data.get("reason")}


# event type -> (entry columns from `data`, the session counter it increments)
ENTRY_KINDS: dict[str, tuple[Callable[[dict[str, Any]], dict[str, Any]], str | None]] = {
    p.SessionStarted.TYPE: (_lifecycle, None),
    p.SessionEnded.TYPE: (_lifecycle, None),
    **{p.MESSAGE_TYPES[role]: (_message, "message_count") for role in ROLES},
    p.EhrRequest.TYPE: (_ehr_request, "ehr_request_count"),
    p.EhrResponse.TYPE: (_ehr_response, "ehr_response_count"),
    p.ToolCall.TYPE: (_tool_call, "tool_call_count"),
    p.ToolResult.TYPE: (_tool_result, None),
}
COUNTERS = ("entry_count", "message_count", "ehr_request_count", "ehr_response_count", "tool_call_count")


class TranscriptProjection(Projection):
    name = "transcript"
    topics = (SESSIONS,)
    types = frozenset(ENTRY_KINDS)
    migrated = True  # 0019_projection_tables

    def __init__(self, suffix: str = "", topics: tuple[str, ...] | None = None) -> None:
        super().__init__(suffix, topics)
        self._load: dict[str, Select] = {}  # the batch's session rows, per dialect

    def schema(self) -> dict[str, list[SchemaItem]]:
        return {
            "transcript_sessions": [
                Column("session_id", String(200), primary_key=True),
                Column("status", String(16), nullable=False),  # open | ended
                Column("started_time", String(40)),
                Column("ended_time", String(40)),
                *(Column(name, Integer, nullable=False) for name in COUNTERS),
                Column("last_sequence", BigInteger),
            ],
            "transcript_entries": [
                Column("session_id", String(200), nullable=False),
                Column("position", Integer, nullable=False),
                Column("event_id", String(200), nullable=False),
                Column("event_type", String(200), nullable=False),
                Column("event_time", String(40)),
                Column("sequence", BigInteger),
                Column("role", String(20)),
                Column("ref", String(200)),  # Communication id, EHR request id or tool call id
                Column("text", Text),
                Column("method", String(10)),
                Column("url", Text),
                Column("status", Integer),
                Column("latency_ms", Float),
                Column("name", String(200)),
                PrimaryKeyConstraint("session_id", "position"),
            ],
        }

    @staticmethod
    def session_of(record: Record) -> str:
        return (record.event.subject if record.event else None) or record.key

    def prepare(self, tx: ProjectionTx, records: Sequence[Record]) -> None:
        table = self.tables["transcript_sessions"]
        ids = {self.session_of(r) for r in records}
        dialect = tx.conn.dialect.name
        statement = self._load.get(dialect)
        if statement is None:  # built once per dialect, not per batch
            statement = select(table).where(in_bound(table.c.session_id, dialect, "ids"))
            self._load[dialect] = statement
        result = tx.conn.execute(statement, {"ids": bound_values(dialect, ids)})
        names = list(result.keys())
        loaded = (dict(zip(names, row, strict=True)) for row in result)
        tx.state["sessions"] = {session["session_id"]: session for session in loaded}
        tx.state["existing"] = set(tx.state["sessions"])
        tx.state["touched"] = set()

    def handle(self, tx: ProjectionTx, record: Record) -> None:
        event = record.event
        kind = event.type
        extract, counter = ENTRY_KINDS[kind]
        try:
            columns = extract(event.data)  # validate everything before mutating any state
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{kind} id={event.id}: payload lacks {exc}") from exc
        session_id = self.session_of(record)
        state = tx.state
        sessions = state["sessions"]
        session = sessions.get(session_id)
        if session is None:
            session = sessions[session_id] = _new_session(session_id)
        state["touched"].add(session_id)
        position = session["entry_count"] = session["entry_count"] + 1
        if counter:
            session[counter] += 1
        time, sequence = event.time, event.sequence
        if kind == p.SessionStarted.TYPE:
            session["started_time"] = time
        elif kind == p.SessionEnded.TYPE:
            session["status"], session["ended_time"] = "ended", time
        if sequence is not None:
            last = session["last_sequence"] or 0
            session["last_sequence"] = sequence if sequence > last else last
        tx.insert("transcript_entries", {  # only the kind's own columns: the others stay NULL
            **columns,
            "session_id": session_id,
            "position": position,
            "event_id": event.id,
            "event_type": kind,
            "event_time": time,
            "sequence": sequence,
        })

    def finish(self, tx: ProjectionTx) -> None:
        table = self.tables["transcript_sessions"]
        sessions, existing = tx.state["sessions"], tx.state["existing"]
        touched = [sessions[s] for s in sorted(tx.state["touched"])]
        bulk_insert(tx.conn, table, [row for row in touched if row["session_id"] not in existing])
        old = [row for row in touched if row["session_id"] in existing]
        bulk_update(tx.conn, table, old, key=("session_id",))


def _new_session(session_id: str) -> dict[str, Any]:
    return {"session_id": session_id, "status": "open", "started_time": None, "ended_time": None,
            "last_sequence": None, **dict.fromkeys(COUNTERS, 0)}
