"""Poison never blocks a consumer: undecodable bytes, unknown types and events the handler rejects are
dead-lettered with the error and their coordinates, and every good event around them applies exactly once."""

from __future__ import annotations

import orjson

from events.projections.runner import ProjectionRunner
from events.projections.transcript import TranscriptProjection
from tests.events.projections.helpers import Env, append_raw, read_all, session_events, session_id, snapshot


class FragileTranscript(TranscriptProjection):
    """Rejects messages whose text is 'poison' (a handler bug or a semantic check)."""

    def handle(self, tx, record) -> None:
        event = record.event
        if event.type.startswith("rounds.message.") and event.data["payload"][0]["contentString"] == "poison":
            raise ValueError("message text is poison")
        super().handle(tx, record)


def test_poison_is_dead_lettered_and_the_stream_moves_on(env: Env) -> None:
    sid = session_id()
    good = session_events(sid, turns=2)
    env.bus.publish_many(env.sessions, [(sid, e) for e in good[:3]])
    append_raw(env, env.sessions, sid, b"{not json")
    unknown = {**good[0].to_dict(), "id": "u1", "type": "rounds.not.in.catalog"}
    append_raw(env, env.sessions, sid, orjson.dumps(unknown))
    poison = good[1].model_copy(update={"id": "p1", "data": {**good[1].data, "payload": [
        {"contentString": "poison"}]}})
    env.bus.publish(env.sessions, poison, sid)
    env.bus.publish_many(env.sessions, [(sid, e) for e in good[3:]])

    def run() -> ProjectionRunner:
        runner = ProjectionRunner(env.bus, env.engine, FragileTranscript(topics=env.topics),
                                  deadletter_topic=env.deadletter, batch_size=50, poll_timeout_s=0.2)
        with runner:
            runner.run(until_caught_up=True, timeout_s=120)
        return runner

    first = run()
    assert (first.stats.applied, first.stats.dead_lettered, first.stats.duplicates) == (len(good), 3, 0)
    entries = snapshot(env.engine, first.projection)["transcript_entries"]
    assert [row[2] for row in entries] == [e.id for e in good]  # each good event once, in order

    letters = read_all(env, env.deadletter, expected=3)
    assert len(letters) == 3
    by_offset = {r.event.data["offset"]: r.event.data for r in letters}
    assert sorted(by_offset) == [3, 4, 5] or len({r.event.data["partition"] for r in letters}) == 1
    reasons = [d["error"] for _, d in sorted(by_offset.items())]
    assert "not a valid CloudEvent" in reasons[0]
    assert "not a valid CloudEvent" in reasons[1] or "unknown event type" in reasons[1]
    assert "message text is poison" in reasons[2]
    assert all(d["topic"] == env.sessions and d["key"] == sid and d["groupId"] == first.group_id
               for d in by_offset.values())
    assert by_offset[max(by_offset)]["originalType"] == "rounds.message.doctor"

    again = run()  # positions moved past the poison: nothing re-applied, nothing re-dead-lettered
    assert (again.stats.applied, again.stats.dead_lettered) == (0, 0)


def test_unknown_type_is_dead_lettered_even_when_decoded(env: Env) -> None:
    """A type the catalog does not know (e.g. a newer producer) is dead-lettered, not silently skipped."""
    sid = session_id()
    events = session_events(sid, turns=1)
    env.bus.publish_many(env.sessions, [(sid, e) for e in events])
    runner = ProjectionRunner(env.bus, env.engine, TranscriptProjection(topics=env.topics),
                              deadletter_topic=env.deadletter, poll_timeout_s=0.2,
                              known_type=lambda t: t != "rounds.ehr.response")
    with runner:
        stats = runner.run(until_caught_up=True, timeout_s=120)
    assert (stats.applied, stats.dead_lettered) == (len(events) - 1, 1)
    [letter] = read_all(env, env.deadletter, expected=1)
    assert "unknown event type 'rounds.ehr.response'" in letter.event.data["error"]
