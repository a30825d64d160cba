"""One behavioural suite, every backend: SqlLog on SQLite and PostgreSQL, KafkaBus on the real broker."""

from __future__ import annotations

import time
from collections import defaultdict

import orjson
import pytest

from events import payloads as p
from events.bus import Bus, Consumer, Record, TopicPartition, UnknownTopic
from events.catalog import UnknownEventType, make_event
from events.envelope import CloudEvent, EventTooLarge, InvalidEvent
from events.topics import partition_for
from tests.events.conftest import tool_call

SESSIONS = [f"sess-{i:02d}x" for i in range(8)]


def drain(consumer: Consumer, want: int, timeout_s: float = 30.0) -> list[Record]:
    """Poll until `want` records arrived (or time out)."""
    got: list[Record] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        got.extend(consumer.poll(timeout_s=0.5))
    return got


def publish_stream(bus: Bus, topic: str, per_session: int = 15) -> list[CloudEvent]:
    """Interleaved sessions, partly through publish_many and partly through publish."""
    events = [tool_call(s, n) for n in range(per_session) for s in SESSIONS]
    half = len(events) // 2
    bus.publish_many(topic, [(e.subject, e) for e in events[:half]])
    for e in events[half:]:
        bus.publish(topic, e, e.subject)
    return events


def test_per_key_order_and_every_event_delivered(bus: Bus, new_topic) -> None:
    topic = new_topic(3)
    sent = publish_stream(bus, topic)
    consumer = bus.consumer("g-order", [topic])
    got = drain(consumer, len(sent))
    consumer.close()
    assert sorted(r.event.id for r in got) == sorted(e.id for e in sent)
    by_key: dict[str, list[int]] = defaultdict(list)
    offsets: dict[int, list[int]] = defaultdict(list)
    for r in got:
        assert r.partition == partition_for(r.key, 3), "key must land on Kafka's murmur2 partition"
        assert r.event.subject == r.key
        by_key[r.key].append(r.event.sequence)
        offsets[r.partition].append(r.offset)
    assert all(seqs == list(range(15)) for seqs in by_key.values()), by_key
    for partition, offs in offsets.items():
        assert offs == list(range(len(offs))), f"offsets of partition {partition} are dense and ordered"


def test_publish_returns_positions_and_end_offsets(bus: Bus, new_topic) -> None:
    topic = new_topic(2)
    published = bus.publish_many(topic, [(e.subject, e) for e in (tool_call("sess-aa", i) for i in range(5))])
    one = bus.publish(topic, tool_call("sess-bb", 0), "sess-bb")
    assert [x.offset for x in published] == list(range(5))
    assert {x.partition for x in published} == {partition_for("sess-aa", 2)}
    consumer = bus.consumer("g-ends", [topic])
    ends = consumer.end_offsets(bus.partitions(topic))
    consumer.close()
    expected = {TopicPartition(topic, p): 0 for p in range(2)}
    expected[TopicPartition(topic, published[0].partition)] += 5
    expected[TopicPartition(topic, one.partition)] += 1
    assert ends == expected
    assert bus.publish_many(topic, []) == []


def test_publish_chunks_is_publish_many_pipelined(bus: Bus, new_topic) -> None:
    """Chunk n+1 goes out while chunk n is acknowledged: positions per chunk, in order, as publish_many's."""
    topic = new_topic(2)
    events = [tool_call(s, n) for n in range(12) for s in SESSIONS[:3]]
    chunks = [events[i:i + 7] for i in range(0, len(events), 7)]
    settled = list(bus.publish_chunks(topic, ([(e.subject, e) for e in chunk] for chunk in chunks)))
    assert [len(x) for x in settled] == [len(c) for c in chunks]
    placed = [(event.subject, at) for chunk, ats in zip(chunks, settled, strict=True)
              for event, at in zip(chunk, ats, strict=True)]
    assert all(at.topic == topic and at.partition == partition_for(key, 2) for key, at in placed)
    for partition in range(2):  # dense offsets in publishing order
        offs = [at.offset for _, at in placed if at.partition == partition]
        assert offs == list(range(len(offs)))
    consumer = bus.consumer("g-chunks", [topic])
    got = drain(consumer, len(events))
    consumer.close()
    assert sorted(r.event.id for r in got) == sorted(e.id for e in events)
    assert list(bus.publish_chunks(topic, [])) == [] and list(bus.publish_chunks(topic, [[]])) == [[]]


def test_publish_chunks_leaves_the_collector_as_its_caller_has_it(bus: Bus, new_topic) -> None:
    """Library publishing never touches the collector (a served process publishes through it and keeps the
    collector on; a batch job pauses it where it starts: foundation/gcpause.py); a generator that raises
    stops the stream with its own error, the chunks before it published."""
    import gc

    from foundation.gcpause import gc_paused

    topic = new_topic(1)
    building: list[bool] = []

    def chunks():
        for n in range(3):
            building.append(gc.isenabled())
            yield [("sess-g1", tool_call("sess-g1", n))]
        raise RuntimeError("the source failed")

    stream = bus.publish_chunks(topic, chunks())
    between = []
    with pytest.raises(RuntimeError, match="the source failed"):
        for positions in stream:
            between.append((gc.isenabled(), [at.offset for at in positions]))
    assert building == [True, True, True] and gc.isenabled()
    assert between == [(True, [0]), (True, [1])]  # the third chunk was sent, not yet yielded
    with gc_paused():  # a batch job: off throughout, by its own choice
        one = [[("sess-g1", tool_call("sess-g1", 9))]]
        statuses = [gc.isenabled() for _ in bus.publish_chunks(topic, one)]
    assert statuses == [False] and gc.isenabled()


def test_publish_chunks_rejects_a_bad_chunk_whole_after_the_earlier_ones(bus: Bus, new_topic) -> None:
    topic = new_topic(1)
    good = [("sess-c1", tool_call("sess-c1", n)) for n in range(3)]
    unknown = CloudEvent.build(id="u-1", source="/t", type="rounds.nope", subject="sess-c1", data={})
    stream = bus.publish_chunks(topic, [good, [good[0], ("sess-c1", unknown)], good])
    assert [x.offset for x in next(stream)] == [0, 1, 2]
    with pytest.raises(UnknownEventType):
        next(stream)
    consumer = bus.consumer("g-chunks-bad", [topic])
    got = drain(consumer, 3, timeout_s=5)
    consumer.close()
    assert [r.event.id for r in got] == [e.id for _, e in good], "nothing of the bad chunk was written"


def test_commit_then_resume_exactly_after_it(bus: Bus, new_topic) -> None:
    topic = new_topic(1)
    sent = publish_stream(bus, topic, per_session=5)  # 40 events on one partition
    tp = TopicPartition(topic, 0)
    first = bus.consumer("g-resume", [topic])
    got = drain(first, 1)
    while len(got) < 25:
        got.extend(first.poll(0.5, max_records=25 - len(got)))
    first.commit({tp: got[24].offset + 1})
    assert first.committed(tp) == 25
    first.close()

    second = bus.consumer("g-resume", [topic])
    rest = drain(second, len(sent) - 25)
    assert [r.offset for r in rest] == list(range(25, len(sent)))
    assert second.committed(tp) == 25
    second.close()


def test_seek_to_beginning_and_seek(bus: Bus, new_topic) -> None:
    topic = new_topic(1)
    sent = publish_stream(bus, topic, per_session=2)
    tp = TopicPartition(topic, 0)
    consumer = bus.consumer("g-seek", [topic])
    first = drain(consumer, len(sent))
    consumer.seek_to_beginning()
    again = drain(consumer, len(sent))
    assert [r.raw for r in again] == [r.raw for r in first]
    consumer.seek(tp, 10)
    assert consumer.poll(5.0, max_records=1)[0].offset == 10
    with pytest.raises(ValueError):
        consumer.seek(tp, -1)
    consumer.close()


def test_on_assign_lets_a_consumer_seek_to_its_own_positions(bus: Bus, new_topic) -> None:
    topic = new_topic(2)
    publish_stream(bus, topic, per_session=10)
    assigned: list[set[TopicPartition]] = []
    stored = {tp: 4 for tp in bus.partitions(topic)}  # positions a projection kept in its own database
    holder: list[Consumer] = []

    def on_assign(tps: set[TopicPartition]) -> None:
        assigned.append(tps)
        for tp in tps:
            holder[0].seek(tp, stored[tp])

    consumer = bus.consumer("g-assign", [topic], on_assign=on_assign)
    holder.append(consumer)
    ends = consumer.end_offsets(bus.partitions(topic))
    got = drain(consumer, sum(ends.values()) - 8)
    consumer.close()
    assert assigned and assigned[-1] == set(bus.partitions(topic))
    for tp in bus.partitions(topic):
        offs = [r.offset for r in got if r.partition == tp.partition]
        assert offs == list(range(4, ends[tp]))


def test_from_beginning_false_reads_only_new_events(bus: Bus, new_topic) -> None:
    topic = new_topic(1)
    bus.publish(topic, tool_call("sess-old", 0), "sess-old")
    consumer = bus.consumer("g-latest", [topic], from_beginning=False)
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    bus.publish(topic, tool_call("sess-new", 1), "sess-new")
    got = drain(consumer, 1)
    consumer.close()
    assert [r.event.subject for r in got] == ["sess-new"]


def test_two_members_split_partitions_without_duplicates(bus: Bus, new_topic) -> None:
    topic = new_topic(4)
    a, b = bus.consumer("g-split", [topic]), bus.consumer("g-split", [topic])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait for a stable split before producing
        a.poll(0.2)
        b.poll(0.2)
        mine, theirs = a.assignment(), b.assignment()
        # Mid-rebalance a member that has not yet polled the new generation still reports its old
        # assignment beside the other's new one: the split is stable once they are disjoint and cover all.
        if mine and theirs and mine.isdisjoint(theirs) and len(mine | theirs) == 4:
            break
    assert a.assignment().isdisjoint(b.assignment())
    assert a.assignment() | b.assignment() == set(bus.partitions(topic))
    sent = publish_stream(bus, topic, per_session=10)
    seen: dict[str, list[str]] = {"a": [], "b": []}
    deadline = time.monotonic() + 30
    while len(seen["a"]) + len(seen["b"]) < len(sent) and time.monotonic() < deadline:
        seen["a"] += [r.event.id for r in a.poll(0.3)]
        seen["b"] += [r.event.id for r in b.poll(0.3)]
    a.close()
    b.close()
    assert seen["a"] and seen["b"], "both members got work"
    everything = seen["a"] + seen["b"]
    assert len(everything) == len(set(everything)) == len(sent)
    assert set(everything) == {e.id for e in sent}


def test_bad_input_is_rejected_at_publish_with_a_clear_error(bus: Bus, new_topic) -> None:
    topic = new_topic(1)
    unknown = CloudEvent(id="e1", source="/t", type="rounds.nope", subject="sess-x1", data={})
    with pytest.raises(UnknownEventType, match="unknown event type 'rounds.nope'"):
        bus.publish(topic, unknown, "sess-x1")
    good = orjson.loads(tool_call("sess-x1", 0).to_bytes())
    with pytest.raises(InvalidEvent, match="source: Field required"):
        bus.publish_raw(topic, orjson.dumps({k: v for k, v in good.items() if k != "source"}), "sess-x1")
    with pytest.raises(InvalidEvent, match="subject .* is required"):
        bus.publish_raw(topic, orjson.dumps({k: v for k, v in good.items() if k != "subject"}), "sess-x1")
    with pytest.raises(InvalidEvent, match="not valid JSON"):
        bus.publish_raw(topic, b'{"id": "e1", "source": ', "sess-x1")
    with pytest.raises(InvalidEvent, match="invalid data: name: Field required"):
        bus.publish_raw(topic, orjson.dumps({**good, "data": {"callId": "c1"}}), "sess-x1")
    huge = make_event(
        "rounds.tool.result",
        p.ToolResult(call_id="c1", name="x", output="x" * 300_000),
        source="/t",
        subject="sess-x1",
    )
    with pytest.raises(EventTooLarge, match="limit 262144"):
        bus.publish(topic, huge, "sess-x1")
    with pytest.raises(InvalidEvent, match="record key"):
        bus.publish(topic, tool_call("sess-x1", 0), "")
    with pytest.raises(UnknownTopic):
        bus.publish(f"{topic}.missing", tool_call("sess-x1", 0), "sess-x1")
    # Nothing reached the log, and the (batch) rejection wrote nothing either.
    with pytest.raises(UnknownEventType):
        bus.publish_many(topic, [("sess-x1", tool_call("sess-x1", 0)), ("sess-x1", unknown)])
    reader = bus.reader([topic])
    assert reader.end_offsets(bus.partitions(topic)) == {TopicPartition(topic, 0): 0}
    reader.close()


def write_directly(bus: Bus, topic: str, key: str, raw: bytes) -> None:
    """Bypass the publish checks, as a foreign or buggy producer would."""
    if hasattr(bus, "producer"):
        count = len(bus.partitions(topic))
        bus.producer.send(topic, value=raw, key=key.encode(), partition=partition_for(key, count)).get(30)
    else:
        bus._append(topic, [(key.encode(), raw, None)])


def test_invalid_stored_record_surfaces_as_none_and_does_not_stop_the_consumer(bus: Bus, new_topic) -> None:
    topic = new_topic(1)
    bus.publish(topic, tool_call("sess-r1", 0), "sess-r1")
    write_directly(bus, topic, "sess-r1", b"\x00not json")
    write_directly(bus, topic, "sess-r1", orjson.dumps({"id": "x", "source": "/t", "type": "rounds.nope"}))
    bus.publish(topic, tool_call("sess-r1", 1), "sess-r1")
    consumer = bus.consumer("g-poison", [topic])
    got = drain(consumer, 4)
    consumer.close()
    assert [r.event is None for r in got] == [False, True, True, False]
    assert got[1].raw == b"\x00not json" and got[1].key == "sess-r1"
    assert got[3].event.sequence == 1


def test_publish_raw_keeps_the_bytes(bus: Bus, new_topic) -> None:
    topic = new_topic(1)
    raw = tool_call("sess-raw1", 3).to_bytes()
    bus.publish_raw(topic, raw, "sess-raw1")
    reader = bus.reader([topic])
    got = drain(reader, 1)
    with pytest.raises(RuntimeError):
        reader.commit({TopicPartition(topic, 0): 1})
    reader.close()
    assert got[0].raw == raw and got[0].event.sequence == 3
    with pytest.raises(InvalidEvent, match="not valid JSON"):
        bus.publish_raw_many(topic, [("sess-raw1", raw), ("sess-raw1", b"nope")])
    assert bus.reader([topic]).end_offsets(bus.partitions(topic)) == {TopicPartition(topic, 0): 1}
    more = [tool_call("sess-raw1", n).to_bytes() for n in (4, 5)]
    assert [x.offset for x in bus.publish_raw_many(topic, [("sess-raw1", r) for r in more])] == [1, 2]
