"""FHIR API benchmark: bulk-load the mapped MIMIC demo into PostgreSQL, then drive a fixed mix of reads and
patient-scoped searches with concurrent clients against `rounds serve`, and print the figures.

    python benchmarks/bench_fhir_api.py [--ndjson DIR] [--database-url URL] [--clients 16] [--seconds 30]
                                        [--workers 2] [--kinds read-patient,labs,...]
    python benchmarks/bench_fhir_api.py --loaded postgresql+psycopg://…/bench_api   # skip map and load
    python benchmarks/bench_fhir_api.py --loaded sqlite:///demo.sqlite --figures everything-first \
                                        --server-code ../before   # some figures; another checkout

Without --ndjson the demo is mapped first (`rounds map --mimic ../shared/data/mimic-iv-demo`); without
--database-url a throwaway PostgreSQL is started with scripts/postgres.sh. Prints resources/s for the load
and, for the API: req/s, p50, p95, p99 (ms) overall and per kind, and the CPU µs per request of the client,
the server's processes and the PostgreSQL backends (user + kernel; the three share the machine's cores).

The client is a lean keep-alive HTTP/1.1 client on asyncio streams (one connection per simulated client): it
checks every status, reads every body in full and counts non-FHIR bodies as errors; before the timed run every
distinct request of the mix is answered once and checked (right resource, right patient, right code, sorted,
after the date). The mix is fixed and seeded: 3 patient reads, 2 observation reads, 3
`Observation?patient&code&date=ge&_sort=-date`, 1 `Encounter?patient`, 1 `Condition?patient`. The `session`
figure sends the same mix through one session per client (`/sessions/<id>/fhir`), so every exchange is
recorded on the event log (ROUNDS_BUS; the SQL log in the same database by default) before its answer.

Figures (2-core machine shared with three other engineers' work, load average 4–8, so CPU per request is the
comparable figure; `rounds serve` at the session's start vs now, back to back, same client, 12 s each):
    start: 276–315 req/s, p50 31–41 ms, p99 245–309 ms; server 2,600 µs CPU/request (up to 3,800 under more
           load; PostgreSQL not measurable: it started and ended a backend for ~6 % of requests)
    now:   821–882 req/s, p50 12–13 ms, p99 86–102 ms; server 780–850 µs, PostgreSQL 640–680 µs,
           client ≈ 125 µs CPU/request (8 %)
Where the time went, in order of what was fixed: building SQLAlchemy statements per search (now cached per
search shape), PostgreSQL backends opened and closed per request (more threads than pooled connections),
FastAPI routing and dependency injection (fast lane for GET read/search), SQLAlchemy's execution layer
(prebuilt statements run through psycopg), a ping round trip per request (read pool without pings, reads
retry).
What is left per request is mostly PostgreSQL planning and running the labs search (≈ 0.6 + 0.8 ms on a quiet
moment), the thread hop into the store and uvicorn/Starlette's own layers.
The full run (fresh database: load, VACUUM ANALYZE, API) on the same busy machine: 793 req/s, p50 11.4 ms,
p99 125 ms (labs p99 166 ms, reads p99 70 ms); server 875, PostgreSQL 1,100, client 142 µs CPU/request.

Third pass (index layout: int8 parameter keys, shared rows, token rows keyed by patient; reads and searches on
the event loop; frozen heap). Full runs (fresh database, 20 s of API), the code at that pass's start and now,
alternating, in one window when the machine ran about half as fast as earlier the same day (a pure-CPU probe
took 1.5-1.8x longer; figures are comparable only within the window):
    start: load 7,089 / 7,188 resources/s; 588 / 591 req/s, p99 107 / 120 ms; CPU/request 2,785 µs
           (server 1,317-1,339, PostgreSQL 1,267, client 182-200)
    now:   load 9,060 / 9,318 resources/s; 766 / 726 req/s, p99 81 / 93 ms; CPU/request 2,106-2,175 µs
           (server 1,010-1,064, PostgreSQL 857-992, client 173-185)
i.e. load 1.29x, requests/s 1.26x, CPU per request -23 %. Earlier, on the faster machine, the start code
loaded 12,810/s with p99 62-74 ms, and the new code loaded 16,524/s (partial index changes).
The labs search's PostgreSQL time (same session, warm): planning 0.65 + execution 0.6 ms (was 0.8 + 1.7-2.2):
the token index now reads the ~20 entries of the patient's code instead of ~3,000 (all patients').
`--threads N` lowers the store threads per worker (serve --threads); with reads and searches on the event
loop they serve only writes and _include, and 3 vs 2 workers made no difference beyond noise.

Fourth pass (admission control, keyset paging, cheaper links and reads), quiet fast machine, 17:02-17:18.
Full runs (fresh database, 20 s of API), alternating now / that pass's start (e0c3853):
    start: load 14,423 / 13,253 resources/s; 1,145 / 1,065 req/s, p99 47.9 / 79.8 ms
    now:   load 16,539 / 15,817 resources/s; 1,128 / 1,082 req/s, p99 52.6 / 55.3 ms (4 at once per worker)
On one loaded database, alternating, default settings (now: 2 requests at once per worker):
    start: 1,297 / 1,272 / 1,241 req/s, p99 63.4 / 43.3 / 70.8 ms
    now:   1,186 / 1,239 / 1,296 req/s, p99 46.6 / 47.2 / 38.1 ms (p95 20-30 ms, labs p99 within 2 ms of it)
`--concurrency N` (serve --concurrency, ROUNDS_API_CONCURRENCY): requests in progress at once per worker, the
rest wait first come, first served. p99 by N, alternating runs: 2 -> 41.0-52.0 ms, 3 -> 51.9-53.4, 4 ->
52.6-58.4, no limit -> 58.9-63.9, at 1,000-1,200 req/s throughout: with every request in progress sharing the
CPU, the slowest (labs of the patients with most data) were stretched most.

Fifth pass (bulk load: cache-hot extraction, workers reading their own byte ranges, slimmer index rows, no
`_lastUpdated` rows, INCLUDE columns, the resource key built after an initial load, one loader process more
than cores). Full runs, quiet window, alternating with that pass's start (d9be8f2):
    start: load 15,615 resources/s; 913 req/s, p50 16.2 ms, p99 49.2 ms; CPU/request 1,650 µs
    now:   load 23,411 resources/s; 1,180 req/s, p50 13.0 ms, p99 41.8 ms; CPU/request 1,438 µs
           (server 585, PostgreSQL 726, client 127: the narrower index entries and bytewise keys made reads
           and searches cheaper too)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qsl

import httpx
from fhir_kinds import FIGURES, check_extra, extra_work
from loadgen import Connection, CpuMeter
from sqlalchemy import create_engine, text

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO.parent / "shared" / "data" / "mimic-iv-demo"
# kind -> (weight, path template); the fixed mix of reads and patient-scoped searches
MIX = {
    "read-patient": (3, "/Patient/{pid}"),
    "read-observation": (2, "/Observation/{oid}"),
    "labs": (3, "/Observation?patient={pid}&code={code}&date=ge{day}&_sort=-date"),
    "encounters": (1, "/Encounter?patient={pid}"),
    "conditions": (1, "/Condition?patient={pid}"),
}
REQUEST_TIMEOUT = 30.0


def _run(args: list[str], **env: str) -> str:
    proc = subprocess.run(
        args, cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, check=False
    )
    if proc.returncode:
        sys.exit(f"{' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def _admin(server_url: str, statement: str) -> None:
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(statement))
    admin.dispose()


def fresh_database(server_url: str) -> tuple[str, str]:
    name = f"bench_fhir_api_{uuid.uuid4().hex[:10]}"
    _admin(server_url, f'CREATE DATABASE "{name}"')
    return name, f"{server_url.rpartition('/')[0]}/{name}"


def load(database_url: str, folder: Path) -> None:
    from rounds.migrate import upgrade
    from tests.wiring import load_on

    upgrade(database_url)
    report = load_on(database_url, folder)  # default loader processes: CPU count + 1
    # What autovacuum would eventually provide: planner statistics, and the visibility map without which every
    # index-only scan of the index tables also reads the heap (PostgreSQL CPU per search about doubles).
    started = time.perf_counter()
    _admin(database_url, "VACUUM ANALYZE")
    print(f"vacuum analyze: {time.perf_counter() - started:.1f} s (not part of the load figure)")
    rate = report.resources / report.seconds if report.seconds else 0.0
    print(
        f"load: {report.resources:,} resources in {report.seconds:.1f} s = {rate:,.0f} resources/s "
        f"(errors {report.errors}, skipped {report.skipped})"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    database_url: str,
    workers: int,
    threads: int | None = None,
    concurrency: int | None = None,
    code: Path = REPO,
) -> tuple[subprocess.Popen, str]:
    """`rounds serve` from the checkout `code` (another one times that code against the same database)."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rounds.cli",
            "serve",
            "--database-url",
            database_url,
            "--port",
            str(port),
            "--workers",
            str(workers),
            *(["--threads", str(threads)] if threads else []),
            *(["--concurrency", str(concurrency)] if concurrency is not None else []),
            "--no-migrate",
        ],
        cwd=code,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "ROUNDS_BASE_URL": "", "PYTHONPATH": str(code)},
    )
    base = f"http://127.0.0.1:{port}/fhir"
    deadline = time.monotonic() + 300  # generous: imports are slow on a busy 2-core machine
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/metadata", timeout=5).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.3)
        if proc.poll() is not None:
            sys.exit(f"rounds serve exited: {proc.stderr.read().decode()[-3000:]}")
    proc.terminate()
    proc.wait(timeout=30)
    sys.exit("rounds serve did not come up")


def workload(base: str, kinds: list[str], size: int = 400) -> list[tuple[str, str]]:
    """A fixed, seeded list of (kind, request path) drawn from the loaded data."""
    with httpx.Client(base_url=base, timeout=120) as c:
        patients = all_patients(base)
        labs = []
        for pid in patients[:40]:
            page = c.get("/Observation", params={"patient": pid, "_count": 20}).json()
            for e in page.get("entry", []):
                obs = e["resource"]
                coding = (obs.get("code", {}).get("coding") or [{}])[0]
                when = obs.get("effectiveDateTime")
                if coding.get("code") and when:
                    labs.append((pid, obs["id"], f"{coding.get('system', '')}|{coding['code']}", when[:10]))
    if not patients or not labs:
        sys.exit("no patients or observations were loaded")
    rng = random.Random(7)
    weighted = [kind for kind in kinds for _ in range(MIX[kind][0])]
    out = []
    for _ in range(size):
        pid, oid, code, day = rng.choice(labs)
        kind = rng.choice(weighted)
        pid = rng.choice(patients) if kind == "read-patient" else pid
        out.append((kind, "/fhir" + MIX[kind][1].format(pid=pid, oid=oid, code=code, day=day)))
    return out


def all_patients(base: str) -> list[str]:
    with httpx.Client(base_url=base, timeout=120) as c:
        found = c.get("/Patient", params={"_count": 1000}).json().get("entry", [])
    return [e["resource"]["id"] for e in found]


async def drive(
    base: str, work: list[tuple[str, str]], clients: int, seconds: float, sessions: list[str] | None = None
) -> tuple[dict[str, list[float]], int, float]:
    """Each client walks the fixed list from its own offset until time is up; transport errors, non-200
    answers and bodies that are not a FHIR JSON resource count as errors. With `sessions` (FHIR base paths)
    client i sends the same paths through sessions[i] instead of /fhir: recorded traffic."""
    url = httpx.URL(base)
    latencies: dict[str, list[float]] = {}
    errors = 0
    stop = time.perf_counter() + seconds

    async def client(index: int) -> None:
        nonlocal errors
        conn = Connection(url.host, url.port)
        i = index
        base_path = sessions[index % len(sessions)] if sessions else None
        while time.perf_counter() < stop:
            kind, path = work[i % len(work)]
            if base_path is not None:  # the mix's /fhir paths through this client's session
                path = base_path + path.removeprefix("/fhir")
            started = time.perf_counter()
            try:
                status, _, body = await asyncio.wait_for(conn.get(path), REQUEST_TIMEOUT)
                ok = status == 200 and body.startswith(b'{"resourceType":')
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
                conn.close()
                ok = False
            latencies.setdefault(kind, []).append((time.perf_counter() - started) * 1000)
            errors += not ok
            i += clients
        conn.close()

    began = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    return latencies, errors, time.perf_counter() - began


def _check(kind: str, path: str, doc: dict) -> str | None:
    """Why a response to one request of the mix is wrong (None when it is right)."""
    if kind in FIGURES:
        return check_extra(kind, path, doc)
    route, _, query = path.removeprefix("/fhir").partition("?")
    if kind.startswith("read-"):
        rtype, rid = route.strip("/").split("/")
        return None if (doc.get("resourceType"), doc.get("id")) == (rtype, rid) else "wrong resource"
    params = dict(parse_qsl(query))
    if doc.get("resourceType") != "Bundle" or doc.get("type") != "searchset":
        return "not a searchset"
    found = [e["resource"] for e in doc.get("entry", [])]
    if any(r.get("subject", {}).get("reference") != f"Patient/{params['patient']}" for r in found):
        return "a match of another patient"
    if kind != "labs":
        return None
    system, _, code = params["code"].partition("|")
    if not found:
        return "no labs"
    if any(
        not any((c.get("system", ""), c.get("code")) == (system, code) for c in r["code"].get("coding", []))
        for r in found
    ):
        return "a lab with another code"
    when = [datetime.fromisoformat(r["effectiveDateTime"]) for r in found]
    earliest = datetime.fromisoformat(params["date"][2:]).replace(tzinfo=UTC)  # a bare date is read as UTC
    if when != sorted(when, reverse=True) or min(when) < earliest:
        return "labs out of order or before the date"
    return None


def verify(base: str, work: list[tuple[str, str]]) -> int:
    """Check every distinct request of the mix once against what it asked for; exit on a wrong answer."""
    with httpx.Client(base_url=str(httpx.URL(base).copy_with(path="/")), timeout=600) as c:
        distinct = dict.fromkeys(work)
        for kind, path in distinct:
            response = c.get(path)
            problem = f"status {response.status_code}" if response.status_code != 200 else None
            problem = problem or _check(kind, path, response.json())
            if problem:
                sys.exit(f"wrong answer to {path}: {problem}")
    return len(distinct)


def summary(values: list[float], elapsed: float) -> str:
    return (
        f"{len(values):,} requests, {len(values) / elapsed:,.0f} req/s, p50 {percentile(values, 50):.1f} ms, "
        f"p95 {percentile(values, 95):.1f} ms, p99 {percentile(values, 99):.1f} ms"
    )


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ndjson", type=Path)
    parser.add_argument("--database-url")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, help="store operations at once per worker (serve --threads)")
    parser.add_argument(
        "--concurrency", type=int, help="requests at once per worker (serve --concurrency; 0: no limit)"
    )
    parser.add_argument("--loaded", metavar="URL", help="a database already loaded: skip map and load")
    parser.add_argument("--kinds", default=",".join(MIX), help=f"subset of the mix: {', '.join(MIX)}")
    parser.add_argument(
        "--figures",
        default=",".join(("mix", "session", *FIGURES)),
        help="timed phases, each its own figure: mix (the kinds above), session (the mix through one "
        f"session per client: every exchange recorded on the event log), {', '.join(FIGURES)}",
    )
    parser.add_argument(
        "--server-code", type=Path, default=REPO, help="serve from this checkout (before/after in one window)"
    )
    args = parser.parse_args()
    if args.loaded:
        run_api(args, args.loaded)
        return
    tmp = Path(tempfile.mkdtemp(prefix="bench-fhir-"))
    folder = args.ndjson
    if folder is None:
        folder = tmp / "ndjson"
        started = time.perf_counter()
        _run([sys.executable, "-m", "rounds.cli", "map", "--mimic", str(DEMO), "--out", str(folder)])
        print(f"map: demo mapped in {time.perf_counter() - started:.1f} s")
    pg_env = {"PG_STATE_FILE": str(tmp / "pg-state")}
    server_url = args.database_url
    if server_url is None:
        out = _run([str(REPO / "scripts" / "postgres.sh"), "start"], **pg_env)
        server_url = re.search(r"DATABASE_URL=(\S+)", out).group(1)
    db_name, database_url = fresh_database(server_url)
    try:
        load(database_url, folder)
        run_api(args, database_url)
    finally:
        _admin(server_url, f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        if args.database_url is None:
            _run([str(REPO / "scripts" / "postgres.sh"), "stop"], **pg_env)


def run_api(args: argparse.Namespace, database_url: str) -> None:
    server, base = start_server(database_url, args.workers, args.threads, args.concurrency, args.server_code)
    root = str(httpx.URL(base).copy_with(path="/"))
    workers = f"{args.workers} uvicorn workers" + (f", {args.threads} threads each" if args.threads else "")
    if args.concurrency is not None:
        workers += f", {args.concurrency or 'unlimited'} requests at once each"
    print(f"api: {args.clients} clients, {workers}, serving {args.server_code}, {database_url.split(':')[0]}")
    try:
        for figure in args.figures.split(","):
            sessions = None
            if figure in ("mix", "session"):
                work = workload(base, args.kinds.split(","))
                sessions = session_bases(root, args.clients) if figure == "session" else None
            else:
                work = extra_work(root, figure, all_patients(base))
            timed(args, server, base, database_url, figure, work, sessions)
    finally:
        server.terminate()
        server.wait(timeout=30)


def session_bases(root: str, count: int) -> list[str]:
    """The FHIR base paths of `count` new sessions (one per client)."""
    with httpx.Client(base_url=root, timeout=60) as c:
        return [f"/sessions/{c.post('/sessions', json={}).json()['id']}/fhir" for _ in range(count)]


def timed(args: argparse.Namespace, server, base: str, database_url: str, figure: str, work: list,
          sessions: list[str] | None = None) -> None:
    """One figure: every distinct request answered once and checked, a warm-up, then the timed run."""
    checked = verify(base, work)
    asyncio.run(drive(base, work, args.clients, 3, sessions))  # warm-up: connections, caches
    meter = CpuMeter(server.pid, database_url)
    before = meter.sample()
    latencies, errors, elapsed = asyncio.run(drive(base, work, args.clients, args.seconds, sessions))
    cpu = CpuMeter.spent(before, meter.sample())
    every = [v for values in latencies.values() for v in values]
    print(f"{figure}: {elapsed:.1f} s, errors {errors}, answers checked: {checked} distinct requests")
    print(f"  {'all':17} {summary(every, elapsed)}")
    for kind, values in sorted(latencies.items()):
        if len(latencies) > 1:
            print(f"  {kind:17} {summary(values, elapsed)}")
    total = sum(user + kernel for user, kernel in cpu.values())
    per = ", ".join(
        f"{part} {(user + kernel) / len(every) * 1e6:,.0f} (kernel {kernel / len(every) * 1e6:,.0f})"
        for part, (user, kernel) in cpu.items()
    )
    print(
        f"  CPU µs/request: {per}, total {total / len(every) * 1e6:,.0f}; "
        f"client share {sum(cpu['client']) / total:.0%}; cores busy {total / elapsed:.2f}"
    )


if __name__ == "__main__":
    main()
