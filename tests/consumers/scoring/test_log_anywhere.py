"""A log re-scores anywhere (issue 36 item 8), on SQLite and PostgreSQL: exported with `dump` and loaded with
`load` into a fresh store holding the same record, every session is scored — one whose sandbox state is too
large for an event through the blob the dump carries, and, in a log recorded by the old code path (no event
for a state over 200 KB), by replaying its logged writes; the replay agrees with the recorded states."""

from __future__ import annotations

import io
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from contracts.trajectory_log import LoggedEvent
from events.archive import BLOB_KEY, dump, load
from events.blobs import read
from events.topics import topic_specs
from foundation.db import make_engine
from rounds.migrate import upgrade
from rounds.settings import Settings
from services.consumers.scoring import snapshot
from services.consumers.scoring.api import score_run
from services.consumers.scoring.replay import body_refs, disagreements, replay_writes
from tests.consumers.scoring import world
from tests.consumers.scoring.conftest import World, make_world
from tests.wiring import bus_on, client_on, root_on

RUN = "anywhere"
STATE = b'"rounds.sandbox.state"'


@pytest.fixture
def here(database_url: str) -> Iterator[World]:
    yield from make_world(database_url)


@pytest.fixture
def elsewhere(database_url: str, request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """A fresh store of the same backend: migrated, no record, no log."""
    url = (f"sqlite:///{tmp_path / 'elsewhere.sqlite'}" if database_url.startswith("sqlite")
           else request.getfixturevalue("empty_postgres_url"))
    upgrade(url)
    return Settings(database_url=url)


def _play(w: World) -> None:
    """Three sessions: the oracle, a wrong dose, and an oracle that also files 120 notes (its sandbox's
    final state is ~300 KB, over what one event carries)."""
    for trial, style in enumerate(["oracle", "wrong_dose", "bulky"]):
        session = w.session().start(w.scenario, RUN, trial=trial)
        world.play(session, w.scenario, "oracle" if style == "bulky" else style)
        for n in range(120 if style == "bulky" else 0):
            note = {"resourceType": "Observation", "status": "final", "code": {"text": f"note {n}"},
                    "subject": {"reference": f"Patient/{w.ids['patient']}"}, "valueString": "x" * 2000}
            assert session.ehr("POST", "Observation", note).status_code == 201
        session.end(run=RUN)


def _strip(report) -> list:
    return sorted((s.session, s.score, s.excluded, [(t.index, t.score, [(c.id, c.passed) for c in t.checks])
                                                   for t in s.turns]) for s in report.sessions)


def _rescore_elsewhere(w: World, settings: Settings, lines: list[bytes]):
    engine = make_engine(settings.database_url)
    bus = bus_on(settings)
    bus.ensure_topics(topic_specs(3))
    try:
        loaded = load(bus, lines, blobs=engine)
        assert loaded.rejected == []
        with client_on(settings) as there:
            world.copy_record(w.client, there, w.ids)
            return score_run(root_on(settings), RUN, bus=bus, client=there, timeout_s=120)
    finally:
        bus.close()
        engine.dispose()


def _scored_here(w: World):
    _play(w)
    return score_run(root_on(w.settings), RUN, bus=w.bus, topics=(w.sessions,), scores_topic=w.scores,
                     client=w.client,
                     timeout_s=120)


def test_a_large_state_travels_with_its_blob(here: World, elsewhere: Settings) -> None:
    w = here
    scored = _scored_here(w)
    assert scored.metrics.sessions == 3 and scored.metrics.excluded_sessions == 0
    engine = make_engine(w.settings.database_url)
    try:
        archive = io.BytesIO()
        written, _ = dump(w.bus, [w.sessions], archive, blobs=engine)
    finally:
        engine.dispose()
    lines = archive.getvalue().splitlines()
    states = [orjson.loads(line)["data"] for line in lines if STATE in line]
    assert len(states) == 3  # every state recorded, the large one by reference
    (large,) = [s for s in states if "stateRef" in s]
    assert large["stateSize"] > snapshot.MAX_BYTES and large["writes"] == []
    first_blob = lines.index(next(line for line in lines if large["stateRef"].encode() in line))
    assert lines[first_blob].startswith(BLOB_KEY)  # the blob comes before the event naming it
    assert written == sum(not line.startswith(BLOB_KEY) for line in lines)

    there = _rescore_elsewhere(w, elsewhere, lines)
    assert there.metrics.excluded_sessions == 0 and there.metrics.sessions == 3
    assert _strip(there) == _strip(scored)


def test_replayed_writes_agree_with_every_recorded_state(here: World) -> None:
    w = here
    _scored_here(w)
    engine = make_engine(w.settings.database_url)
    try:
        archive = io.BytesIO()
        dump(w.bus, [w.sessions], archive, blobs=engine)
        lines = archive.getvalue().splitlines()
        with engine.connect() as conn:
            named = {m.decode() for line in lines for m in re.findall(rb"sha256:[0-9a-f]{64}", line)}
            stored = read(conn, named)
    finally:
        engine.dispose()
    sessions: dict[str, list[LoggedEvent]] = defaultdict(list)
    recorded = {}
    for line in lines:
        if line.startswith(BLOB_KEY):
            continue
        event = orjson.loads(line)
        if event["type"] == "rounds.sandbox.state":
            recorded[event["subject"]] = snapshot.from_data(event["data"], stored)  # the large one: its blob
        else:
            sessions[event["subject"]].append(LoggedEvent(event["type"], event["data"], event.get("time")))
    assert len(recorded) == 3 and all(state is not None for state in recorded.values())
    for sid, events in sessions.items():
        replayed = replay_writes(events, stored)
        assert replayed.gaps == [] and replayed.writes
        assert disagreements(recorded[sid], replayed.writes) == []
        assert body_refs(events) == set()  # every body inline here: the replay needs no blob
    assert max(len(replay_writes(events).writes) for events in sessions.values()) == 121


def test_a_log_recorded_by_the_old_code_rescores_by_replay(here: World, elsewhere: Settings,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The old code path records a state only when it fits an event (main before this change: a larger one
    was "re-read instead"): the large session's log holds no state, and no blob travels."""
    w = here
    current = snapshot.to_event
    monkeypatch.setattr(snapshot, "to_event", lambda sid, state, time, store=None: current(sid, state, time))
    scored = _scored_here(w)
    monkeypatch.undo()
    engine = make_engine(w.settings.database_url)
    try:
        archive = io.BytesIO()
        dump(w.bus, [w.sessions], archive, blobs=engine)
    finally:
        engine.dispose()
    lines = archive.getvalue().splitlines()
    assert sum(STATE in line for line in lines) == 2 and not any(b"stateRef" in line for line in lines)
    assert not any(line.startswith(BLOB_KEY) for line in lines)
    there = _rescore_elsewhere(w, elsewhere, lines)
    assert there.metrics.excluded_sessions == 0 and there.metrics.sessions == 3
    assert _strip(there) == _strip(scored)
