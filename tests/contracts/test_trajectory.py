"""The trajectory is built once from the typed payloads: the session's start and end as their classes, its
messages, EHR exchanges, tool and CDS events in the turn they belong to, and an event its class refuses is
an error naming it."""

from __future__ import annotations

import pytest

from contracts.trajectory import CdsCall, ToolEvent
from contracts.trajectory_log import LoggedEvent, UnreadableEvent, build_trajectory
from events.payloads import (
    CdsExchange,
    EhrRequest,
    EhrResponse,
    ResourceVersion,
    SessionEnded,
    SessionStarted,
    ToolCall,
    ToolResult,
    communication,
)


def logged(payload, time: str | None = None) -> LoggedEvent:
    data = payload.to_data()
    kind = payload.event_type if hasattr(payload, "event_type") else payload.TYPE
    return LoggedEvent(kind, data, time)


def session() -> list[LoggedEvent]:
    started = SessionStarted(assistant="baseline", run_id="r1", language="zh", variant="implicit", trial=2,
                             scenario="sc-1")
    return [
        logged(started, "t0"),
        logged(communication("d0", "doctor", ["assistant"], "K?", turn=0)),
        logged(ToolCall(call_id="c1", name="fhir_search", turn=0)),
        logged(EhrRequest(request_id="q1", method="GET", url="Observation", query={"code": ["K"]})),
        logged(EhrResponse(request_id="q1", status=200, latency_ms=3.5,
                           resources=[ResourceVersion(resource_type="Observation", id="o1")])),
        logged(ToolResult(call_id="c1", name="fhir_search", turn=0, error="boom", latency_ms=4.0)),
        logged(CdsExchange(turn=0, service="s", hook="patient-view", hook_instance="h", outcome="cards",
                           cards=[{"indicator": "warning", "summary": "K high"}])),
        logged(communication("a0", "assistant", ["doctor"], "4.1", turn=0, kind="answer")),
        logged(communication("d1", "doctor", ["assistant"], "and now?", turn=1)),
        logged(EhrRequest(request_id="q2", method="POST", url="MedicationRequest")),  # no response logged
        logged(SessionEnded(reason="max_steps", turns=1), "t9"),
    ]


def test_the_session_is_read_into_types_once() -> None:
    log = build_trajectory("s1", session())
    assert isinstance(log.started, SessionStarted) and isinstance(log.ended, SessionEnded)
    assert (log.run_id, log.language, log.variant, log.reason) == ("r1", "zh", "implicit", "max_steps")
    assert (log.started_time, log.ended_time) == ("t0", "t9")
    first, second = log.turns[0], log.turns[1]
    assert first.doctor.text == "K?" and first.answer_text == "4.1" and first.answer_position == 7
    (call,) = first.ehr
    assert (call.method, call.status, call.latency_ms, call.resources, call.query) == (
        "GET", 200, 3.5, ("Observation/o1",), {"code": ["K"]})
    assert first.tools == [ToolEvent("call", "fhir_search"), ToolEvent("result", "fhir_search", "boom", 4.0)]
    assert [c.position for c in first.cds] == [6] and isinstance(first.cds[0], CdsCall)
    assert first.cds[0].exchange.cards[0]["summary"] == "K high"
    assert second.ehr[0].status is None and second.writes() == []  # a write the server never answered


def test_a_version_1_end_is_read_with_its_reason_mapped() -> None:
    events = [*session()[:-1], LoggedEvent(SessionEnded.TYPE, {"reason": "aborted", "turns": 0})]
    assert build_trajectory("s1", events).reason == "infrastructure_error"


def test_a_log_without_start_or_end_is_open_with_defaults() -> None:
    log = build_trajectory("s1", session()[1:-1])
    assert (log.started, log.ended, log.run_id, log.language, log.variant, log.reason) == (
        None, None, "-", "en", "explicit", "open")


@pytest.mark.parametrize(("kind", "data", "model"), [
    (SessionStarted.TYPE, {"runId": "r"}, "SessionStarted"),  # the assistant is required
    (EhrRequest.TYPE, {"requestId": "q", "method": "FETCH", "url": "x"}, "EhrRequest"),
    (ToolCall.TYPE, {"callId": "c", "name": "n", "unknownField": 1}, "ToolCall"),
])
def test_a_payload_its_class_refuses_is_an_error_naming_it(kind: str, data: dict, model: str) -> None:
    events = [logged(communication("d0", "doctor", ["assistant"], "q", turn=0)), LoggedEvent(kind, data)]
    with pytest.raises(UnreadableEvent, match=f"event #1 is not a {model}"):
        build_trajectory("s1", events)
