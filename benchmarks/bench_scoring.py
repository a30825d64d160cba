"""Scoring throughput: sessions in the log -> the scorer (consumer group, FHIR reads of each sandbox's final
state, every rubric item of every turn) -> score rows + rounds.score.* events; then a re-score of all of them.

    python benchmarks/bench_scoring.py                 # 10,000 sessions on the embedded default (SQLite)
    python benchmarks/bench_scoring.py --sessions 2000 --database-url postgresql+psycopg://...

Sessions are the four-turn scenario of tests/consumers/scoring/world.py (lookup with two facts, trend,
patient question,
write) played by three scripted assistants (oracle, wrong dose, nothing) with real sandboxes: each session's
MedicationRequest is written into its sandbox through the store, its events (about 20 per session: messages,
EHR request/response pairs, start and end) are published to the SQL log. Then:
1. first scoring: `score_run` (a fresh group from the beginning; reads each sandbox over HTTP in process,
   appends each session's rounds.sandbox.state), turns/s and sessions/s;
2. re-score: `score_run` again under another scorer version (what `rounds score --run` does): seconds for all
   sessions — the issue's "time to re-score 10,000 sessions".
Each phase also prints this process's CPU time per session and turn (the scorer, its in-process FHIR app and
the SQL log all run in it): on shared cores wall-clock rates mostly measure the other load.
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
import uuid
from pathlib import Path

from events import payloads as p
from events.catalog import CATALOG
from events.payloads import EhrRequest, EhrResponse, SessionEnded, SessionStarted, communication
from events.topics import topic_specs
from rounds.migrate import upgrade
from rounds.settings import Settings
from services.consumers.scoring.api import score_run
from services.fhir_api.store.interface import Context
from tests.consumers.scoring import world
from tests.wiring import bus_on, client_on, root_on, store_on

SOURCE = "/bench/scoring"
STYLES = ("oracle", "wrong_dose", "nothing")


def session_events(sid: str, sc, style: str, trial: int, run: str, write_id: str | None) -> list:
    """One session's events, as the simulator and the FHIR server would log them."""
    out = []

    def add(type_: str, payload) -> None:
        out.append(CATALOG.make(type_, payload, source=SOURCE, subject=sid, sequence=len(out) + 1))

    def say(sender: str, to: str, text: str, turn: int, **kw) -> None:
        add(f"rounds.message.{sender}", communication(uuid.uuid4().hex[:20], sender, [to], text, turn=turn,
                                                       **kw))

    def ehr(method: str, url: str, status: int) -> None:
        rid = uuid.uuid4().hex
        add(p.EhrRequest.TYPE, EhrRequest(request_id=rid, method=method, url=url))
        add(p.EhrResponse.TYPE, EhrResponse(request_id=rid, status=status, latency_ms=2.5))

    add(p.SessionStarted.TYPE, SessionStarted(assistant=style, patient=sc.patient, scenario=sc.id,
                                                 as_of=sc.now, run_id=run, trial=trial, language="en",
                                                 variant="explicit",
                                                 scenario_definition=sc.model_dump(mode="json")))
    for turn in sc.turns:
        say("doctor", "assistant", turn.text.en.explicit, turn.index)
        if style == "nothing":
            say("assistant", "doctor", "I am not sure.", turn.index, kind="answer")
            continue
        for fact in turn.facts:
            if fact.reference:
                ehr("GET", fact.reference, 200)
        for fact_id in turn.patient_facts:
            say("assistant", "patient", "Do you take any painkillers?", turn.index, kind="question")
            say("patient", "assistant", sc.memory(fact_id).text.en, turn.index, disclosed=[fact_id])
        if turn.writes and write_id:
            ehr("POST", "MedicationRequest", 201)
        say("assistant", "doctor", turn.answer.en, turn.index, kind="answer")
    add(p.SessionEnded.TYPE, SessionEnded(reason="completed", turns=len(sc.turns), run_id=run))
    return out


def build(settings: Settings, sessions: int, run: str) -> int:
    """Record, sandboxes with their writes, and the log; returns the number of events published."""
    with client_on(settings) as client:
        ids = world.load_record(client)
    sc = world.scenario(ids)
    store = store_on(settings.database_url)
    bus = bus_on(settings)
    bus.ensure_topics(topic_specs(3))
    published = 0
    try:
        chunk: list = []
        for trial in range(sessions):
            style = STYLES[trial % len(STYLES)]
            sid = store.create_session(sc.now)
            write_id = None
            if style != "nothing":
                body = copy.deepcopy(sc.turns[3].writes[0].resource)
                if style == "wrong_dose":
                    body["dosageInstruction"][0]["doseAndRate"][0]["doseQuantity"]["value"] = 5
                write_id = store.create(Context(sid, sc.now), body).id
            chunk += [(sid, e) for e in session_events(sid, sc, style, trial, run, write_id)]
            if len(chunk) >= 5000:
                bus.publish_many("rounds.sessions", chunk)
                published += len(chunk)
                chunk = []
        bus.publish_many("rounds.sessions", chunk)
        published += len(chunk)
    finally:
        bus.close()
        store.engine.dispose()
    return published


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'bench.sqlite'}"
        upgrade(url)
        settings = Settings(database_url=url)
        run = f"bench-{uuid.uuid4().hex[:6]}"
        started = time.perf_counter()
        events = build(settings, args.sessions, run)
        print(f"built {args.sessions} sessions, {events} events in {time.perf_counter() - started:.1f} s")
        for phase, version in (("first scoring", "bench-1"), ("re-score", "bench-2")):
            started, cpu = time.perf_counter(), time.process_time()
            report = score_run(root_on(settings), run, scorer_version=version, timeout_s=24 * 3600)
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            m = report.metrics
            sessions = max(m.sessions, 1)
            print(f"{phase}: {m.sessions} sessions, {m.turns} turns in {seconds:.1f} s = "
                  f"{m.turns / seconds:,.0f} turns/s, {m.sessions / seconds:,.0f} sessions/s "
                  f"(avg {m.avg:.3f}); "
                  f"CPU {cpu:.1f} s = {cpu / sessions * 1000:.1f} ms per session, "
                  f"{cpu / max(m.turns, 1) * 1000:.1f} ms per turn; 10,000 sessions: "
                  f"{seconds * 10_000 / sessions:.0f} s at this rate, {cpu * 10_000 / sessions:.0f} CPU-s")


if __name__ == "__main__":
    main()
