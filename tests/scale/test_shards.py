"""`--shard i/n`: two shards run as separate processes with separate working folders, as two machines would,
give what one process gives: the same NDJSON (map), the same store row for row (load, from the shards'
folders and with `--shard` over one folder), the same scenario file byte for byte (scenarios build)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest
from sqlalchemy import create_engine, select

from fhir_mapper.synth.generate import generate
from rounds.migrate import upgrade
from rounds.shards import Shard, parse
from services.fhir_api.load_files import patient_of
from services.fhir_api.store import models as m

pytestmark = pytest.mark.slow  # separate processes: each imports the project
PATIENTS, SEED = 8, 5
REPO = Path(__file__).resolve().parents[2]


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


def test_two_shards_map_load_and_build_like_one_process(mimic: Path, tmp_path: Path) -> None:
    one, parts = tmp_path / "one", [tmp_path / f"machine{i}" for i in range(2)]
    rounds("map", "--mimic", str(mimic), "--out", str(one / "fhir"))
    for i, work in enumerate(parts):
        rounds("map", "--mimic", str(mimic), "--out", str(work / "fhir"), "--shard", f"{i}/2")
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


def test_a_part_given_twice_is_refused(mimic: Path, tmp_path: Path) -> None:
    from services.simulator.scenarios.builder import BuildError
    from services.simulator.scenarios.chart import Chart
    from services.simulator.scenarios.parts import Part, read_parts, write_part

    part = tmp_path / "p.part"
    write_part(part, Part("0/2", "http://x/fhir/", [Chart("Patient/a", None, "A", None, None)], []))
    with pytest.raises(BuildError, match="twice"):
        read_parts([part, part])
    (tmp_path / "junk.part").write_bytes(b"not a part")
    with pytest.raises(BuildError, match="not a chart part"):
        read_parts([tmp_path / "junk.part"])
