"""The catalog: every type builds, validates and routes; bad payloads are refused; old versions are upcast."""

from __future__ import annotations

import orjson
import pytest
from pydantic import BaseModel

from events import payloads as p
from events.bus import Record
from events.catalog import CATALOG, Catalog, EventSpec, UnknownEventType, make_event, route
from events.envelope import CloudEvent, InvalidEvent
from events.topics import DEADLETTER, FHIR_CHANGES, SCORES, SESSIONS

SESSION = "sess-cat01"
MESSAGE = {
    role: p.communication(f"m-{role}", role, ["doctor" if role != "doctor" else "assistant"], "hi")
    for role in ("doctor", "patient", "assistant")
}
CHANGE = p.FhirResourceChange(resource_type="Observation", id="obs-1", version_id="2")
RECORD = Record("rounds.sessions", 1, 7, SESSION, None, b"\xffbad", 0)
SAMPLES: dict[str, BaseModel] = {
    "rounds.session.started": p.SessionStarted(
        assistant="a", patient="Patient/p1", as_of="2150-01-01T00:00:00Z"
    ),
    "rounds.session.ended": p.SessionEnded(reason="timeout", turns=3, duration_ms=10),
    "rounds.message.doctor": MESSAGE["doctor"],
    "rounds.message.patient": MESSAGE["patient"],
    "rounds.message.assistant": MESSAGE["assistant"],
    "rounds.ehr.request": p.EhrRequest(request_id="r", method="POST", url="Observation", body={"a": 1}),
    "rounds.ehr.response": p.EhrResponse(request_id="r", status=201, latency_ms=3),
    "rounds.tool.call": p.ToolCall(call_id="c", name="n"),
    "rounds.tool.result": p.ToolResult(call_id="c", name="n", error="boom"),
    "rounds.model.call": p.ModelCall(outcome="timeout", turn=1, usage={"latency_ms": 300000, "retries": 0}),
    "rounds.cds.exchange": p.CdsExchange(turn=0, service="s", hook="patient-view", hook_instance="h",
                                         outcome="cards", cards=[{"summary": "x", "indicator": "info"}]),
    "rounds.sandbox.state": p.SandboxState(writes=[{"resource_type": "MedicationRequest", "id": "m1",
                                                    "version_id": 2, "resource": {"status": "active"}}]),
    "rounds.score.turn": p.ScoreTurn(scorer="s", metric="m", value=0.5, message_id="m-assistant", turn=2),
    "rounds.score.session": p.ScoreSession(scorer="s", metrics={"m": 0.5}, passed=True),
    "rounds.score.judge": p.JudgeCall(model="m", prompt_version="judge-v1", turn=0, item="llm_judge",
                                     passed=True, reason="same value", latency_ms=12.5),
    "rounds.fhir.resource.created": CHANGE,
    "rounds.fhir.resource.updated": CHANGE,
    "rounds.fhir.resource.deleted": CHANGE,
    "rounds.fhir.resource.known": p.FhirResourceKnown(resource_type="Observation", id="obs-1", version_id="2",
                                                      known_at="2150-01-01T00:00:00Z"),
    "rounds.event.deadlettered": p.DeadLetter.of(RECORD, "g1", "not valid JSON"),
}
TOPIC = {"rounds.score": SCORES, "rounds.fhir.": FHIR_CHANGES, "rounds.event.": DEADLETTER}


def sample_event(type_: str) -> CloudEvent:
    unbound = type_.startswith(("rounds.fhir.", "rounds.event.")) and type_ != "rounds.fhir.resource.known"
    subject = None if unbound else SESSION
    return make_event(type_, SAMPLES[type_], source="/rounds/tests", subject=subject)


def test_every_catalogued_type_has_a_sample() -> None:
    assert {spec.type for spec in CATALOG} == set(SAMPLES)


@pytest.mark.parametrize("type_", sorted(SAMPLES))
def test_every_type_builds_validates_routes_and_decodes(type_: str) -> None:
    event = sample_event(type_)
    assert event.dataschema == f"https://rounds.dev/schemas/events/{type_}/v{CATALOG.spec(type_).version}.json"
    topic, key = route(event)
    assert topic == next((t for prefix, t in TOPIC.items() if type_.startswith(prefix)), SESSIONS)
    expected_key = {FHIR_CHANGES: "Observation/obs-1", DEADLETTER: SESSION}.get(topic, SESSION)
    if type_ == "rounds.fhir.resource.known":
        expected_key = SESSION  # a session's feed is keyed by the session: one partition, in order
    assert key == expected_key
    assert CATALOG.decode(event.to_bytes()) == event
    assert CATALOG.payload(event) == type(SAMPLES[type_]).model_validate(event.data)


def test_payloads_use_camel_case_json() -> None:
    data = sample_event("rounds.ehr.response").data
    assert data == {"requestId": "r", "status": 201, "latencyMs": 3.0}


def test_unknown_type_and_bad_payloads_are_refused() -> None:
    with pytest.raises(UnknownEventType, match="rounds.nope"):
        make_event("rounds.nope", {}, source="/t", subject=SESSION)
    with pytest.raises(InvalidEvent, match="subject .* is required"):
        make_event("rounds.tool.call", SAMPLES["rounds.tool.call"], source="/t")
    with pytest.raises(InvalidEvent, match="invalid data: status"):
        make_event(
            "rounds.ehr.response",
            {"requestId": "r", "status": 99, "latencyMs": 1},
            source="/t",
            subject=SESSION,
        )
    with pytest.raises(InvalidEvent, match="extra_forbidden|Extra inputs"):
        make_event("rounds.tool.call", {"callId": "c", "name": "n", "typo": 1}, source="/t", subject=SESSION)
    with pytest.raises(InvalidEvent, match="must be sent by the doctor"):
        make_event("rounds.message.doctor", MESSAGE["patient"], source="/t", subject=SESSION)
    with pytest.raises(InvalidEvent, match="either output or error"):
        make_event(
            "rounds.tool.result",
            {"callId": "c", "name": "n", "output": 1, "error": "e"},
            source="/t",
            subject=SESSION,
        )
    wrong_schema = sample_event("rounds.tool.call").model_copy(update={"dataschema": "https://x/v1.json"})
    with pytest.raises(InvalidEvent, match="dataschema"):
        CATALOG.validate(wrong_schema)


def test_messages_are_fhir_communications() -> None:
    msg = p.communication("a2", "assistant", ["doctor"], "K 4.1", language="en-GB", in_response_to=["q1"])
    assert msg.sender_role == "assistant" and msg.text == "K 4.1"
    assert msg.to_data()["inResponseTo"] == [{"reference": "Communication/q1"}]
    bad = msg.to_data()
    for broken, reason in [
        ({**bad, "sender": {**bad["sender"], "type": "Patient"}}, "role 'assistant' is a Device"),
        ({**bad, "payload": []}, "payload"),
        ({**bad, "language": "English"}, "language"),
        ({**bad, "resourceType": "Observation"}, "resourceType"),
        ({**bad, "sent": "not a date"}, "sent"),
    ]:
        with pytest.raises(InvalidEvent, match=reason):
            make_event("rounds.message.assistant", broken, source="/t", subject=SESSION)


def test_the_full_fhir_model_runs_at_publish_and_the_subset_on_read() -> None:
    """An element R4B's Communication does not define: refused when published; the log's reader, whose
    events all passed that check when published, runs the Rounds subset only (and still refuses a bad one)."""
    data = {**MESSAGE["assistant"].to_data(), "notAnElement": 1}
    with pytest.raises(InvalidEvent, match="not a valid FHIR R4 Communication"):
        make_event("rounds.message.assistant", data, source="/t", subject=SESSION)
    envelope = make_event("rounds.message.assistant", MESSAGE["assistant"], source="/t",
                          subject=SESSION).to_dict()
    assert CATALOG.decode(orjson.dumps(envelope)) is not None
    event = CATALOG.decode(orjson.dumps({**envelope, "data": data}))
    assert event is not None and event.data["notAnElement"] == 1
    assert CATALOG.decode(orjson.dumps({**envelope, "data": {**data, "payload": []}})) is None
    with pytest.raises(InvalidEvent, match="not a valid FHIR R4 Communication"):  # the reader left it on
        make_event("rounds.message.assistant", data, source="/t", subject=SESSION)


def test_dead_letter_keeps_the_record() -> None:
    letter = SAMPLES["rounds.event.deadlettered"]
    assert letter.raw_size == 4 and letter.original_type is None and letter.offset == 7
    assert letter.raw_digest.startswith("sha256:")


class ScoreV1(p.ScoreTurn):
    pass


class ScoreV2(BaseModel):
    scorer: str
    metric: str
    score: float  # renamed from "value": a breaking change
    messageId: str  # noqa: N815
    turn: int


def _rename_value(data: dict) -> dict:
    data = dict(data)
    data["score"] = data.pop("value")
    return data


def test_old_versions_are_upcast_on_read_and_refused_on_publish() -> None:
    v1 = Catalog([EventSpec("rounds.score.turn", {1: ScoreV1}, SCORES)])
    old = v1.make("rounds.score.turn", SAMPLES["rounds.score.turn"], source="/t", subject=SESSION)
    v2 = Catalog(
        [EventSpec("rounds.score.turn", {1: ScoreV1, 2: ScoreV2}, SCORES, upcasters={1: _rename_value})]
    )
    current = v2.decode(old.to_bytes())
    assert current.dataschema.endswith("/rounds.score.turn/v2.json")
    assert current.data["score"] == 0.5 and "value" not in current.data
    assert current.id == old.id
    with pytest.raises(InvalidEvent, match="publish the current schema v2"):
        v2.validate(old)
    v2.validate(old, allow_old=True)  # `rounds events load` of an old export
    newer = old.model_copy(update={"dataschema": old.dataschema.replace("/v1.", "/v3.")})
    assert v2.decode(newer.to_bytes()) is None
    with pytest.raises(ValueError, match="no upcaster"):
        Catalog([EventSpec("rounds.score.turn", {1: ScoreV1, 2: ScoreV2}, SCORES)])
    # An old record whose payload the upcaster cannot read is a bad record (dead-lettered), not a crash.
    broken = {**old.to_dict(), "data": {k: v for k, v in old.to_dict()["data"].items() if k != "value"}}
    assert v2.decode(orjson.dumps(broken)) is None
    with pytest.raises(InvalidEvent, match="cannot upcast data from v1 to v2: KeyError"):
        v2.upgrade(CloudEvent.from_bytes(orjson.dumps(broken)))


def test_decode_never_raises() -> None:
    for raw in [b"", b"null", b"{}", b'{"id":"1","source":"/s","type":"rounds.tool.call"}', b"\xff"]:
        assert CATALOG.decode(raw) is None


def test_session_ended_v1_reasons_upcast_so_that_no_old_failure_is_charged_to_the_assistant() -> None:
    old = CloudEvent.build(
        id="old-1", source="/rounds/tests", type="rounds.session.ended", subject=SESSION,
        dataschema="https://rounds.dev/schemas/events/rounds.session.ended/v1.json",
        data={"reason": "aborted", "turns": 2},
    )
    current = CATALOG.decode(old.to_bytes())
    assert current.dataschema.endswith("/rounds.session.ended/v2.json")
    assert current.data["reason"] == "infrastructure_error"
    assert CATALOG.payload(current).reason == "infrastructure_error"
