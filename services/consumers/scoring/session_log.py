"""A session's events, in log order, grouped into physician turns (docs/contracts.md, "Events of one
session, in order"): EHR calls and tool calls belong to the turn whose doctor message precedes them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import orjson

from events.payloads import (
    CdsExchange,
    EhrRequest,
    EhrResponse,
    SessionEnded,
    SessionStarted,
    ToolCall,
    ToolResult,
)
from events.payloads.messages import EXT_DISCLOSED, EXT_KIND, EXT_TURN, MESSAGE_PREFIX
from services.consumers.scoring.check_inputs import EhrCall, SessionLog, TurnLog, Utterance
from services.consumers.scoring.stored_text import ref_of


class LoggedEvent(NamedTuple):
    """What the scorer keeps of an event: its type, payload (JSON as published) and time."""

    type: str
    data: dict[str, Any]
    time: str | None = None


def _extension(data: dict[str, Any], url: str, key: str) -> list[Any]:
    return [e.get(key) for e in data.get("extension") or () if e.get("url") == url]


def _message(data: dict[str, Any], position: int, time: str | None,
             stored: Mapping[str, str]) -> tuple[int | None, str, Utterance]:
    sender = data["sender"]["identifier"]["value"]
    recipients = {r["identifier"]["value"] for r in data.get("recipient") or ()}
    turn = next(iter(_extension(data, EXT_TURN, "valueInteger")), None)
    kind = next(iter(_extension(data, EXT_KIND, "valueCode")), None)
    if sender == "assistant":
        kind = kind or ("question" if "patient" in recipients else "answer")
        kind = "answer" if kind not in ("question", "clarification") else kind
    elif sender == "patient":
        kind = "patient"
    else:
        kind = "clarification" if kind == "clarification" else "doctor"
    parts = [part["contentString"] for part in data.get("payload") or () if "contentString" in part]
    disclosed = tuple(_extension(data, EXT_DISCLOSED, "valueString"))
    whole = stored.get(ref) if (ref := ref_of(data)) else None
    text = "\n".join(parts)
    return turn, kind, Utterance(kind, text, position, data.get("id", ""), time, disclosed, sender, whole)


def _resources(data: dict[str, Any], stored: Mapping[str, str]) -> list[Any] | None:
    """The resources a response returned: inline, or the stored list it names (None: not recorded, or a
    stored list this database does not hold)."""
    if data.get("resources") is not None:
        return data["resources"]
    text = stored.get(data.get("resourcesRef") or "")
    return orjson.loads(text) if text is not None else None


def build_log(session_id: str, events: Iterable[LoggedEvent], stored: Mapping[str, str] | None = None,
              ) -> SessionLog:
    """The session's log; `stored` (blob reference -> whole text, stored_text.py) gives the messages too
    large for an event their whole text and responses their stored resource lists."""
    log = SessionLog(session_id)
    current: TurnLog | None = None
    pending: dict[str, tuple[TurnLog, EhrCall]] = {}  # request id -> (turn, call without response)

    def turn_at(index: int) -> TurnLog:
        return log.turns.setdefault(index, TurnLog(index))

    for position, (kind, data, time) in enumerate(events):
        if kind == SessionStarted.TYPE:
            log.started, log.started_time = data, time
        elif kind == SessionEnded.TYPE:
            log.ended, log.ended_time = data, time
        elif kind.startswith(MESSAGE_PREFIX):
            turn, what, utterance = _message(data, position, time, stored or {})
            if what == "doctor":
                index = turn if turn is not None else (max(log.turns) + 1 if log.turns else 0)
                current = turn_at(index)
                current.doctor = utterance
                continue
            target = turn_at(turn) if turn is not None else current
            if target is not None:
                target.messages.append(utterance)
        elif kind == EhrRequest.TYPE and current is not None:
            call = EhrCall(data["method"], data["url"], position, query=data.get("query") or {})
            current.ehr.append(call)
            pending[data["requestId"]] = (current, call)
        elif kind == EhrResponse.TYPE and data.get("requestId") in pending:
            owner, call = pending.pop(data["requestId"])
            listed = _resources(data, stored or {})
            given = None if listed is None else tuple(
                f"{r.get('resourceType')}/{r.get('id')}" for r in listed if isinstance(r, dict))
            body = data.get("body")
            body = body if isinstance(body, str) else (stored or {}).get(data.get("bodyRef") or "")
            done = EhrCall(call.method, call.url, call.position, data["status"], data.get("latencyMs"),
                           call.query, given, body)
            owner.ehr[owner.ehr.index(call)] = done
        elif kind == CdsExchange.TYPE:
            target = turn_at(data["turn"])
            target.cds.append({**data, "position": position})
        elif kind in (ToolCall.TYPE, ToolResult.TYPE):
            target = turn_at(data["turn"]) if data.get("turn") is not None else current
            if target is not None:
                target.tools.append({"event": kind.rsplit(".", 1)[-1], "name": data.get("name"),
                                     "error": data.get("error"), "latency_ms": data.get("latencyMs")})
    return log
