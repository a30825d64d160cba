"""Re-scoring a log exported with `rounds events dump` and loaded elsewhere with `rounds events load`, where
no sandbox exists: the log's `rounds.sandbox.state` (appended by the first scorer) is all it needs; without
one, the session's logged writes are replayed (tests/consumers/scoring/test_log_anywhere.py: large states,
both
backends)."""

from __future__ import annotations

import io
from pathlib import Path

from events.archive import dump, load
from events.topics import topic_specs
from rounds.migrate import upgrade
from rounds.settings import Settings
from services.consumers.scoring.api import score_run
from tests.consumers.scoring import world
from tests.consumers.scoring.conftest import World
from tests.wiring import bus_on, client_on, root_on


def _strip(report) -> list:
    return [(s.session, s.score, s.excluded if hasattr(s, "excluded") else None,
             [(t.index, t.score, [(c.id, c.passed, c.evidence) for c in t.checks]) for t in s.turns])
            for s in report.sessions]


def test_a_dumped_and_loaded_log_rescored_elsewhere_gives_the_same_scores(scoring_world: World,
                                                                           tmp_path: Path) -> None:
    w = scoring_world
    for trial, style in enumerate(["oracle", "wrong_dose", "leaky", "nothing"]):
        language = "zh" if trial == 2 else "en"
        session = w.session().start(w.scenario, "portable", trial=trial, language=language)
        world.play(session, w.scenario, style, language)
        session.end(run="portable")
    here = score_run(root_on(w.settings), "portable", bus=w.bus, topics=(w.sessions,), scores_topic=w.scores,
                     client=w.client, timeout_s=120)
    assert here.metrics.sessions == 4

    reads: list[str] = []  # a re-score where the log holds each state after its end: no sandbox read
    w.client.event_hooks["request"].append(lambda request: reads.append(request.url.path))
    try:
        again = score_run(root_on(w.settings), "portable", scorer_version="4-again", bus=w.bus,
                          topics=(w.sessions,),
                          scores_topic=w.scores, client=w.client, timeout_s=120)
    finally:
        w.client.event_hooks["request"].pop()
    assert [path for path in reads if "/sessions/" in path] == []
    assert _strip(again) == _strip(here)

    archive = io.BytesIO()
    written, _ = dump(w.bus, [w.sessions], archive)
    lines = archive.getvalue().splitlines()
    assert sum(b'"rounds.sandbox.state"' in line for line in lines) == 4  # one per scored session
    assert written == len(lines)

    elsewhere = Settings(database_url=f"sqlite:///{tmp_path / 'elsewhere.sqlite'}")
    upgrade(elsewhere.database_url)
    bus = bus_on(elsewhere)
    bus.ensure_topics(topic_specs(3))
    try:
        report = load(bus, lines)
        assert report.rejected == [] and report.published == written
        with client_on(elsewhere) as empty:  # a FHIR API without the sandboxes or the record
            assert empty.get("/fhir/Patient").json().get("total", 0) == 0
            there = score_run(root_on(elsewhere), "portable", bus=bus, client=empty, timeout_s=120)
    finally:
        bus.close()
    assert _strip(there) == _strip(here)
    assert there.metrics.model_dump() == here.metrics.model_dump()


def test_without_a_recorded_state_a_session_is_scored_from_its_replayed_writes(scoring_world: World,
                                                                                tmp_path: Path) -> None:
    """A log never scored where it was recorded holds no sandbox state: elsewhere the scorer rebuilds each
    session's writes from its logged EHR calls; a session without its scenario stays unscorable."""
    w = scoring_world
    session = w.session().start(w.scenario, "unscored")
    world.play(session, w.scenario, "oracle")
    session.end(run="unscored")
    blind = w.session().start(w.scenario, "unscored", trial=1, definition=False)
    world.play(blind, w.scenario, "oracle")
    blind.end(run="unscored")
    archive = io.BytesIO()
    dump(w.bus, [w.sessions], archive)  # never scored here: no sandbox state in the log
    assert b'"rounds.sandbox.state"' not in archive.getvalue()
    elsewhere = Settings(database_url=f"sqlite:///{tmp_path / 'elsewhere.sqlite'}")
    upgrade(elsewhere.database_url)
    bus = bus_on(elsewhere)
    bus.ensure_topics(topic_specs(3))
    try:
        load(bus, archive.getvalue().splitlines())
        with client_on(elsewhere) as there:  # the same record, no sandboxes
            world.copy_record(w.client, there, w.ids)
            report = score_run(root_on(elsewhere), "unscored", bus=bus, client=there, timeout_s=120)
    finally:
        bus.close()
    here = score_run(root_on(w.settings), "unscored", bus=w.bus, topics=(w.sessions,), scores_topic=w.scores,
                     client=w.client, timeout_s=120)
    by_id = {s.session: s for s in report.sessions}
    replayed, unscorable = by_id[session.id], by_id[blind.id]
    assert replayed.excluded is None and replayed.score == 1.0
    assert {s.session: s.score for s in here.sessions}[session.id] == 1.0
    assert unscorable.score is None and unscorable.excluded == "unscorable"
    assert report.metrics.excluded_sessions == 1 and report.metrics.sessions == 1
