"""`rounds events topics|dump|load` on every backend: export, load into a fresh database, dump equals."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from events import payloads as p
from events.catalog import make_event, route
from events.envelope import CloudEvent
from events.topics import ALL_TOPICS
from rounds.cli import app
from rounds.migrate import upgrade
from rounds.settings import Settings
from tests.events.conftest import BACKENDS
from tests.wiring import bus_on

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

runner = CliRunner()


@pytest.fixture(params=BACKENDS)
def source_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """ROUNDS_* environment of the backend the session is recorded on."""
    if request.param == "kafka":
        request.applymarker(pytest.mark.kafka)
        return {"ROUNDS_BUS": "kafka", "ROUNDS_KAFKA_BOOTSTRAP": request.getfixturevalue("kafka_bootstrap")}
    url = request.getfixturevalue("sqlite_url" if request.param == "sql-sqlite" else "postgres_url")
    upgrade(url)
    return {"ROUNDS_BUS": "sql", "ROUNDS_DATABASE_URL": url}


def fresh_sqlite(tmp_path: Path, name: str) -> dict[str, str]:
    url = f"sqlite:///{tmp_path / name}"
    upgrade(url)
    return {"ROUNDS_BUS": "sql", "ROUNDS_DATABASE_URL": url}


def rounds(env: dict[str, str], *args: str, input: bytes | None = None):
    return runner.invoke(app, ["events", *args], env=env, input=input, catch_exceptions=False)


def record_session(env: dict[str, str], session: str) -> list[CloudEvent]:
    """A small but complete session: lifecycle, messages, an EHR round trip, a tool call, a score."""
    question = p.communication("q1", "doctor", ["assistant"], "Latest potassium?")
    answer = p.communication("a1", "assistant", ["doctor"], "4.1 mmol/L", in_response_to=["q1"])
    payloads = [
        ("rounds.session.started", p.SessionStarted(assistant="model-x", patient="Patient/p-1")),
        ("rounds.message.doctor", question),
        (
            "rounds.ehr.request",
            p.EhrRequest(request_id="r1", method="GET", url="Observation", query={"code": ["2823-3"]}),
        ),
        (
            "rounds.ehr.response",
            p.EhrResponse(request_id="r1", status=200, latency_ms=12.5, body_digest="sha256:" + "0" * 64),
        ),
        ("rounds.tool.call", p.ToolCall(call_id="t1", name="calc", arguments={"x": 1})),
        ("rounds.tool.result", p.ToolResult(call_id="t1", name="calc", output=2)),
        ("rounds.message.assistant", answer),
        (
            "rounds.score.turn",
            p.ScoreTurn(scorer="exact", metric="correct", value=1.0, message_id="a1", turn=1),
        ),
        ("rounds.session.ended", p.SessionEnded(reason="completed", turns=2)),
    ]
    events = [
        make_event(t, d, source="/rounds/tests", subject=session, sequence=i)
        for i, (t, d) in enumerate(payloads)
    ]
    bus = bus_on(
        Settings(**{k.removeprefix("ROUNDS_").lower(): v for k, v in env.items()}), ensure_topics=True
    )
    for event in events:
        topic, key = route(event)
        bus.publish(topic, event, key)
    bus.close()
    return events


def dumped(env: dict[str, str], *args: str) -> list[dict]:
    result = rounds(env, "dump", "--from-beginning", *args)
    assert result.exit_code == 0, result.output
    return [orjson.loads(line) for line in result.stdout_bytes.splitlines()]


def by_topic(events: list[dict]) -> dict[str, list[dict]]:
    """Events per topic in log order (the order between topics is not defined)."""
    out: dict[str, list[dict]] = {}
    for e in events:
        out.setdefault(route(CloudEvent.build(**e))[0], []).append(e)
    return out


def test_topics_then_export_load_dump_round_trip(source_env: dict[str, str], tmp_path: Path) -> None:
    result = rounds(source_env, "topics")
    assert result.exit_code == 0, result.output
    assert [line.split("\t")[0] for line in result.stdout.splitlines()] == list(ALL_TOPICS)

    session = f"sess-{uuid.uuid4().hex[:12]}"
    events = record_session(source_env, session)
    exported = dumped(source_env, "--session", session)
    assert {e["id"] for e in exported} == {e.id for e in events}
    in_session_topic = [e["sequence"] for e in exported if e["type"] != "rounds.score.turn"]
    assert in_session_topic == sorted(in_session_topic), "one session is dumped in log order"
    assert dumped(source_env, "--session", "sess-other-one") == []

    export_file = tmp_path / "export.jsonl"
    export_file.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in exported))
    target = fresh_sqlite(tmp_path, "target.sqlite")
    loaded = rounds(target, "load", str(export_file))
    assert loaded.exit_code == 0, loaded.output
    assert f"{len(events)} published, 0 already present" in loaded.stderr
    assert by_topic(dumped(target, "--session", session)) == by_topic(exported)
    assert sorted(dumped(target), key=lambda e: e["id"]) == sorted(exported, key=lambda e: e["id"])

    again = rounds(target, "load", str(export_file))  # idempotent
    assert f"0 published, {len(events)} already present" in again.stderr
    back = rounds(source_env, "load", "-", input=export_file.read_bytes())
    assert f"0 published, {len(events)} already present" in back.stderr
    assert len(dumped(target, "--session", session)) == len(events)


def test_topic_filter_and_dump_without_start_prints_a_hint(tmp_path: Path) -> None:
    env = fresh_sqlite(tmp_path, "one.sqlite")
    record_session(env, "sess-topic-filter")
    scores = dumped(env, "--topic", "rounds.scores")
    assert [e["type"] for e in scores] == ["rounds.score.turn"]
    result = rounds(env, "dump")
    assert result.exit_code == 0 and result.stdout_bytes == b""
    assert "--from-beginning" in result.stderr


def test_follow_prints_new_events_until_idle(tmp_path: Path) -> None:
    env = fresh_sqlite(tmp_path, "follow.sqlite")
    old = record_session(env, "sess-follow-old")
    late = [
        make_event(
            "rounds.tool.call", p.ToolCall(call_id=f"late{i}", name="n"), source="/t", subject="sess-late1"
        )
        for i in range(4)
    ]

    def publish_later() -> None:  # one event every 0.5 s once the dump has (very likely) started following
        bus = bus_on(Settings(bus="sql", database_url=env["ROUNDS_DATABASE_URL"]))
        for event in late:
            time.sleep(0.5 if event is not late[0] else 2.0)
            topic, key = route(event)
            bus.publish(topic, event, key)
        bus.close()

    thread = threading.Thread(target=publish_later)
    thread.start()
    result = rounds(env, "dump", "--follow", "--idle-timeout", "3")
    thread.join()
    printed = [orjson.loads(line)["id"] for line in result.stdout_bytes.splitlines()]
    assert printed and printed == [e.id for e in late][-len(printed) :], "only new events, in order"
    everything = rounds(env, "dump", "--from-beginning", "--follow", "--idle-timeout", "1")
    ids = {orjson.loads(line)["id"] for line in everything.stdout_bytes.splitlines()}
    assert ids == {e.id for e in old} | {e.id for e in late}


def test_load_reports_bad_lines_and_publishes_the_good_ones(tmp_path: Path) -> None:
    env = fresh_sqlite(tmp_path, "bad.sqlite")
    good = make_event(
        "rounds.tool.call", p.ToolCall(call_id="c1", name="n"), source="/t", subject="sess-good1"
    )
    unknown = {**orjson.loads(good.to_bytes()), "id": "other", "type": "rounds.unknown"}
    phi = {**orjson.loads(good.to_bytes()), "id": "phi", "subject": "10000032"}
    lines = [good.to_bytes(), b"{not json", orjson.dumps(unknown), b"", orjson.dumps(phi)]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    result = rounds(env, "load", str(path))
    assert result.exit_code == 1
    assert "1 published, 0 already present, 3 rejected" in result.stderr
    assert "line 2: not valid JSON" in result.stderr
    assert "line 3: unknown event type 'rounds.unknown'" in result.stderr
    assert "line 5: invalid CloudEvent: subject" in result.stderr
    assert [e["id"] for e in dumped(env)] == [good.id]


def test_load_in_small_batches_keeps_order_and_skips_duplicates(tmp_path: Path) -> None:
    from events.archive import load

    env = fresh_sqlite(tmp_path, "batches.sqlite")
    events = [
        make_event(
            "rounds.tool.call",
            p.ToolCall(call_id=f"c{i}", name="n"),
            source="/t",
            subject="sess-batch1",
            sequence=i,
        )
        for i in range(7)
    ]
    lines = [e.to_bytes() for e in events] + [events[0].to_bytes()]  # a duplicate inside the file
    bus = bus_on(Settings(bus="sql", database_url=env["ROUNDS_DATABASE_URL"]), ensure_topics=True)
    report = load(bus, lines, batch=3)
    bus.close()
    assert (report.published, report.already_present, report.rejected) == (7, 1, [])
    assert [e["sequence"] for e in dumped(env, "--session", "sess-batch1")] == list(range(7))


def test_missing_schema_is_a_clear_error(tmp_path: Path) -> None:
    env = {"ROUNDS_BUS": "sql", "ROUNDS_DATABASE_URL": f"sqlite:///{tmp_path / 'empty.sqlite'}"}
    result = rounds(env, "topics")
    assert result.exit_code == 2
    assert "rounds db upgrade" in result.stderr


@pytest.fixture(params=["sql-sqlite", "kafka"])
def blob_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """A log on the SQL log or Kafka; the blob store in the application database either way."""
    env = fresh_sqlite(tmp_path, "source.sqlite")
    if request.param == "kafka":
        request.applymarker(pytest.mark.kafka)
        env |= {"ROUNDS_BUS": "kafka", "ROUNDS_KAFKA_BOOTSTRAP": request.getfixturevalue("kafka_bootstrap")}
    assert rounds(env, "topics").exit_code == 0
    return env


def test_dump_carries_the_blobs_its_events_name_and_load_stores_them(blob_env: dict[str, str],
                                                                      tmp_path: Path) -> None:
    from events.blobs import BlobStore, blob_ref
    from foundation.db import make_engine

    session = f"sess-{uuid.uuid4().hex[:12]}"
    body = b'{"resourceType":"Bundle","entry":[' + b"0" * 300_000 + b"]}"
    source = make_engine(blob_env["ROUNDS_DATABASE_URL"])
    ref = BlobStore(source).put(body)
    source.dispose()
    inline = b'{"resourceType":"Patient"}'
    bus = bus_on(Settings(bus=blob_env["ROUNDS_BUS"], database_url=blob_env["ROUNDS_DATABASE_URL"],
                            kafka_bootstrap=blob_env.get("ROUNDS_KAFKA_BOOTSTRAP")))
    try:
        for n, data in enumerate([{"body_ref": ref, "body_size": len(body)},
                                  {"body": inline.decode(), "body_digest": blob_ref(inline)},
                                  {"body_ref": ref, "body_size": len(body)}]):
            event = make_event(p.EhrResponse(request_id=f"r{n}", status=200, latency_ms=1.0, **data),
                               source="/t", subject=session, sequence=n + 1)
            bus.publish(*route(event)[:1], event, session)
    finally:
        bus.close()
    result = rounds(blob_env, "dump", "--from-beginning", "--session", session)
    assert result.exit_code == 0, result.output
    lines = result.stdout_bytes.splitlines()
    # the blob once, before the first event naming it; the inline body's digest names nothing stored
    assert len(lines) == 4 and lines[0].startswith(b'{"roundsBlob":')
    assert orjson.loads(lines[0])["roundsBlob"] == ref and ref.encode() in lines[1]
    assert "3 events" in result.stderr

    target = fresh_sqlite(tmp_path, "target.sqlite")
    export = tmp_path / "export.jsonl"
    export.write_bytes(result.stdout_bytes)
    loaded = rounds(target, "load", str(export))
    assert loaded.exit_code == 0
    assert "3 published, 0 already present, 0 rejected, 1 blobs stored" in loaded.stderr
    there = make_engine(target["ROUNDS_DATABASE_URL"])
    try:
        assert BlobStore(there).get(ref) == body
    finally:
        there.dispose()

    forged = orjson.loads(lines[0]) | {"dataBase64": "eA=="}
    export.write_bytes(orjson.dumps(forged) + b"\n")
    bad = rounds(fresh_sqlite(tmp_path, "other.sqlite"), "load", str(export))
    assert bad.exit_code == 1 and "does not match its content" in bad.stderr
