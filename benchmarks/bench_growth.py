"""Growth of every stage with the record's size (issue 43): synth, map, load, patient searches, the scenario
builder's per-patient chart read and the whole scenario build, at several synthetic sizes, on SQLite and (with
--postgres-url) PostgreSQL.

    python benchmarks/bench_growth.py --sizes 100,1000 [--workers 2] [--work DIR] [--gzip]
                                      [--postgres-url postgresql+psycopg://user@host:port/db]
                                      [--backends sqlite,postgresql] [--rows FILE] [--keep]
    python benchmarks/bench_growth.py --report FILE...     # the table and growth of saved rows

Each stage runs as its own process (`rounds synth|map|load|scenarios build`, or this script with --stage), and
its CPU (user + system, its children included; on PostgreSQL the client's, not the server's) and peak RSS come
from GNU time, so a neighbour's load changes the wall time, not the CPU figures; the load average is printed
beside each row. The searches are patient-scoped (20 seeded patients x a mix of the searches an assistant and
the scenario builder send); `chart` is the builder's read of one patient's chart (scenarios/reader.py
`read_chart`, 10 patients, through the in-process API). The table ends with each stage's growth factor per 10x
patients (per request or per patient for the searches, per resource for map and load). With --postgres-url, a
database `rounds_growth_<n>` is (re)created on that server for each size. Each store is deleted once measured
(a 10,000-patient store is 15-18 GB) unless --keep; a size whose folder already holds a mapped record reuses
it (a second invocation for the other backend); --rows appends every row as JSON so runs can be combined.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SEARCH_PATIENTS, CHART_PATIENTS = 20, 10
LABITEMS = "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-d-labitems"
MICRO = "http://mimic.mit.edu/fhir/mimic/StructureDefinition/mimic-microbiology-test"
MIX = [  # patient-scoped, as an assistant (and the scenario builder) send them
    ("Observation", [("category", "laboratory"), ("_sort", "-date")]),
    ("Observation", [("code", f"{LABITEMS}|50912,{LABITEMS}|50971,{LABITEMS}|51006")]),
    ("Observation", [("date", "ge2100-01-01"), ("category", "laboratory")]),
    ("Observation", [("_profile", MICRO)]),
    ("Condition", []),
    ("MedicationRequest", [("status", "active,completed,stopped")]),
    ("Encounter", [("_sort", "-date")]),
]


def run(cmd: list[str]) -> dict:
    """Run a stage's process under GNU time: wall and CPU seconds (user + system, its children included) and
    the peak RSS (MiB) of its largest process, its stdout, the load average when it ended."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(["/usr/bin/time", "-f", "TIME %e %U %S %M", *cmd], capture_output=True, env=env)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr.decode()[-3000:]}")
    last = [x for x in done.stderr.decode().splitlines() if x.startswith("TIME ")][-1].split()
    return {"wall": float(last[1]), "cpu": float(last[2]) + float(last[3]), "rss": int(last[4]) / 1024,
            "out": done.stdout.decode(), "load": os.getloadavg()[0]}


def stage_search(url: str) -> None:
    """(--stage search) CPU per patient-scoped search and per chart read, as JSON on stdout."""
    from rounds.settings import get_settings
    from services.fhir_api.store.interface import Context, SearchRequest
    from services.simulator.scenarios import fhir_client
    from services.simulator.scenarios.reader import read_chart
    from tests.wiring import app_on, store_on

    store = store_on(url)
    ctx = Context()
    patients = sorted(r.id for r in store.search(ctx, SearchRequest("Patient", [], count=100_000)).matches)
    chosen = random.Random(0).sample(patients, min(SEARCH_PATIENTS, len(patients)))
    for pid in chosen[:2]:  # warm the statement cache
        for rtype, params in MIX:
            store.search(ctx, SearchRequest(rtype, [("patient", pid), *params], count=100))
    cpu, wall, n = time.process_time(), time.perf_counter(), 0
    for pid in chosen:
        for rtype, params in MIX:
            store.search(ctx, SearchRequest(rtype, [("patient", pid), *params], count=100))
            n += 1
    search_cpu, search_wall = (time.process_time() - cpu) / n, (time.perf_counter() - wall) / n
    store.engine.dispose()
    app = app_on(get_settings().model_copy(update={"database_url": url}))

    async def charts() -> tuple[float, float]:
        async with fhir_client(app) as client:
            found = [(await client.get(f"Patient/{pid}")).json() for pid in chosen[:CHART_PATIENTS]]
            lock, medications = asyncio.Lock(), {}
            await read_chart(client, found[0], medications, lock)  # warm
            cpu, wall = time.process_time(), time.perf_counter()
            for patient in found:
                await read_chart(client, patient, medications, lock)
            return (time.process_time() - cpu) / len(found), (time.perf_counter() - wall) / len(found)

    chart_cpu, chart_wall = asyncio.run(charts())
    print(json.dumps({"search_cpu": search_cpu, "search_wall": search_wall, "chart_cpu": chart_cpu,
                      "chart_wall": chart_wall}))


def fresh_postgres(server: str, n: int) -> str:
    import psycopg
    from sqlalchemy.engine import make_url

    base = make_url(server)
    name = f"rounds_growth_{n}"
    plain = base.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return base.set(database=name).render_as_string(hide_password=False)


def count_resources(folder: Path) -> int:
    summary = json.loads((folder / "summary.json").read_text())
    return int(summary["total_resources"])


def store_bytes(url: str, folder: Path) -> int:
    """The store's size on disk: the SQLite file (and its WAL), or the PostgreSQL database."""
    if url.startswith("sqlite"):
        return sum(p.stat().st_size for p in folder.glob("store.db*"))
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        size = int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one())
    engine.dispose()
    return size


def drop_store(url: str, folder: Path, server: str | None) -> None:
    """Delete a measured store before the next one (a 10,000-patient store is ~15-18 GB)."""
    if url.startswith("sqlite"):
        for path in folder.glob("store.db*"):
            path.unlink()
        return
    import psycopg
    from sqlalchemy.engine import make_url

    plain = make_url(server).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{make_url(url).database}"')


STAGES = ("load", "search", "build")


def grow(n: int, work: Path, workers: int, backends: dict[str, str | None], keep: bool,
         gzip: bool, stages: tuple[str, ...] = STAGES) -> Iterator[dict]:
    """Every stage at n patients, one row at a time (synth and map are skipped when the folder already holds
    their output: a second backend's run reuses the first's). Leaving `load` out of `stages` measures the
    store a `--keep` run left (a 10,000-patient load takes an hour; later stages can follow a code change)."""
    rounds = [sys.executable, "-m", "rounds.cli"]
    folder = work / f"n{n}"
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "fhir" / "summary.json").exists():
        synth = run([*rounds, "synth", "--patients", str(n), "--seed", "0", "--out", str(folder / "mimic")])
        yield {"n": n, "backend": "-", "stage": "synth", **synth}
        mapped = run([*rounds, "map", "--mimic", str(folder / "mimic"), "--out", str(folder / "fhir"),
                      "--workers", str(workers)])
        yield {"n": n, "backend": "-", "stage": "map", **mapped,
               "resources": count_resources(folder / "fhir")}
        if gzip:  # the loader reads .ndjson.gz: a 10,000-patient record is ~5 GB of NDJSON, ~0.6 GB gzipped
            for path in (folder / "fhir").glob("*.ndjson"):
                subprocess.run(["gzip", "-1", str(path)], check=True)
    resources = count_resources(folder / "fhir")
    for backend, server in backends.items():
        url = kept_store(backend, server, n, folder) if "load" not in stages else None
        if url is None:
            url = fresh_store(backend, server, n, folder)
            loaded = run([*rounds, "load", "--ndjson", str(folder / "fhir"), "--database-url", url,
                          "--workers", str(workers), "--no-progress"])
            yield {"n": n, "backend": backend, "stage": "load", **loaded, "resources": resources,
                   "bytes": store_bytes(url, folder)}
        if "search" in stages:
            yield from search_rows(n, backend, url)
        if "build" in stages:
            built = run([*rounds, "scenarios", "build", "--database-url", url, "--out",
                         str(folder / f"scenarios-{backend}.jsonl")])
            yield {"n": n, "backend": backend, "stage": "scenarios build", **built}
        if not keep:
            drop_store(url, folder, server)


def fresh_store(backend: str, server: str | None, n: int, folder: Path) -> str:
    """An empty, migrated store for one backend at n patients."""
    if backend == "sqlite":
        for path in folder.glob("store.db*"):
            path.unlink()
        url = f"sqlite:///{folder / 'store.db'}"
    else:
        url = fresh_postgres(server, n)
    from rounds.migrate import upgrade

    upgrade(url)
    return url


def kept_store(backend: str, server: str | None, n: int, folder: Path) -> str:
    """The store a --keep run left for this backend and size; an error if there is none."""
    if backend == "sqlite":
        if not (folder / "store.db").exists():
            raise SystemExit(f"no kept SQLite store in {folder}: run with the load stage first")
        return f"sqlite:///{folder / 'store.db'}"
    from sqlalchemy.engine import make_url

    return make_url(server).set(database=f"rounds_growth_{n}").render_as_string(hide_password=False)


def search_rows(n: int, backend: str, url: str) -> Iterator[dict]:
    """The search and chart-read rows, measured in a process of their own."""
    searched = run([sys.executable, str(Path(__file__)), "--stage", "search", "--url", url])
    figures = json.loads(searched["out"].strip().splitlines()[-1])
    yield {"n": n, "backend": backend, "stage": "search (per request)", "cpu": figures["search_cpu"],
           "wall": figures["search_wall"], "rss": None, "load": searched["load"]}
    yield {"n": n, "backend": backend, "stage": "chart read (per patient)", "cpu": figures["chart_cpu"],
           "wall": figures["chart_wall"], "rss": None, "load": searched["load"]}


def table(rows: list[dict]) -> str:
    lines = ["| patients | backend | stage | CPU s | wall s | peak RSS MiB | load avg |",
             "|---:|---|---|---:|---:|---:|---:|"]
    for r in rows:
        per = r["stage"].endswith(")")
        cpu = f"{r['cpu'] * 1e3:.2f} ms" if per else f"{r['cpu']:.1f}"
        wall = f"{r['wall'] * 1e3:.2f} ms" if per else f"{r['wall']:.1f}"
        rss = "" if r.get("rss") is None else f"{r['rss']:.0f}"
        lines.append(f"| {r['n']:,} | {r['backend']} | {r['stage']} | {cpu} | {wall} | {rss} "
                     f"| {r['load']:.1f} |")
    return "\n".join(lines)


def growth(rows: list[dict]) -> str:
    """CPU growth per stage between consecutive sizes, per 10× patients (load: per resource)."""
    out = []
    keys = sorted({(r["backend"], r["stage"]) for r in rows})
    for backend, stage in keys:
        series = sorted((r for r in rows if (r["backend"], r["stage"]) == (backend, stage)),
                        key=lambda r: r["n"])
        for a, b in zip(series, series[1:], strict=False):
            factor = b["cpu"] / a["cpu"] if a["cpu"] else float("nan")
            ratio = b["n"] / a["n"]
            note = ""
            if stage in ("load", "map") and a.get("resources") and b.get("resources"):
                per = (b["cpu"] / b["resources"]) / (a["cpu"] / a["resources"])
                note = f", per resource ×{per:.2f}"
            out.append(f"- {stage} [{backend}] {a['n']:,} → {b['n']:,} patients (×{ratio:g}): "
                       f"CPU ×{factor:.2f}{note}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("/tmp/rounds-growth"))
    parser.add_argument("--postgres-url")
    parser.add_argument("--backends", default="sqlite,postgresql",
                        help="which of sqlite,postgresql to measure (postgresql needs --postgres-url)")
    parser.add_argument("--rows", type=Path, 
                        help="append every row to this JSON-lines file as it is measured")
    parser.add_argument("--report", type=Path, nargs="*",
                        help="print the table and growth of these rows files instead of measuring")
    parser.add_argument("--keep", action="store_true", 
                        help="keep each store (default: deleted once measured)")
    parser.add_argument("--gzip", action="store_true", help="gzip the mapped NDJSON before loading it")
    parser.add_argument("--stages", default=",".join(STAGES),
                        help="which of load,search,build to run (without load: the store a --keep run left)")
    parser.add_argument("--stage", choices=["search"])
    parser.add_argument("--url")
    args = parser.parse_args()
    if args.stage == "search":
        stage_search(args.url)
        return
    if args.report is not None:
        rows = [json.loads(line) for path in args.report for line in path.read_text().splitlines() if line]
        print(table(rows))
        print()
        print(growth(rows))
        return
    wanted = args.backends.split(",")
    backends: dict[str, str | None] = {"sqlite": None} if "sqlite" in wanted else {}
    if "postgresql" in wanted and args.postgres_url:
        backends["postgresql"] = args.postgres_url
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        for row in grow(n, args.work, args.workers, backends, args.keep, args.gzip,
                        tuple(args.stages.split(","))):
            row.pop("out", None)
            rows.append(row)
            if args.rows:
                with args.rows.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    print(table(rows))
    print()
    print(growth(rows))


if __name__ == "__main__":
    main()
