"""Re-scoring 10,000 ended sessions, measured: `rounds score --run RUN` over a log of 10,000 sessions copied
from a small real run, where no sandbox exists (the scorer reads each session's recorded
`rounds.sandbox.state`, as on a log loaded elsewhere).

    python benchmarks/bench_rescore.py [--sessions 10000] [--demo-sessions 16] [--workers N]

1. A small real run, recorded once: `rounds demo` (synthetic record, built scenarios, `baseline`, `oracle`
   and `weak` sessions in EN and ZH through the simulator, scored: each session's log holds its sandbox
   state).
2. Its sessions' events (`rounds.sessions`: messages, EHR and tool calls, start, end, recorded sandbox state)
   are copied in log order, round robin over the recorded sessions, until `--sessions` sessions: each copy
   under a new session id, new event ids and one new run id, into the embedded SQL log of a fresh SQLite
   database that has neither the sandboxes nor the record.
3. `python -m rounds.cli score --run RUN [--workers N]` in a child process (default: the command's own choice
   of members, one per partition up to the cores + 1), timed: wall seconds, the CPU seconds of it and its
   members, sessions, turns, turns/s; and the Avg of the copies beside the Avg of the sessions they copy (the
   same scorer on the same logs: they must agree).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from events import payloads as p  # noqa: E402
from events.archive import read_log  # noqa: E402
from events.topics import SESSIONS, topic_specs  # noqa: E402
from rounds.demo import run_demo  # noqa: E402
from rounds.migrate import upgrade  # noqa: E402
from rounds.settings import Settings  # noqa: E402
from tests.wiring import bus_on

CHUNK = 5000  # events per publish


def recorded_sessions(url: str) -> dict[str, list[dict]]:
    """Each session's events on rounds.sessions (structured-mode JSON, log order), sessions with a recorded
    sandbox state only (the others could not be scored without their sandbox)."""
    bus = bus_on(Settings(database_url=url))
    sessions: dict[str, list[dict]] = {}
    try:
        for record in read_log(bus, [SESSIONS]):
            if record.event is not None:
                sessions.setdefault(record.key, []).append(orjson.loads(record.raw))
    finally:
        bus.close()
    return {sid: events for sid, events in sessions.items()
            if any(e["type"] == p.SandboxState.TYPE for e in events)}


def copy_events(events: list[dict], session_id: str, run: str) -> list[tuple[str, bytes]]:
    """One session's events under a new session id, new event ids and `run`."""
    out = []
    for event in events:
        doc = {**event, "id": uuid.uuid4().hex, "subject": session_id}
        data = doc.get("data")
        if isinstance(data, dict) and "runId" in data:
            doc["data"] = {**data, "runId": run}
        out.append((session_id, orjson.dumps(doc)))
    return out


def replicate(source: dict[str, list[dict]], url: str, count: int, run: str) -> tuple[int, list[str]]:
    """`count` copies of the recorded sessions into `url`'s log; returns (events, source session per copy)."""
    bus = bus_on(Settings(database_url=url))
    bus.ensure_topics(topic_specs(3))
    order = sorted(source)
    copied: list[str] = []
    published, chunk = 0, []
    try:
        for i in range(count):
            original = order[i % len(order)]
            copied.append(original)
            chunk += copy_events(source[original], uuid.uuid4().hex, run)
            if len(chunk) >= CHUNK:
                bus.publish_raw_many(SESSIONS, chunk)
                published, chunk = published + len(chunk), []
        if chunk:
            bus.publish_raw_many(SESSIONS, chunk)
            published += len(chunk)
    finally:
        bus.close()
    return published, copied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--demo-sessions", type=int, default=16, help="scenarios of the recorded run")
    parser.add_argument("--profile", type=Path, help="write the child's cProfile statistics to this file")
    parser.add_argument("--workers", type=int, help="members of the re-score's group")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-rescore-") as tmp:
        work = Path(tmp)
        source_url = f"sqlite:///{work / 'recorded.sqlite'}"
        started = time.perf_counter()
        demo = run_demo(8, 1, None, work / "w", source_url, out=work / "out", sessions=args.demo_sessions)
        source = recorded_sessions(source_url)
        by_session = {s.session: s.turns for report in demo.reports.values() for s in report.sessions
                      if s.score is not None}
        print(f"recorded run: {len(source)} sessions with their sandbox state "
              f"({sum(map(len, source.values()))} events) in {time.perf_counter() - started:.1f} s")

        url = f"sqlite:///{work / 'copies.sqlite'}"
        upgrade(url)
        run = f"rescore-{uuid.uuid4().hex[:6]}"
        started = time.perf_counter()
        events, copied = replicate(source, url, args.sessions, run)
        size = Path(url.removeprefix("sqlite:///")).stat().st_size / 2**20
        print(f"copied: {len(copied)} sessions, {events} events into a fresh SQLite log ({size:.0f} MiB) in "
              f"{time.perf_counter() - started:.1f} s")

        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        load = os.getloadavg()[0]
        started = time.perf_counter()
        profile = ["-m", "cProfile", "-o", str(args.profile)] if args.profile else []
        command = [sys.executable, *profile, "-m", "rounds.cli", "score", "--run", run, "--database-url", url,
                   *(["--workers", str(args.workers)] if args.workers else [])]
        done = subprocess.run(command, capture_output=True, text=True,
                              env={**os.environ, "ROUNDS_DATABASE_URL": url})
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"rounds score failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        turns = [t.score for sid in copied for t in by_session.get(sid, [])]
        print(f"rounds score --run: {summary['sessions']} sessions ({summary['excluded_sessions']} "
              f"excluded), "
              f"{summary['turns']} turns in {wall:.1f} s = {summary['turns'] / wall:,.0f} turns/s, "
              f"{summary['sessions'] / wall:,.0f} sessions/s; CPU {cpu:.1f} s "
              f"({cpu / max(summary['sessions'], 1) * 1000:.1f} ms per session); "
              f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}")
        print(f"Avg {summary['avg']:.4f}; the same turns as scored live at recording: "
              f"{sum(turns) / max(len(turns), 1):.4f} over {len(turns)} turns")


if __name__ == "__main__":
    main()
