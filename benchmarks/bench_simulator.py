"""Simulator throughput: PhysAssistBench's size (324 sessions x 4 physician turns) with an assistant (default
`baseline`), 16 sessions at once, on the embedded default (SQLite + SQL log, FHIR app in-process) or on
PostgreSQL + Kafka.

    # prepare once: the MIMIC-IV demo mapped, loaded and turned into scenarios (minutes on SQLite)
    python benchmarks/bench_simulator.py --prepare --database-url sqlite:///.cache/bench_sim/rounds.sqlite
    python benchmarks/bench_simulator.py --database-url sqlite:///.cache/bench_sim/rounds.sqlite
    # PostgreSQL + Kafka (ROUNDS_KAFKA_BOOTSTRAP set; the store prepared the same way on PostgreSQL)
    ROUNDS_BUS=kafka python benchmarks/bench_simulator.py --database-url postgresql+psycopg://...

The scenario file's sessions are taken in order; when it has fewer than `--sessions`, they repeat as further
trials (each a separate sandbox), so the run always has the requested number of sessions. Prints wall time,
sessions/s, turns, events written to the session log (the simulator's and the FHIR server's EHR events) and
events/s, and the sessions by end reason.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from sqlalchemy import func, select

from contracts.languages import LANGUAGES

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from events.sequences import SEQUENCES  # noqa: E402
from foundation.db import make_engine  # noqa: E402
from rounds.settings import Settings, get_settings  # noqa: E402
from services.simulator.orchestrator.entry import RunOptions, run_scenarios  # noqa: E402
from services.simulator.orchestrator.jobs import plan, read_scenarios  # noqa: E402
from services.simulator.orchestrator.session_loop import SessionJob  # noqa: E402
from tests.wiring import migrated  # noqa: E402

DEMO = REPO.parent / "shared" / "data" / "mimic-iv-demo"


def prepare(database_url: str, scenarios: Path) -> None:
    """Map the MIMIC-IV demo, load it into `database_url`, build the scenarios from it."""
    work = scenarios.parent
    env = {**os.environ, "ROUNDS_DATABASE_URL": database_url}

    def rounds(*args: str) -> None:
        subprocess.run([sys.executable, "-m", "rounds.cli", *args], check=True, env=env, cwd=REPO)

    rounds("map", "--mimic", str(DEMO), "--out", str(work / "fhir"))
    rounds("db", "upgrade")
    rounds("load", "--ndjson", str(work / "fhir"))
    rounds("scenarios", "build", "--out", str(scenarios), "--sessions", "324")


def jobs_for(path: Path, sessions: int, language: str) -> list[SessionJob]:
    lines = read_scenarios(path)
    out: list[SessionJob] = []
    trial = 0
    while len(out) < sessions:
        for job in plan(lines, 1, (language,), "implicit"):
            if len(out) == sessions:
                break
            out.append(SessionJob(job.scenario, job.definition, job.digest, trial, job.language, job.variant))
        trial += 1
    return out


def session_events(database_url: str, session_ids: list[str]) -> int:
    """Events written to the sessions' logs (the shared per-session sequence counters)."""
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            query = select(func.sum(SEQUENCES.c.last_sequence)).where(SEQUENCES.c.session_id.in_(session_ids))
            return int(conn.execute(query).scalar_one() or 0)
    finally:
        engine.dispose()


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--database-url", default=get_settings().database_url)
    parser.add_argument("--scenarios", type=Path, default=REPO / ".cache" / "bench_sim" / "scenarios.jsonl")
    parser.add_argument("--prepare", action="store_true", help="map + load the demo and build the scenarios")
    parser.add_argument("--sessions", type=int, default=324)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--assistant", default="baseline")
    parser.add_argument("--language", default="en", choices=list(LANGUAGES))
    parser.add_argument("--fhir-base", default=None, help="a separate `rounds serve` (default: in-process)")
    args = parser.parse_args()
    if args.prepare:
        args.scenarios.parent.mkdir(parents=True, exist_ok=True)
        prepare(args.database_url, args.scenarios)
    settings = Settings(**{**get_settings().model_dump(), "database_url": args.database_url})
    jobs = jobs_for(args.scenarios, args.sessions, args.language)
    run_id = f"bench-{time.strftime('%H%M%S')}-{os.getpid()}"
    started, cpu = time.perf_counter(), time.process_time()
    summary = asyncio.run(run_scenarios(jobs, args.assistant, RunOptions(
        run_id, concurrency=args.concurrency, fhir_base=args.fhir_base, resume=False), migrated(settings)))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    ids = [o.session_id for o in summary.outcomes if o.session_id]
    events = session_events(args.database_url, ids)
    turns = sum(len(j.scenario.turns) for j in jobs)
    print(f"backend            {settings.bus} log, {args.database_url.split(':', 1)[0]} store, "
          f"{'rounds serve at ' + args.fhir_base if args.fhir_base else 'FHIR app in-process'}")
    print(f"assistant          {args.assistant}, concurrency {args.concurrency}")
    print(f"sessions           {len(summary.outcomes)} ({len({j.scenario.id for j in jobs})} scenarios), "
          f"{turns} physician turns, {summary.turns} answered")
    print(f"wall time          {wall:.1f} s ({len(summary.outcomes) / wall:.1f} sessions/s), "
          f"this process's CPU {cpu:.1f} s (the host's load: {os.getloadavg()[0]:.1f})")
    print(f"events             {events} ({summary.events} simulator + {events - summary.events} EHR), "
          f"{events / wall:,.0f} events/s")
    print(f"end reasons        {dict(Counter(o.reason for o in summary.outcomes))}")
    for error, n in Counter(o.error for o in summary.outcomes if o.reason != "completed").most_common(5):
        print(f"  {n} x {str(error)[:400]}")


if __name__ == "__main__":
    main()
