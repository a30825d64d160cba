"""`build_trajectory`: a session's events, in log order, read into its Trajectory (trajectory.py) — the one
place the log's payloads become the types every reader shares (docs/contracts.md, "Events of one session, in
order"). EHR calls, tool calls and CDS exchanges belong to the turn whose doctor message precedes them (a
tool call or CDS exchange naming its turn goes there).

Each payload is read by its own class (events/payloads), so a field is spelt once, on the payload.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from contracts.trajectory import (
    WRITE_METHODS,
    CdsCall,
    EhrCall,
    ToolEvent,
    Trajectory,
    TrajectoryTurn,
    Utterance,
)
from events.payloads import (
    CdsExchange,
    Communication,
    EhrRequest,
    EhrResponse,
    SessionEnded,
    SessionStarted,
    ToolCall,
    ToolResult,
    session_ended_v1_to_v2,
)
from events.payloads.messages import FULL_CHECK, MESSAGE_PREFIX


class LoggedEvent(NamedTuple):
    """What a reader keeps of an event: its type, payload (JSON as published) and time."""

    type: str
    data: dict[str, Any]
    time: str | None = None


M = TypeVar("M", bound=BaseModel)


class UnreadableEvent(ValueError):
    """An event whose payload its class does not accept: the log is not one Rounds wrote."""


def _read(model: type[M], data: dict[str, Any], position: int) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        why = exc.errors()[0]["msg"]
        raise UnreadableEvent(f"event #{position} is not a {model.__name__}: {why}") from None


def _ended(data: dict[str, Any], position: int) -> SessionEnded:
    """A session.ended of either schema version (v1's coarse reasons are read as v2's)."""
    try:
        return SessionEnded.model_validate(data)
    except ValidationError:
        return _read(SessionEnded, session_ended_v1_to_v2(data), position)


def _utterance(message: Communication, position: int, time: str | None,
               stored: Mapping[str, str]) -> tuple[str, Utterance]:
    sender = message.sender_role
    kind = message.kind
    if sender == "assistant":
        recipients = {r.identifier.value for r in message.recipient}
        kind = kind or ("question" if "patient" in recipients else "answer")
        kind = "answer" if kind not in ("question", "clarification") else kind
    elif sender == "patient":
        kind = "patient"
    else:
        kind = "clarification" if kind == "clarification" else "doctor"
    whole = stored.get(ref) if (ref := message.stored_text) else None
    return kind, Utterance(kind, message.text, position, message.id, time, tuple(message.disclosed_facts),
                           sender, whole)


def _given(response: EhrResponse, stored: Mapping[str, str]) -> tuple[str, ...] | None:
    """"Type/id" of the resources a response returned: inline, or the stored list it names (None: not
    recorded, or a stored list this database does not hold)."""
    if response.resources is not None:
        return tuple(f"{r.resource_type}/{r.id}" for r in response.resources)
    text = stored.get(response.resources_ref or "")
    if text is None:
        return None
    return tuple(f"{r.get('resourceType')}/{r.get('id')}" for r in orjson.loads(text) if isinstance(r, dict))


def _text(payload: EhrRequest | EhrResponse, stored: Mapping[str, str]) -> str | None:
    """A request's or response's body as text: inline, else its stored copy (None: neither held)."""
    body = payload.body
    if body is None:
        return stored.get(payload.body_ref or "")
    return body if isinstance(body, str) else orjson.dumps(body).decode()


def build_trajectory(session_id: str, events: Iterable[LoggedEvent],
                     stored: Mapping[str, str] | None = None) -> Trajectory:
    """The session's trajectory; `stored` (blob reference -> whole text, events/blobs.py) gives the messages
    too large for an event their whole text, and responses their stored resource lists and bodies. Raises
    UnreadableEvent for a payload its class refuses."""
    stored = stored or {}
    log = Trajectory(session_id)
    current: TrajectoryTurn | None = None
    pending: dict[str, tuple[list[EhrCall], EhrCall]] = {}  # request id -> (its list, call without response)

    def turn_at(index: int) -> TrajectoryTurn:
        return log.turns.setdefault(index, TrajectoryTurn(index))

    token = FULL_CHECK.set(False)  # logged messages passed the full FHIR model when they were published
    try:
        for position, (kind, data, time) in enumerate(events):
            if kind == SessionStarted.TYPE:
                log.started, log.started_time = _read(SessionStarted, data, position), time
            elif kind == SessionEnded.TYPE:
                log.ended, log.ended_time = _ended(data, position), time
            elif kind.startswith(MESSAGE_PREFIX):
                message = _read(Communication, data, position)
                what, utterance = _utterance(message, position, time, stored)
                if what == "doctor":
                    index = message.turn if message.turn is not None else max(log.turns, default=-1) + 1
                    current = turn_at(index)
                    current.doctor = utterance
                    continue
                target = turn_at(message.turn) if message.turn is not None else current
                if target is not None:
                    target.messages.append(utterance)
            elif kind == EhrRequest.TYPE:
                request = _read(EhrRequest, data, position)
                sent = _text(request, stored) if request.method in WRITE_METHODS else None
                call = EhrCall(request.method, request.url, position, query=request.query, request_body=sent)
                calls = current.ehr if current is not None else log.ehr_before
                calls.append(call)
                pending[request.request_id] = (calls, call)
            elif kind == EhrResponse.TYPE and data.get("requestId") in pending:
                response = _read(EhrResponse, data, position)
                owner, call = pending.pop(response.request_id)
                done = EhrCall(call.method, call.url, call.position, response.status, response.latency_ms,
                               call.query, _given(response, stored), _text(response, stored),
                               call.request_body)
                owner[owner.index(call)] = done
            elif kind == CdsExchange.TYPE:
                exchange = _read(CdsExchange, data, position)
                turn_at(exchange.turn).cds.append(CdsCall(position, exchange))
            elif kind in (ToolCall.TYPE, ToolResult.TYPE):
                tool = _read(ToolCall, data, position) if kind == ToolCall.TYPE else _read(ToolResult, data,
                                                                                         position)
                target = turn_at(tool.turn) if tool.turn is not None else current
                if target is not None:
                    result = tool if isinstance(tool, ToolResult) else None
                    target.tools.append(ToolEvent(kind.rsplit(".", 1)[-1], tool.name,
                                                  result.error if result else None,
                                                  result.latency_ms if result else None))
    finally:
        FULL_CHECK.reset(token)
    return log
