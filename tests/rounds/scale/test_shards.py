"""`--shard i/n`: two shards run as separate processes with separate working folders, as two machines would,
give what one process gives: the same tables (synth, each shard drawing only its own patients), the same
NDJSON (map), the same store row for row (load, from the shards' folders and with `--shard` over one
folder), the same scenario file byte for byte (scenarios build) and the same scores (the oracle's sessions,
scored by two members of one group)."""

from __future__ import annotations

import gzip
import importlib
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest
from sqlalchemy import create_engine, select

from fhir_mapper.ids import fhir_id
from fhir_mapper.synth.context import subject_id
from fhir_mapper.synth.generate import generate
from rounds.migrate import upgrade
from rounds.shards import Shard, parse, shard_number
from services.fhir_api.load_files import patient_of
from services.fhir_api.store import models as m

pytestmark = pytest.mark.slow  # separate processes: each imports the project
PATIENTS, SEED = 8, 5
REPO = Path(__file__).resolve().parents[3]
# what belongs to no patient: every shard writes it whole
DIRECTORY_TABLES = {f"{t}.csv.gz" for t in ("hosp/d_labitems", "hosp/d_icd_diagnoses",
                                             "hosp/d_icd_procedures", "hosp/d_hcpcs", "hosp/provider",
                                             "icu/d_items", "icu/caregiver")}


def rounds(*args: str) -> str:
    """A `rounds` command in its own process (as on another machine)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "rounds.cli", *args], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def resources(folder: Path) -> dict[tuple[str, str], set[bytes]]:
    found: dict[tuple[str, str], set[bytes]] = {}
    for path in folder.glob("*.ndjson"):
        for line in path.read_bytes().splitlines():
            r = orjson.loads(line)
            found.setdefault((r["resourceType"], r["id"]), set()).add(line)
    return found


def store_rows(url: str) -> dict[str, Counter]:
    """Every table of the store keyed by (type, id) instead of rid and seq (which follow the load order), the
    load's lastUpdated stamp left out of the stored JSON."""
    engine = create_engine(url)
    out: dict[str, Counter] = {}
    with engine.connect() as conn:
        r = m.resource
        keys = {rid: (t, i) for rid, t, i in conn.execute(select(r.c.rid, r.c.res_type, r.c.res_id))}
        out["resource"] = Counter(conn.execute(select(r.c.session, r.c.res_type, r.c.res_id, r.c.version,
                                                      r.c.deleted, r.c.clinical_time)).all())
        v = m.version
        versions = Counter()
        for row in conn.execute(select(v.c.session, v.c.res_type, v.c.res_id, v.c.version, v.c.method,
                                       v.c.deleted, v.c.raw)):
            raw = orjson.loads(row.raw)
            raw["meta"].pop("lastUpdated")
            versions[(*row[:6], orjson.dumps(raw, option=orjson.OPT_SORT_KEYS))] += 1
        out["version"] = versions
        for kind, table in m.INDEX_TABLES.items():
            cols = [c for c in table.columns if c.name != "rid"]
            out[kind] = Counter((keys[row[0]], *row[1:])
                                for row in conn.execute(select(table.c.rid, *cols)))
    engine.dispose()
    return out


@pytest.fixture(scope="module")
def mimic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("shard-mimic")
    generate(folder, PATIENTS, SEED)
    return folder


def test_shards_are_parsed_and_cover_every_patient() -> None:
    assert parse("1/3") == Shard(1, 3) and parse(None) == Shard(0, 1)
    for bad in ("3/3", "1", "a/2", "1/0", "-1/2"):
        with pytest.raises(ValueError):
            parse(bad)
    ids = [f"patient-{i}" for i in range(200)]
    held = [sum(Shard(i, 3).holds(p) for i in range(3)) for p in ids]
    assert held == [1] * 200  # each patient in exactly one shard
    assert all(Shard(i, 3).holds(None) for i in range(3))  # the directory is every shard's
    assert patient_of("Observation", "o", {"subject": {"reference": "Patient/p1"}}) == "p1"
    assert patient_of("Patient", "p2", {}) == "p2"
    assert patient_of("Medication", "m", {}) is None


def test_a_synth_shard_draws_only_its_own_patients(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each shard's generator is called for its patients alone (not every patient drawn and the others'
    rows dropped), and the two shards' calls are the whole record's."""
    gen = importlib.import_module("fhir_mapper.synth.generate")  # the package re-exports generate()
    drawn: list[tuple[int, int]] = []
    build_patient = gen.build_patient

    def counted(ctx, index: int):
        drawn.append((ctx.index, index))
        return build_patient(ctx, index)

    monkeypatch.setattr(gen, "build_patient", counted)
    patients = 20
    owner = {i: shard_number(fhir_id("Patient", str(subject_id(i))), 2) for i in range(patients)}
    assert set(owner.values()) == {0, 1}
    called = []
    for i in range(2):
        drawn.clear()
        counts = generate(tmp_path / f"shard{i}", patients, SEED, shard=Shard(i, 2))
        assert [index for _, index in drawn] == [p for p in range(patients) if owner[p] == i]
        assert all(ctx_index == index for ctx_index, index in drawn)
        assert counts["hosp/patients"] == len(drawn)
        called += drawn
    assert sorted(index for _, index in called) == list(range(patients))


def csv_rows(folder: Path) -> dict[str, list[bytes]]:
    """Every synthesized table's rows (header left out), by table path."""
    return {str(p.relative_to(folder)): gzip.decompress(p.read_bytes()).splitlines()[1:]
            for p in sorted(folder.rglob("*.csv.gz"))}


def scores(report: Path) -> dict[str, tuple]:
    """A RunReport's scores by scenario: each session's score and end, and every turn's score and checks
    (what two stores' runs of the same scenarios must agree on; latencies, session ids and the ids of the
    resources a session created differ by nature)."""
    found = {}
    for s in orjson.loads(report.read_bytes())["sessions"]:
        checks = [tuple((c["id"], c["kind"], c["passed"], c["weight"], c["safety"]) for c in t["checks"])
                  for t in s["turns"]]
        turns = tuple((t["index"], t["score"], c) for t, c in zip(s["turns"], checks, strict=True))
        found[(s["scenario"], s["trial"], s["language"])] = (s["score"], s["reason"], s["excluded"], turns)
    return found


def run_and_score(scenarios: Path, url: str, report: Path, group: str | None = None) -> None:
    """The oracle's sessions of `scenarios` against the store at `url`, then their scores as `report`; with
    `group`, scored by a reporting process and a member joined from another process (as on two machines)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "ROUNDS_DATABASE_URL": url, "ROUNDS_BUS": "sql"}
    done = subprocess.run([sys.executable, "-m", "rounds.cli", "run", "--scenarios", str(scenarios),
                           "--assistant", "oracle", "--run-id", "shards", "--limit", "6", "--no-score"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    score = [sys.executable, "-m", "rounds.cli", "score", "--run", "shards", "--database-url", url]
    if group is None:
        done = subprocess.run([*score, "--json", str(report)], capture_output=True, text=True, env=env,
                              timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        return
    member = subprocess.Popen([*score, "--group", group, "--join"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    try:
        done = subprocess.run([*score, "--group", group, "--json", str(report)], capture_output=True,
                              text=True, env=env, timeout=600)
        output = member.communicate(timeout=600)[0].decode()
    finally:
        member.kill()
    assert done.returncode == 0, done.stdout + done.stderr
    assert member.returncode == 0, output


@pytest.mark.timeout(1800)  # ~20 processes, each importing the project: minutes on a busy machine
def test_two_shards_synth_map_load_build_and_score_like_one_process(tmp_path: Path) -> None:
    one, parts = tmp_path / "one", [tmp_path / f"machine{i}" for i in range(2)]
    rounds("synth", "--patients", str(PATIENTS), "--seed", str(SEED), "--out", str(one / "mimic"))
    for i, work in enumerate(parts):
        rounds("synth", "--patients", str(PATIENTS), "--seed", str(SEED), "--out", str(work / "mimic"),
               "--shard", f"{i}/2")
    whole_rows, shard_rows = csv_rows(one / "mimic"), [csv_rows(w / "mimic") for w in parts]
    for table, rows in whole_rows.items():  # the union is the whole, row for row
        if table in DIRECTORY_TABLES:
            assert shard_rows[0][table] == shard_rows[1][table] == rows, table
        else:  # a patient's rows are in one shard only
            assert sorted(shard_rows[0][table] + shard_rows[1][table]) == sorted(rows), table
    subjects = [{row.split(b",")[0] for row in s["hosp/patients.csv.gz"]} for s in shard_rows]
    assert subjects[0] and subjects[1] and not subjects[0] & subjects[1]
    assert whole_rows["hosp/d_labitems.csv.gz"] and whole_rows["hosp/provider.csv.gz"]

    rounds("map", "--mimic", str(one / "mimic"), "--out", str(one / "fhir"))
    # machine 0 maps its own synthesized shard; machine 1 its shard of the whole record on shared storage
    rounds("map", "--mimic", str(parts[0] / "mimic"), "--out", str(parts[0] / "fhir"))
    rounds("map", "--mimic", str(one / "mimic"), "--out", str(parts[1] / "fhir"), "--shard", "1/2")
    whole, shards = resources(one / "fhir"), [resources(w / "fhir") for w in parts]
    assert shards[0] and shards[1]  # both shards drew patients
    union: dict[tuple[str, str], set[bytes]] = {}
    for shard in shards:
        for key, lines in shard.items():
            union.setdefault(key, set()).update(lines)
    assert union == whole  # the same resources, byte for byte (a directory resource alike in both shards)
    patients = [{k for k in s if k[0] == "Patient"} for s in shards]
    assert not patients[0] & patients[1]

    url_one = f"sqlite:///{one / 'store.db'}"
    rounds("load", "--ndjson", str(one / "fhir"), "--database-url", url_one, "--no-progress")
    shared = f"sqlite:///{tmp_path / 'shared.db'}"  # both machines' loads into one store
    upgrade(shared)
    for work in parts:
        rounds("load", "--ndjson", str(work / "fhir"), "--database-url", shared, "--no-progress")
    by_flag = f"sqlite:///{tmp_path / 'by-flag.db'}"  # both shards over one folder, at the same time
    upgrade(by_flag)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    loads = [subprocess.Popen([sys.executable, "-m", "rounds.cli", "load", "--ndjson", str(one / "fhir"),
                               "--database-url", by_flag, "--no-progress", "--shard", f"{i}/2"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for i in range(2)]
    for load in loads:
        assert load.wait(timeout=600) == 0, load.stdout.read().decode()
    expected = store_rows(url_one)
    assert sum(expected["resource"].values()) == len(whole)
    assert store_rows(shared) == expected
    assert store_rows(by_flag) == expected

    built = one / "scenarios.jsonl"
    rounds("scenarios", "build", "--database-url", url_one, "--out", str(built), "--sessions", "12",
           "--per-category", "2")
    for i, work in enumerate(parts):
        rounds("scenarios", "build", "--database-url", shared, "--out", str(work / "charts.part"),
               "--shard", f"{i}/2")
    merged = tmp_path / "merged.jsonl"
    rounds("scenarios", "build", "--charts", str(parts[0] / "charts.part"), "--charts",
           str(parts[1] / "charts.part"), "--out", str(merged), "--sessions", "12", "--per-category", "2")
    assert built.read_bytes() and merged.read_bytes() == built.read_bytes()

    run_and_score(built, url_one, one / "report.json")
    run_and_score(merged, shared, tmp_path / "shared-report.json", group="shards43")
    expected_scores = scores(one / "report.json")
    assert len(expected_scores) == 6
    assert scores(tmp_path / "shared-report.json") == expected_scores


def test_a_part_given_twice_is_refused(mimic: Path, tmp_path: Path) -> None:
    from services.simulator.scenarios.builder import BuildError
    from services.simulator.scenarios.chart import Chart
    from services.simulator.scenarios.engine import BUILDER
    from services.simulator.scenarios.parts import PART_FORMAT, read_parts
    from services.simulator.scenarios.proposals import Proposals
    from services.simulator.scenarios.spool import SpoolWriter

    part = tmp_path / "p.part"
    writer = SpoolWriter(part, {"format": PART_FORMAT, "builder": BUILDER, "shard": "0/2", "base": "http://x/"})
    writer.add(Chart("Patient/a", None, "A", None, None))
    writer.close([])
    with pytest.raises(BuildError, match="twice"):
        read_parts([part, part], Proposals([]))
    (tmp_path / "junk.part").write_bytes(b"not a part")
    with pytest.raises(BuildError, match="not a chart part"):
        read_parts([tmp_path / "junk.part"], Proposals([]))
    cut = tmp_path / "cut.part"  # a shard that died mid-write: no trailer
    cut.write_bytes(part.read_bytes()[:-20])
    with pytest.raises(BuildError, match="not a complete chart part"):
        read_parts([cut], Proposals([]))
