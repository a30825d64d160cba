"""The CloudEvents envelope: required attributes, naming, no PHI in context attributes, size, round trip."""

from __future__ import annotations

import orjson
import pytest

from events.envelope import MAX_EVENT_BYTES, CloudEvent, EventTooLarge, InvalidEvent, is_opaque_id

BASE = {"id": "e-1", "source": "/rounds/tests", "type": "rounds.tool.call", "subject": "sess-abc1"}


def test_round_trip_is_structured_json_without_nulls() -> None:
    event = CloudEvent.build(
        **BASE,
        time="2026-11-30T08:00:00.123Z",
        sequence=3,
        correlationid="sess-abc1",
        traceparent="00-abc",
        data={"a": [1, 2]},
    )
    raw = event.to_bytes()
    obj = orjson.loads(raw)
    assert obj["specversion"] == "1.0" and obj["traceparent"] == "00-abc" and "causationid" not in obj
    assert CloudEvent.from_bytes(raw) == event


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"id": None}, "id"),
        ({"source": None}, "source: Field required"),
        ({"type": None}, "type: Field required"),
        ({"specversion": "0.3"}, "specversion must be '1.0'"),
        ({"time": "yesterday"}, "RFC 3339"),
        ({"time": "2026-11-30T08:00:00"}, "timezone"),
        ({"subject": "10000032"}, "all digits"),  # a MIMIC subject_id / MRN
        ({"subject": "John Smith"}, "opaque id"),
        ({"subject": "john@example.org"}, "opaque id"),
        ({"correlationid": "123456"}, "all digits"),
        ({"sequence": -1}, "sequence"),
        ({"Bad_Name": "x"}, "extension attribute name 'Bad_Name'"),
        ({"averyveryverylongextensionname": "x"}, "1-20 lowercase"),
        ({"traceparent": {"nested": 1}}, "string, integer or boolean"),
        ({"id": "has space"}, "whitespace"),
    ],
)
def test_invalid_envelopes_are_rejected_with_the_reason(change: dict, message: str) -> None:
    attributes = {**BASE, **change}
    attributes = {k: v for k, v in attributes.items() if v is not None}
    with pytest.raises(InvalidEvent, match=message):
        CloudEvent.build(**attributes)


def test_from_bytes_rejects_non_objects_and_bad_json() -> None:
    with pytest.raises(InvalidEvent, match="not valid JSON"):
        CloudEvent.from_bytes(b"{")
    with pytest.raises(InvalidEvent, match="JSON object, got list"):
        CloudEvent.from_bytes(b"[]")
    with pytest.raises(EventTooLarge):
        CloudEvent.from_bytes(b" " * (MAX_EVENT_BYTES + 1))


def test_size_limit_applies_to_the_serialised_event() -> None:
    near = CloudEvent.build(**BASE, data="x" * (MAX_EVENT_BYTES - 400))
    assert len(near.to_bytes()) <= MAX_EVENT_BYTES
    with pytest.raises(EventTooLarge, match=f"limit {MAX_EVENT_BYTES}"):
        CloudEvent.build(**BASE, data="x" * MAX_EVENT_BYTES).to_bytes()


def test_events_are_immutable() -> None:
    event = CloudEvent.build(**BASE)
    with pytest.raises(ValueError):
        event.subject = "sess-other"  # type: ignore[misc]
    assert event.model_copy(update={"sequence": 2}).sequence == 2


def test_copies_are_revalidated_and_reserialised() -> None:
    event = CloudEvent.build(**BASE, sequence=1)
    first = event.to_bytes()
    changed = event.model_copy(update={"sequence": 2})
    assert orjson.loads(changed.to_bytes())["sequence"] == 2 and event.to_bytes() == first
    with pytest.raises(InvalidEvent, match="all digits"):
        event.model_copy(update={"subject": "10000032"})


def test_opaque_id_rule_is_exactly_the_documented_one() -> None:
    """The subject rule runs in pydantic-core as one pattern; it accepts exactly: 1-128 chars of
    [A-Za-z0-9._:-], a letter or digit first, not all digits."""
    import random
    import re

    def documented(value: str) -> bool:
        return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}", value)) and not value.isdigit()

    rng = random.Random(5)
    alphabet = "aZ09._:-@ 7"
    samples = ["1", "12a", "1.2", "a", ".a", "-1", "0" * 128, "0" * 127 + "a", "0" * 128 + "a", "a" * 129]
    samples += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(3000)]
    for value in samples:
        try:
            CloudEvent.build(**{**BASE, "subject": value})
            accepted = True
        except InvalidEvent as exc:
            accepted = False
            expected = "all digits" if value.isdigit() else "opaque id"
            assert expected in str(exc), (value, str(exc))
        assert accepted == documented(value), value


def test_to_dict_leaves_out_every_attribute_that_is_none() -> None:
    """to_dict drops the optional attributes that are None (envelope.OPTIONAL_ATTRIBUTES): every other field
    is required and never None, so a field added later must be listed there or made required."""
    from events.envelope import OPTIONAL_ATTRIBUTES

    assert set(CloudEvent.model_fields) - set(OPTIONAL_ATTRIBUTES) == {"id", "source", "specversion", "type"}
    bare = CloudEvent.build(id="e1", source="/s", type="t.x", datacontenttype=None, data=None)
    assert bare.to_dict() == {"id": "e1", "source": "/s", "specversion": "1.0", "type": "t.x"}
    full = {name: "x-1" for name in ("time", "subject", "dataschema", "correlationid", "causationid")}
    event = CloudEvent.build(**{**BASE, **full, "time": "2026-11-30T08:00:00Z"}, traceparent="00-a")
    assert list(event.to_dict())[-1] == "traceparent" and event.to_dict()["causationid"] == "x-1"


@pytest.mark.parametrize("value", ["0", "12345", "12a", "a b", "×", "abc", "a" * 128, "a" * 129, "x\n", "a@b",
                                   "s-1.2:3_4"])
def test_is_opaque_id_says_what_the_subject_field_accepts(value: str) -> None:
    """Checked before an event is built (the interaction recorder): the same answer as the envelope's own."""
    try:
        CloudEvent(id="1", source="/x", type="t.x", subject=value)
        accepted = True
    except (InvalidEvent, ValueError):  # pydantic.ValidationError is a ValueError
        accepted = False
    assert is_opaque_id(value) is accepted
