"""On the mapped MIMIC-IV demo: patient-scoped lab searches equal what labevents.csv.gz says, and the clock.

Two demo patients are cut out of the demo (their rows of patients/admissions/transfers/labevents plus
d_labitems), mapped with the project's mapper, bulk-loaded, and searched like a client would.
"""

from __future__ import annotations

import csv
import gzip
import io
import uuid
from collections import Counter
from datetime import datetime
from zoneinfo import ZoneInfo

import orjson
import pytest

from fhir_mapper.pipeline import run_map
from services.fhir_api.store.interface import Context, NotFound, SearchRequest
from tests.wiring import load_on

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

LABITEMS = "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-d-labitems"
ZONE = ZoneInfo("America/New_York")  # the official mapping renders MIMIC times in this zone
TABLES = ("patients", "admissions", "transfers", "labevents")


def _rows(path) -> tuple[list[str], list[dict]]:
    with gzip.open(path, "rt", newline="") as fh:
        reader = csv.DictReader(fh)
        return reader.fieldnames, list(reader)


def _patient_id(subject_id: str) -> str:
    root = uuid.uuid5(uuid.NAMESPACE_OID, "MIMIC-IV")
    return str(uuid.uuid5(uuid.uuid5(root, "Patient"), subject_id))


@pytest.fixture(scope="module")
def demo(shared_data, tmp_path_factory):
    hosp = shared_data / "mimic-iv-demo" / "hosp"
    fields, labs = _rows(hosp / "labevents.csv.gz")
    subjects = [s for s, _ in Counter(r["subject_id"] for r in labs).most_common()[30:32]]
    mini = tmp_path_factory.mktemp("mimic") / "mimic"
    (mini / "hosp").mkdir(parents=True)
    (mini / "hosp" / "d_labitems.csv.gz").write_bytes((hosp / "d_labitems.csv.gz").read_bytes())
    for table in TABLES:
        cols, rows = (fields, labs) if table == "labevents" else _rows(hosp / f"{table}.csv.gz")
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
        writer.writeheader()
        writer.writerows(r for r in rows if r["subject_id"] in subjects)
        (mini / "hosp" / f"{table}.csv.gz").write_bytes(gzip.compress(buf.getvalue().encode()))
    out = tmp_path_factory.mktemp("ndjson")
    run_map(mini, out)
    return out, subjects, [r for r in labs if r["subject_id"] in subjects]


@pytest.fixture
def loaded(store, demo, database_url):
    out, subjects, labs = demo
    report = load_on(database_url, out, workers=2)
    assert report.errors == 0 and report.resources > len(labs)
    return store, subjects, labs


def _local(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=ZONE)


def test_patient_scoped_lab_search_equals_csv(loaded) -> None:
    store, subjects, labs = loaded
    subject = subjects[0]
    mine = [r for r in labs if r["subject_id"] == subject]
    itemid = Counter(r["itemid"] for r in mine if r["valuenum"]).most_common(1)[0][0]
    series = [r for r in mine if r["itemid"] == itemid]
    cutoff = sorted(r["charttime"] for r in series)[len(series) // 2][:10]
    since = _local(f"{cutoff} 00:00:00")
    expected = sorted(
        (r for r in series if _local(r["charttime"]) >= since), key=lambda r: r["charttime"], reverse=True
    )
    params = [
        ("patient", _patient_id(subject)),
        ("code", f"{LABITEMS}|{itemid}"),
        ("date", f"ge{since.isoformat()}"),
        ("_sort", "-date"),
    ]
    result = store.search(Context(), SearchRequest("Observation", params, count=1000, total="accurate"))
    got = [_as_row(r.raw) for r in result.matches]
    assert result.total == len(expected) > 0
    assert [g[1] for g in got] == [_local(r["charttime"]) for r in expected]  # newest first
    assert {g[0] for g in got} == {r["labevent_id"] for r in expected}
    assert Counter(g[2] for g in got) == Counter(
        float(r["valuenum"]) if r["valuenum"] else None for r in expected
    )


def _as_row(raw: bytes) -> tuple[str, datetime, float | None]:
    body = orjson.loads(raw)
    value = body.get("valueQuantity", {}).get("value")
    return body["identifier"][0]["value"], datetime.fromisoformat(body["effectiveDateTime"]), value


def test_clock_hides_later_labs_by_read_search_everything_include_count(loaded) -> None:
    store, subjects, labs = loaded
    subject = subjects[1]
    pid = _patient_id(subject)
    mine = sorted((r for r in labs if r["subject_id"] == subject), key=lambda r: r["charttime"])
    now = _local(mine[len(mine) // 2]["charttime"])
    ctx = store.get_session(store.create_session(now))
    shared = store.search(
        Context(), SearchRequest("Observation", [("patient", pid)], count=1000, total="accurate")
    )
    assert shared.total == len(mine)
    visible = store.search(
        ctx, SearchRequest("Observation", [("patient", pid)], count=0, total="accurate")
    ).total
    known_by_now = [r for r in mine if _local(r["charttime"]) <= now]
    # a lab is known once resulted (issued = storetime); none is known before it was drawn
    assert 0 < visible <= len(known_by_now) < len(mine)
    later = next(r for r in shared.matches if _as_row(r.raw)[1] > now)
    with pytest.raises(NotFound):
        store.read(ctx, "Observation", later.id)
    assert store.read(Context(), "Observation", later.id).id == later.id
    everything = store.everything(ctx, pid, types=["Observation"], count=1000, total="accurate")
    assert everything.total == visible and later.id not in {r.id for r in everything.matches}
    rev = store.search(
        ctx, SearchRequest("Patient", [("_id", pid), ("_revinclude", "Observation:patient")], count=10)
    )
    assert len(rev.includes) == visible and later.id not in {r.id for r in rev.includes}
    assert all(_as_row(r.raw)[1] <= now for r in everything.matches)
