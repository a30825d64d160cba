"""Event backbone throughput: publish, publish -> consume -> projection end to end, and replay, per backend.

    python benchmarks/bench_events.py            # Kafka, SQL log on SQLite and on PostgreSQL; 1 M events
    python benchmarks/bench_events.py --backend kafka --events 200000 --e2e-events 50000
    python benchmarks/bench_events.py --backend kafka --events 100000 --e2e-events 100000 \
        --replay-events 1000000 --broker-pid $(pgrep -f kafka.Kafka)

Kafka: --kafka-bootstrap / ROUNDS_KAFKA_BOOTSTRAP, else scripts/kafka.sh starts a broker (stopped at the end).
PostgreSQL: --postgres-url / ROUNDS_BENCH_POSTGRES_URL (a server URL; a fresh database is created in it),
else scripts/postgres.sh starts one. Kafka runs keep their projection in SQLite (--projection-db to change).

Phases per backend (fresh topics and a fresh database each):
1. publish: `--events` session events through `publish_chunks` in chunks of 2,000 (acks=all / committed; chunk
   n+1 is built and sent while chunk n is acknowledged), events/s;
2. end to end: a producer process publishes `--e2e-events` more while the transcript projection consumes
   them (exactly-once: projection rows, processed ids and positions in one transaction per batch); events/s
   from the first publish (the producer is connected and knows the topic's partitions before) until the
   projection holds them all (the runner's own count, no polling of the database); `--consumers N` runs the
   group as N processes (the default 1: see below);
3. replay: a fresh group rebuilds the transcript projection from the beginning of the topic (all events of
   1 and 2, topped up to `--replay-events` when that is larger) into fresh tables; seconds and events/s.
Each phase also prints CPU microseconds per event of its parts (the producer process with kafka-python's
sender thread, the consumer + projection process, the broker's JVM with --broker-pid): judge changes by these
when the cores are shared, as wall-clock rates then mostly measure the other load. The end-to-end phase also
prints each process's busy share of one core over the window and the rate its CPU per event allows on idle
cores: a process well below 100 % busy while the rate is below that cap is idling, not working.
Goals on Kafka: >= 20,000 events/s end to end; replay of 1 M events in under 2 minutes.

The end-to-end CPU per event of each process is also compared with what the same work cost alone (the
producer's in phase 1, the consumer's in the replay): a ratio well above 1 means the two processes slowed each
other (shared caches, a busy or slow host), which a rate measured in that run inherits.

Figures of every session (and why `--consumers 2` is slower on 2 cores) are in events/projections/README.md.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, func, select, text

from events import payloads as p
from events.bus import Bus, TopicSpec
from events.catalog import CATALOG
from events.envelope import CloudEvent
from events.projections.replay import replay
from events.projections.runner import ProjectionRunner
from events.projections.transcript import TranscriptProjection
from foundation.db import make_engine
from foundation.gcpause import gc_paused
from rounds.migrate import upgrade
from rounds.settings import Settings
from tests.wiring import bus_on

REPO = Path(__file__).resolve().parents[1]
CHUNK = 2000
# A session's EHR traffic: (type, data factory) cycled per session; light payloads so the bus is measured.
KINDS = (
    (
        p.EhrRequest.TYPE,
        lambda n: {
            "requestId": f"r{n}",
            "method": "GET",
            "url": "Observation",
            "query": {"patient": ["p1"], "code": ["2823-3"]},
        },
    ),
    (
        p.EhrResponse.TYPE,
        lambda n: {"requestId": f"r{n}", "status": 200, "latencyMs": 4.2, "bodyDigest": "sha256:" + "0" * 64},
    ),
    (
        p.ToolCall.TYPE,
        lambda n: {"callId": f"c{n}", "name": "fhir_search", "arguments": {"q": "potassium"}},
    ),
)
SCHEMAS = {kind: CATALOG.spec(kind).schema_uri() for kind, _ in KINDS}


def make_events(start: int, count: int, sessions: int, tag: str) -> list[tuple[str, CloudEvent]]:
    """Envelopes validated on construction; the bus validates their payloads at publish, as in production.

    (Plain construction validates the envelope in pydantic-core and costs less than `model_construct`.)"""
    out = []
    for n in range(start, start + count):
        kind, data = KINDS[n % len(KINDS)]
        sid = f"s-{tag}-{n % sessions}"
        out.append(
            (
                sid,
                CloudEvent(
                    id=f"{tag}-{n}",
                    source="/bench",
                    specversion="1.0",
                    type=kind,
                    time="2026-11-30T10:00:00Z",
                    subject=sid,
                    datacontenttype="application/json",
                    dataschema=SCHEMAS[kind],
                    sequence=n // sessions + 1,
                    correlationid=None,
                    causationid=None,
                    data=data(n),
                ),
            )
        )
    return out


def publish(bus: Bus, topic: str, start: int, count: int, sessions: int, tag: str) -> float:
    """Chunks built and published through `publish_chunks`: chunk n+1 is built, checked and sent while chunk
    n's acknowledgements come back (acks=all), as a streaming producer would."""
    began = time.perf_counter()
    chunks = (
        make_events(offset, min(CHUNK, start + count - offset), sessions, tag)
        for offset in range(start, start + count, CHUNK)
    )
    with gc_paused():  # a batch job: the collector off while it builds and sends (foundation/gcpause.py)
        for _ in bus.publish_chunks(topic, chunks):
            pass
    return time.perf_counter() - began


def _producer_process(
    settings: dict, topic: str, start: int, count: int, sessions: int, tag: str, ready, go, cpu, wall
) -> None:
    bus = bus_on(Settings(**settings))
    bus.partitions(topic)  # connected, metadata known: none of that in the timed part
    ready.set()  # imports and connections done: the timed part starts at `go`
    go.wait()
    began = time.process_time()
    wall.value = publish(bus, topic, start, count, sessions, tag)
    cpu.value = time.process_time() - began  # every thread of the process (kafka-python's sender too)
    bus.close()


def _member_process(
    settings: dict, projection_db: str, topic: str, tag: str, batch_size: int, joined, go, stop, cpu, applied
) -> None:
    """Another member of the projection's consumer group (--consumers): the same projection, group and
    database; the group splits the partitions, fenced positions keep the effect exactly-once."""
    bus = bus_on(Settings(**settings))
    runner = ProjectionRunner(bus, make_engine(projection_db), TranscriptProjection(topics=(topic,)),
                              batch_size=batch_size, deadletter_topic=f"bench.{tag}.deadletter",
                              poll_timeout_s=0.1)
    with runner:
        while not runner.consumer.assignment():
            runner.poll_once()
        joined.set()
        while not go.is_set():
            runner.poll_once()
        began, done = time.process_time(), runner.stats.applied
        while not stop.is_set():
            if runner.poll_once().applied:
                applied.value = runner.stats.applied - done
        cpu.value = time.process_time() - began
    bus.close()


def utilisation(wall_s: float, events: int, **cpu_s: float | None) -> str:
    """Where the e2e window's wall time went: each process's CPU as a share of one core over the window,
    and the rate the measured CPU per event would allow if the cores did nothing else."""
    parts = {label.replace("_", "+"): s for label, s in cpu_s.items() if s is not None}
    busy = ", ".join(f"{label} {s / wall_s:.0%}" for label, s in parts.items())
    total = sum(parts.values()) / max(events, 1)
    cores = os.cpu_count() or 1
    return (f"busy (share of one core over {wall_s:.1f}s): {busy}; CPU {total * 1e6:.0f} us/event in all ->"
            f" at most {cores / total:,.0f}/s on {cores} idle cores")


def broker_cpu_s(pid: int | None) -> float:
    """utime + stime of the broker's JVM from /proc (0 when no --broker-pid was given: not printed)."""
    if not pid:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_note(events: int, **seconds: float | None) -> str:
    """CPU microseconds per event of each part ("CPU us/event: producer 52.1, broker 9.8"); None: left out."""
    per_event = {
        label.replace("_", "+"): s / max(events, 1) * 1e6 for label, s in seconds.items() if s is not None
    }
    parts = ", ".join(f"{label} {us:.1f}" for label, us in per_event.items())
    return f"CPU us/event: {parts}"


def entries(engine, projection: TranscriptProjection) -> int:
    with engine.connect() as conn:
        return conn.execute(
            select(func.count()).select_from(projection.tables["transcript_entries"])
        ).scalar_one()


def run_backend(
    name: str, settings: Settings, projection_db: str, args: argparse.Namespace
) -> dict[str, float]:
    upgrade(settings.database_url)
    if projection_db != settings.database_url:
        upgrade(projection_db)
    bus = bus_on(settings)
    tag = uuid.uuid4().hex[:8]
    topic = f"bench.{tag}.sessions"
    bus.ensure_topics([TopicSpec(topic, args.partitions), TopicSpec(f"bench.{tag}.deadletter", 1)])
    engine = make_engine(projection_db)
    figures: dict[str, float] = {}

    cpu, broker = time.process_time(), broker_cpu_s(args.broker_pid)
    seconds = publish(bus, topic, 0, args.events, args.sessions, tag)
    cpu, broker = time.process_time() - cpu, broker_cpu_s(args.broker_pid) - broker
    figures["publish events/s"] = args.events / seconds
    alone = {"producer": cpu / args.events}  # CPU per event of each part when it ran alone
    print(
        f"[{name}] publish: {args.events:,} events in {seconds:.1f}s = {figures['publish events/s']:,.0f}/s"
        f" ({cpu_note(args.events, producer=cpu, broker=broker if args.broker_pid else None)})",
        flush=True,
    )

    # End to end: the live projection first catches up with phase 1 (not timed), then a producer process
    # publishes new events while it consumes; timed from the first publish until all are projected.
    projection = TranscriptProjection(topics=(topic,))
    runner = ProjectionRunner(
        bus,
        engine,
        projection,
        batch_size=args.batch_size,
        deadletter_topic=f"bench.{tag}.deadletter",
        poll_timeout_s=0.5,
    )
    with runner:
        caught = time.perf_counter()
        runner.run(until_caught_up=True)
        print(
            f"[{name}] projection caught up with {args.events:,} events in "
            f"{time.perf_counter() - caught:.1f}s",
            flush=True,
        )
        target = args.events + args.e2e_events
        ctx = multiprocessing.get_context("spawn")
        ready, go, stop = ctx.Event(), ctx.Event(), ctx.Event()
        members = []  # (process, joined, cpu, applied) of the other group members (--consumers)
        for _ in range(args.consumers - 1):
            joined, member_cpu, applied = ctx.Event(), ctx.Value("d", 0.0), ctx.Value("q", 0)
            member = ctx.Process(
                target=_member_process,
                args=(settings.model_dump(), projection_db, topic, tag, args.batch_size, joined, go, stop,
                      member_cpu, applied),
            )
            member.start()
            members.append((member, joined, member_cpu, applied))
        deadline = time.monotonic() + 120
        while not all(joined.is_set() for _, joined, _, _ in members):  # the group rebalances (untimed)
            runner.poll_once()
            if time.monotonic() > deadline:
                raise RuntimeError("the other consumer group members did not get partitions")
        if members:
            print(f"[{name}] consumer group of {args.consumers} processes; this one reads partitions "
                  f"{sorted(tp.partition for tp in runner.consumer.assignment())} of {args.partitions}",
                  flush=True)
        producer_cpu, producer_wall = ctx.Value("d", 0.0), ctx.Value("d", 0.0)
        producer = ctx.Process(
            target=_producer_process,
            args=(
                settings.model_dump(),
                topic,
                args.events,
                args.e2e_events,
                args.sessions,
                tag,
                ready,
                go,
                producer_cpu,
                producer_wall,
            ),
        )
        producer.start()
        if not ready.wait(120):
            raise RuntimeError("the producer process did not start")
        go.set()
        began = time.perf_counter()
        cpu, broker = time.process_time(), broker_cpu_s(args.broker_pid)
        batches, applied_before = runner.stats.batches, runner.stats.applied
        runner.poll_timeout_s = 0.02  # an idle poll must not hide the moment the other members finish
        while runner.stats.applied - applied_before + sum(a.value for *_, a in members) < args.e2e_events:
            runner.poll_once()
            for process in (producer, *(m[0] for m in members)):
                if not process.is_alive() and process.exitcode:
                    raise RuntimeError(f"a bench process failed with exit code {process.exitcode}")
        seconds = time.perf_counter() - began
        cpu, broker = time.process_time() - cpu, broker_cpu_s(args.broker_pid) - broker
        stop.set()
        for member, *_ in members:
            member.join()
        cpu += sum(c.value for _, _, c, _ in members)
        broker = broker if args.broker_pid else None
        batches, here = runner.stats.batches - batches, runner.stats.applied - applied_before
        producer.join()
    assert entries(engine, projection) == target, "projection lost or doubled events"
    together = {"producer": producer_cpu.value, "consumer+projection": cpu}
    together = {part: seconds_ / args.e2e_events for part, seconds_ in together.items()}
    figures["end-to-end events/s"] = args.e2e_events / seconds
    print(
        f"[{name}] end to end (publish -> consume -> projection): {args.e2e_events:,} events in "
        f"{seconds:.1f}s = {figures['end-to-end events/s']:,.0f}/s ("
        f"{cpu_note(args.e2e_events, producer=producer_cpu.value, consumer_projection=cpu, broker=broker)};"
        f" {batches:,} projection batches of {here / max(batches, 1):,.0f} events on average"
        f"{' in this process' if args.consumers > 1 else ''})",
        flush=True,
    )
    print(
        f"[{name}] end to end: producer done after {producer_wall.value:.1f}s; "
        + utilisation(seconds, args.e2e_events, producer=producer_cpu.value, consumer_projection=cpu,
                      broker=broker),
        flush=True,
    )

    if args.replay_events > target:  # top the topic up (not timed) so that the replay reads exactly that many
        seconds = publish(bus, topic, target, args.replay_events - target, args.sessions, tag)
        more = args.replay_events - target
        print(f"[{name}] published {more:,} more for the replay in {seconds:.1f}s", flush=True)
    cpu = time.process_time()
    result = replay(bus, engine, TranscriptProjection, topics=(topic,), batch_size=args.batch_size)
    cpu = time.process_time() - cpu
    figures["replay seconds"] = result.seconds
    alone["consumer+projection"] = cpu / max(result.stats.applied, 1)
    figures["replay events"] = result.stats.applied
    print(
        f"[{name}] replay: {result.stats.applied:,} events in {result.seconds:.1f}s "
        f"= {result.events_per_s:,.0f}/s ({cpu_note(result.stats.applied, consumer_projection=cpu)};"
        f" into {', '.join(result.tables)})",
        flush=True,
    )
    ratios = ", ".join(f"{part} {together[part] * 1e6:.1f} / {alone[part] * 1e6:.1f} us = "
                       f"{together[part] / alone[part]:.2f}x" for part in together if alone[part] > 0)
    print(f"[{name}] CPU per event in the end-to-end phase / alone: {ratios}", flush=True)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(
        f"[{name}] peak memory of this process (publisher, live projection, replay): {peak_mib:,.0f} MiB"
    )
    bus.close()
    engine.dispose()
    return figures


# -- services ------------------------------------------------------------------------------------------------
def _script(name: str, action: str, env: dict[str, str]) -> str:
    proc = subprocess.run(
        [str(REPO / "scripts" / name), action],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if proc.returncode != 0:
        raise SystemExit(f"scripts/{name} {action} failed:\n{proc.stderr}")
    return proc.stdout


def postgres_db(server_url: str, name: str, action: str) -> str:
    """CREATE or DROP the benchmark's own database on the server; returns its URL."""
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(
            text(
                f'CREATE DATABASE "{name}"'
                if action == "create"
                else f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
            )
        )
    admin.dispose()
    return f"{server_url.rpartition('/')[0]}/{name}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["kafka", "sql-sqlite", "sql-postgres", "all"], default="all")
    parser.add_argument("--events", type=int, default=1_000_000, help="published in phase 1 (and replayed)")
    parser.add_argument("--e2e-events", type=int, default=200_000, help="published while the projection runs")
    parser.add_argument(
        "--replay-events",
        type=int,
        default=0,
        help="events the replay reads: the topic is topped up (untimed) when phases 1 and 2 published fewer",
    )
    parser.add_argument("--sessions", type=int, default=1000, help="distinct session keys")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=5000, help="records per projection transaction")
    parser.add_argument(
        "--consumers", type=int, default=1,
        help="processes in the projection's consumer group in the end-to-end phase (at most --partitions)",
    )
    parser.add_argument("--kafka-bootstrap", default=os.environ.get("ROUNDS_KAFKA_BOOTSTRAP"))
    parser.add_argument("--postgres-url", default=os.environ.get("ROUNDS_BENCH_POSTGRES_URL"))
    parser.add_argument("--projection-db", default=None, help="projection database for the Kafka run")
    parser.add_argument("--broker-pid", type=int, default=None, help="the broker JVM's pid: report its CPU")
    args = parser.parse_args()
    if min(args.events, args.e2e_events, args.sessions, args.partitions, args.batch_size, args.consumers) < 1:
        parser.error("counts must be >= 1")
    if args.consumers > args.partitions:
        parser.error("--consumers must be <= --partitions (a member without a partition idles)")
    backends = ["kafka", "sql-sqlite", "sql-postgres"] if args.backend == "all" else [args.backend]
    tmp = Path(tempfile.mkdtemp(prefix="bench-events-"))
    started: list[tuple[str, dict[str, str]]] = []
    results: dict[str, dict[str, float]] = {}
    try:
        for backend in backends:
            sqlite_url = f"sqlite:///{tmp / f'{backend}.sqlite'}"
            if backend == "kafka":
                if not args.kafka_bootstrap:
                    env = {"KAFKA_STATE_DIR": str(tmp / "kafka")}
                    args.kafka_bootstrap = re.search(r"BOOTSTRAP=(\S+)", _script("kafka.sh", "start", env))[1]
                    started.append(("kafka.sh", env))
                settings = Settings(
                    database_url=sqlite_url, bus="kafka", kafka_bootstrap=args.kafka_bootstrap
                )
                results[backend] = run_backend(backend, settings, args.projection_db or sqlite_url, args)
            elif backend == "sql-sqlite":
                results[backend] = run_backend(backend, Settings(database_url=sqlite_url), sqlite_url, args)
            else:
                if not args.postgres_url:
                    env = {"PG_STATE_FILE": str(tmp / "pg-state")}
                    args.postgres_url = re.search(
                        r"DATABASE_URL=(\S+)", _script("postgres.sh", "start", env)
                    )[1]
                    started.append(("postgres.sh", env))
                name = f"bench_{uuid.uuid4().hex[:8]}"
                url = postgres_db(args.postgres_url, name, "create")
                try:
                    results[backend] = run_backend(backend, Settings(database_url=url), url, args)
                finally:
                    postgres_db(args.postgres_url, name, "drop")
    finally:
        for script, env in started:
            _script(script, "stop", env)
        shutil.rmtree(tmp, ignore_errors=True)  # SQLite logs and projections (hundreds of MB for 1 M events)
    print(f"\n{'backend':<14}{'publish/s':>12}{'end-to-end/s':>15}{'replay s':>10}{'replayed':>11}")
    for backend, f in results.items():
        print(
            f"{backend:<14}{f['publish events/s']:>12,.0f}{f['end-to-end events/s']:>15,.0f}"
            f"{f['replay seconds']:>10.1f}{f['replay events']:>11,.0f}"
        )
    print(f"(load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
