"""A log re-scores anywhere (issue 36 item 8), measured on a real store: dump every session of a store with
`rounds events dump` (blobs carried), load it into a fresh store holding the same record, re-score each run
there and count the unscorable sessions; compare the replayed writes with every recorded sandbox state.

    python benchmarks/bench_log_anywhere.py --source sqlite:///runs.sqlite --target sqlite:///fresh.sqlite \
        [--dump FILE] [--probe-patients 3]

`--source`: the store the runs were recorded in (scored there: their scores are the reference). `--target`:
a migrated store holding the same record (`rounds map` + `rounds load` of the same data) and no log; it is
written to (load, scores). Printed: the dump (events, blob lines, bytes, seconds), the load, then per run
the sessions, how many carried a recorded state (inline / stored) or none (replayed), the unscorable count,
Avg here and there and how many session scores differ; then the replay check over every recorded state
(agree / disagree / gaps, with examples). `--probe-patients N` also sends issue 38's search
(`Specimen?subject=…&_revinclude=Observation:specimen&_count=1000`) through a recorded session base for the
N patients with the most references and prints each status, entries and whether the id list was stored.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from contracts.trajectory_log import LoggedEvent  # noqa: E402
from events import payloads as p  # noqa: E402
from events.archive import BLOB_KEY, dump, load  # noqa: E402
from events.topics import SESSIONS, topic_specs  # noqa: E402
from foundation.db import make_engine  # noqa: E402
from rounds.settings import Settings  # noqa: E402
from services.consumers.scoring import snapshot  # noqa: E402
from services.consumers.scoring.api import load_report, score_run  # noqa: E402
from services.consumers.scoring.replay import disagreements, replay_writes  # noqa: E402
from tests.wiring import bus_on, root_on  # noqa: E402

STATE = p.SandboxState.TYPE


def dumped(source: Settings, path: Path) -> list[bytes]:
    bus, engine = bus_on(source), make_engine(source.database_url)
    start = time.perf_counter()
    try:
        with path.open("wb") as out:
            written, skipped = dump(bus, [SESSIONS], out, blobs=engine)
    finally:
        bus.close()
        engine.dispose()
    lines = path.read_bytes().splitlines()
    blobs = sum(line.startswith(BLOB_KEY) for line in lines)
    print(f"dump: {written} events, {blobs} blob lines, {skipped} invalid skipped, "
          f"{path.stat().st_size / 1e6:.1f} MB, {time.perf_counter() - start:.1f} s")
    return lines


def loaded(target: Settings, lines: list[bytes]) -> None:
    bus, engine = bus_on(target), make_engine(target.database_url)
    bus.ensure_topics(topic_specs(target.kafka_partitions))
    start = time.perf_counter()
    try:
        report = load(bus, lines, blobs=engine)
    finally:
        bus.close()
        engine.dispose()
    print(f"load: {report.published} published, {report.already_present} already present, "
          f"{report.blobs} blobs stored, {len(report.rejected)} rejected, "
          f"{time.perf_counter() - start:.1f} s")


def sessions_of(lines: list[bytes]) -> tuple[dict, dict, dict[str, bytes]]:
    """run -> session ids; session -> (events, recorded state data or None); blob ref -> bytes."""
    import base64

    blobs: dict[str, bytes] = {}
    events: dict[str, list[LoggedEvent]] = defaultdict(list)
    states: dict[str, dict] = {}
    runs: dict[str, list[str]] = defaultdict(list)
    for line in lines:
        doc = orjson.loads(line)
        if line.startswith(BLOB_KEY):
            blobs[doc["roundsBlob"]] = base64.b64decode(doc["dataBase64"])
        elif doc["type"] == STATE:
            states[doc["subject"]] = doc["data"]
        else:
            events[doc["subject"]].append(LoggedEvent(doc["type"], doc["data"], doc.get("time")))
            if doc["type"] == p.SessionStarted.TYPE:
                runs[doc["data"].get("runId")].append(doc["subject"])
    return runs, {sid: (events[sid], states.get(sid)) for sid in events}, blobs


def rescored(source: Settings, target: Settings, runs: dict, sessions: dict) -> None:
    engine = make_engine(source.database_url)
    for run, ids in sorted(runs.items()):
        stored = sum(1 for sid in ids if (sessions[sid][1] or {}).get("stateRef"))
        inline = sum(1 for sid in ids if sessions[sid][1] is not None) - stored
        start = time.perf_counter()
        there = score_run(root_on(target), run, timeout_s=1800)
        seconds = time.perf_counter() - start
        here = load_report(engine, run, there.scorer_version)
        theirs = {s.session: s.score for s in here.sessions}
        differ = sum(1 for s in there.sessions if theirs.get(s.session) != s.score)
        unscorable = sum(1 for s in there.sessions if s.excluded == "unscorable")
        print(f"{run}: {len(ids)} sessions; state inline {inline}, stored {stored}, none (replayed) "
              f"{len(ids) - inline - stored}; unscorable {unscorable}; Avg here {here.metrics.avg} there "
              f"{there.metrics.avg}; scores differing {differ}; {seconds:.1f} s")
    engine.dispose()


def replay_check(sessions: dict, blobs: dict[str, bytes]) -> None:
    agree = disagree = with_gaps = 0
    examples: list[str] = []
    for sid, (events, data) in sorted(sessions.items()):
        if data is None:
            continue
        recorded = snapshot.from_data(data, blobs)
        replayed = replay_writes(events, blobs)
        with_gaps += bool(replayed.gaps)
        found = disagreements(recorded, replayed.writes) if recorded is not None else ["state blob missing"]
        if found or replayed.gaps:
            disagree += 1
            examples.extend(f"{sid}: {d}" for d in [*found, *replayed.gaps][:2])
        else:
            agree += 1
    print(f"replay vs recorded state: {agree} agree, {disagree} disagree ({with_gaps} with gaps)")
    for line in examples[:10]:
        print("  " + line)


def probe(target: Settings, patients: int) -> None:
    """Issue 38's search through a recorded session base, for the patients with the most references."""
    from fastapi.testclient import TestClient
    from sqlalchemy import text

    from services.fhir_api.backbone.wiring import BackboneSettings, install_event_backbone
    from tests.wiring import app_on

    engine = make_engine(target.database_url)
    with engine.connect() as conn:
        ids = conn.execute(text(
            "SELECT target_id FROM fhir_idx_reference WHERE target_type = 'Patient' GROUP BY target_id "
            "ORDER BY count(*) DESC LIMIT :n"), {"n": patients}).scalars().all()
    engine.dispose()
    bus = bus_on(target)
    app = app_on(target)
    wired = install_event_backbone(app, target, bus=bus, backbone=BackboneSettings(outbox_relay="off"))
    try:
        with TestClient(app) as client:
            for pid in ids:
                sid = client.post("/sessions", json={"now": "2300-01-01T00:00:00Z"}).json()["id"]
                start = time.perf_counter()
                answer = client.get(f"/sessions/{sid}/fhir/Specimen", params={
                    "subject": f"Patient/{pid}", "_revinclude": "Observation:specimen", "_count": "1000"})
                entries = len(answer.json().get("entry") or []) if answer.status_code == 200 else 0
                print(f"probe Patient/{pid}: HTTP {answer.status_code}, {entries} entries, "
                      f"{len(answer.content) / 1e6:.2f} MB, {time.perf_counter() - start:.1f} s")
        print(f"recorder: {wired.recorder.health.check()[1]}")
    finally:
        bus.close()
    log = io.BytesIO()
    dump(bus_on(target), [SESSIONS], log)
    refs = len(re.findall(rb'"resourcesRef"', log.getvalue()))
    print(f"responses whose id list is stored (resourcesRef) in the target's log: {refs}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--dump", type=Path, default=Path("sessions.jsonl"))
    parser.add_argument("--probe-patients", type=int, default=0)
    args = parser.parse_args()
    source, target = Settings(database_url=args.source), Settings(database_url=args.target)
    lines = dumped(source, args.dump)
    runs, sessions, blobs = sessions_of(lines)
    loaded(target, lines)
    rescored(source, target, runs, sessions)
    replay_check(sessions, blobs)
    if args.probe_patients:
        probe(target, args.probe_patients)


if __name__ == "__main__":
    main()
