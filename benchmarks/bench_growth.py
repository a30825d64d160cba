"""Growth of every stage with the record's size (issue 43): synth, map, load, patient searches and the
scenario builder's per-patient chart read, at several synthetic sizes, on SQLite and (with --postgres-url)
PostgreSQL.

    python benchmarks/bench_growth.py --sizes 100,1000 [--workers 2] [--work DIR]
                                      [--postgres-url postgresql+psycopg://user@host:port/db]

Each stage runs as its own process (`rounds synth|map|load`, or this script with --stage), and its CPU (user +
system, its children included) and peak RSS are read from wait4, so a neighbour's load changes the wall time
but not the CPU figures; the load average is printed beside each row. The searches are patient-scoped (20
seeded patients × a mix of the searches an assistant and the scenario builder send); `chart` is the builder's
read of one patient's chart (scenarios/reader.py `read_chart`, 10 patients, through the in-process API). The
table ends with each stage's growth factor per 10× patients (per request or per patient for the last two, per
resource for load). With --postgres-url, a database `rounds_growth_<n>` is (re)created on that server for
each size.
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
    from services.fhir_api.app import create_app
    from services.fhir_api.store import open_store
    from services.fhir_api.store.interface import Context, SearchRequest
    from services.simulator.scenarios import fhir_client
    from services.simulator.scenarios.reader import read_chart

    store = open_store(url)
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
    app = create_app(get_settings().model_copy(update={"database_url": url}))

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


def grow(n: int, work: Path, workers: int, backends: dict[str, str | None]) -> list[dict]:
    rounds = [sys.executable, "-m", "rounds.cli"]
    folder = work / f"n{n}"
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    synth = run([*rounds, "synth", "--patients", str(n), "--seed", "0", "--out", str(folder / "mimic")])
    rows.append({"n": n, "backend": "-", "stage": "synth", **synth})
    mapped = run([*rounds, "map", "--mimic", str(folder / "mimic"), "--out", str(folder / "fhir"),
                       "--workers", str(workers)])
    resources = count_resources(folder / "fhir")
    rows.append({"n": n, "backend": "-", "stage": "map", **mapped, "resources": resources})
    for backend, server in backends.items():
        if backend == "sqlite":
            db = folder / "store.db"
            for path in folder.glob("store.db*"):
                path.unlink()
            url = f"sqlite:///{db}"
        else:
            url = fresh_postgres(server, n)
        from rounds.migrate import upgrade

        upgrade(url)
        load_cmd = [*rounds, "load", "--ndjson", str(folder / "fhir"), "--database-url", url,
                    "--workers", str(workers), "--no-progress"]
        loaded = run(load_cmd)
        rows.append({"n": n, "backend": backend, "stage": "load", **loaded, "resources": resources})
        searched = run([sys.executable, str(Path(__file__)), "--stage", "search", "--url", url])
        figures = json.loads(searched["out"].strip().splitlines()[-1])
        rows.append({"n": n, "backend": backend, "stage": "search (per request)",
                     "cpu": figures["search_cpu"], "wall": figures["search_wall"], "rss": None,
                     "load": searched["load"]})
        rows.append({"n": n, "backend": backend, "stage": "chart read (per patient)",
                     "cpu": figures["chart_cpu"], "wall": figures["chart_wall"], "rss": None,
                     "load": searched["load"]})
    return rows


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
    parser.add_argument("--stage", choices=["search"])
    parser.add_argument("--url")
    args = parser.parse_args()
    if args.stage == "search":
        stage_search(args.url)
        return
    backends: dict[str, str | None] = {"sqlite": None}
    if args.postgres_url:
        backends["postgresql"] = args.postgres_url
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        rows += grow(n, args.work, args.workers, backends)
        print(table(rows), flush=True)
    print()
    print(growth(rows))


if __name__ == "__main__":
    main()
