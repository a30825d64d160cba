"""Known-time, part three, over the whole real MIMIC-IV demo on both backends: no death and no culture result
is visible before it was known.

The truth is read from the demo's CSV files, not from the mapping: a death is known at admissions.deathtime
(an in-hospital death) or else at the end of patients.dod's day in the hospital's zone (America/New_York);
a culture's result at the latest storetime of its rows (storedate's day end without one; never without
either), its specimen at collection (charttime). Every patient with a date of death and every culture is
checked at clocks on both sides of that instant (and at the instant the old rule revealed them: the UTC
midnight of a date, the collection of a culture), through the read by key (the Python clock) and searches
(the SQL clock and the index rows of the as-of views).
"""

from __future__ import annotations

import csv
import gzip
import random
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import orjson
import pytest

from fhir_mapper.ids import fhir_id
from services.fhir_api.search.values import to_us
from services.fhir_api.store import known_time
from services.fhir_api.store.interface import Context, NotFound, SearchRequest
from tests.fhir_api.store_fixtures import loaded_url
from tests.shared_inputs import built_once
from tests.wiring import store_on

BOSTON = ZoneInfo("America/New_York")  # MIMIC-IV times are the hospital's local times
SECOND = timedelta(seconds=1)
SEARCHED = 0.2  # the share of (clock, patient) pairs also searched: a search costs ten reads
# the mapped files this property needs: who died, the stays the cultures belong to, the cultures
FILES = ("Organization", "Location", "Patient", "Encounter", "Specimen") + tuple(
    f"ObservationMicro{kind}" for kind in ("Test", "Org", "Susc")
)


def _rows(folder: Path, table: str) -> list[dict[str, str]]:
    with gzip.open(folder / "hosp" / f"{table}.csv.gz", "rt", newline="") as f:
        return list(csv.DictReader(f))


def _local(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=BOSTON)


def _end_of_day(day: str) -> datetime:
    """The last instant of a local day (the next local midnight, a microsecond before)."""
    after = date.fromisoformat(day[:10]) + timedelta(days=1)
    return datetime(after.year, after.month, after.day, tzinfo=BOSTON) - timedelta(microseconds=1)


def death_truth(demo: Path) -> dict[str, tuple[datetime, datetime]]:
    """Patient id -> (when the death was known, the UTC midnight of dod: when a UTC-day reading showed it)."""
    deathtime: dict[str, str] = {}
    for a in _rows(demo, "admissions"):
        if a["deathtime"] and a["deathtime"] > deathtime.get(a["subject_id"], ""):
            deathtime[a["subject_id"]] = a["deathtime"]
    out = {}
    for p in _rows(demo, "patients"):
        if p["dod"]:
            sid = p["subject_id"]
            known = _local(deathtime[sid]) if sid in deathtime else _end_of_day(p["dod"])
            utc_day = datetime.fromisoformat(p["dod"][:10]).replace(tzinfo=UTC)
            out[fhir_id("Patient", sid)] = (known, utc_day)
    return out


def culture_truth(demo: Path) -> list[tuple[str, str, str, datetime | None, datetime | None]]:
    """(patient id, test Observation id, Specimen id, collected, result stored) per culture (a specimen's
    test); stored None: no row of it was ever stored."""
    tests: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for r in _rows(demo, "microbiologyevents"):
        tests[(r["micro_specimen_id"], r["test_itemid"])].append(r)
    out = []
    for (spec, test), rows in sorted(tests.items()):
        stored = [_local(r["storetime"]) for r in rows if r["storetime"]]
        stored += [_end_of_day(r["storedate"]) for r in rows if r["storedate"] and not r["storetime"]]
        charted = [_local(r["charttime"]) for r in rows if r["charttime"]]
        out.append(
            (
                fhir_id("Patient", rows[0]["subject_id"]),
                fhir_id("ObservationMicroTest", f"{spec}-{test}"),
                fhir_id("SpecimenMicro", spec),
                max(charted, default=None),
                max(stored, default=None),
            )
        )
    return out


@pytest.fixture(scope="session")
def demo_cultures(demo_mapped, tmp_path_factory) -> Path:
    """The mapped demo's patients, stays and microbiology (every patient, every culture), cut once per run."""

    def build(folder: Path) -> None:
        lines = [
            line
            for name in FILES
            for line in (demo_mapped[0] / f"Mimic{name}.ndjson").read_bytes().splitlines()
            if line
        ]
        (folder / "cultures.ndjson").write_bytes(b"\n".join(lines) + b"\n")

    return built_once(tmp_path_factory, "known-part-three", build)


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def culture_store(request, demo_cultures, tmp_path_factory):
    lines = (demo_cultures / "cultures.ndjson").read_bytes().count(b"\n")
    url = loaded_url(request, tmp_path_factory, demo_cultures, "known_part_three", lines)
    store = store_on(url)
    yield store
    store.engine.dispose()


@pytest.mark.parametrize(
    ("value", "known"),
    [
        ("2180-05-06", "2180-05-06T23:59:59.999999-04:00"),  # a date: the end of its local day (EDT)
        ("2180-01-06", "2180-01-06T23:59:59.999999-05:00"),  # ... in winter (EST)
        ("2180-02", "2180-02-29T23:59:59.999999-05:00"),  # a month: its last local instant (a leap year)
        ("2180", "2180-12-31T23:59:59.999999-05:00"),
        ("2180-05-06T10:15:00-04:00", "2180-05-06T10:15:00-04:00"),  # a time of day: that time
        ("2180-05-06T14:15:00Z", "2180-05-06T10:15:00-04:00"),
    ],
)
def test_a_date_is_known_at_the_end_of_its_day_in_the_record_zone(value: str, known: str) -> None:
    assert known_time.known_from(value) == to_us(datetime.fromisoformat(known))


def test_a_result_without_its_store_time_is_never_known() -> None:
    """A culture whose rows carry no storetime has no time its result became known (the demo's acid-fast
    cultures): never shown to a clock, rather than at collection."""
    test = {
        "resourceType": "Observation",
        "meta": {"profile": [next(p for p in known_time.PROFILES if p.endswith("micro-test"))]},
        "effectiveDateTime": "2180-05-06T10:15:00-04:00",
        "valueString": "NO MYCOBACTERIA ISOLATED.",
    }
    assert known_time.clinical_time(test) == known_time.NEVER
    stored = {**test, "issued": "2180-05-09T08:00:00-04:00"}
    assert known_time.clinical_time(stored) == to_us(datetime.fromisoformat(stored["issued"]))
    assert known_time.clinical_time({**stored, "issued": "2180-05-09"}) == known_time.known_from("2180-05-09")


def _readable(store, ctx: Context, rtype: str, rid: str) -> dict | None:
    try:
        return orjson.loads(store.read(ctx, rtype, rid).raw)
    except NotFound:
        return None


def _ids(store, ctx: Context, rtype: str, params: list[tuple[str, str]]) -> set[str]:
    return {m.id for m in store.search(ctx, SearchRequest(rtype, params, count=500)).matches}


def test_no_death_is_visible_before_it_was_known(culture_store, shared_data) -> None:
    store = culture_store
    truth = death_truth(shared_data / "mimic-iv-demo")
    assert len(truth) == 31  # every patient of the demo with a date of death
    rng = random.Random(37)
    checks = early_before = 0
    for pid, (known, utc_day) in sorted(truth.items()):
        spread = [known + timedelta(hours=rng.uniform(-36, 36)) for _ in range(3)]
        for clock in (utc_day, known - SECOND, known + SECOND, *spread):
            ctx = Context(session_id=None, now=clock)
            shown = clock >= known
            body = _readable(store, ctx, "Patient", pid)
            assert body is not None, f"Patient/{pid} (untimed) hidden at {clock}"
            assert ("deceasedDateTime" in body) == shown, f"Patient/{pid} at {clock}, death known {known}"
            assert (pid in _ids(store, ctx, "Patient", [("_id", pid), ("deceased", "true")])) == shown
            assert (pid in _ids(store, ctx, "Patient", [("_id", pid), ("deceased", "false")])) != shown
            checks += 1
            early_before += clock == utc_day and not shown
    print(f"\n{len(truth)} deaths x {checks // len(truth)} clocks: none visible early")
    # the old rule's reveal falls before the known time for every in-hospital death and every dod
    assert early_before == len(truth)


def test_no_culture_result_is_visible_before_it_was_stored(culture_store, shared_data) -> None:
    store = culture_store
    cultures = culture_truth(shared_data / "mimic-iv-demo")
    assert len(cultures) > 1800
    by_clock: dict[datetime, list[tuple]] = defaultdict(list)
    for culture in cultures:
        _, _, _, collected, stored = culture
        for clock in {collected + SECOND if collected else None, stored - SECOND if stored else None}:
            if clock is not None:
                by_clock[clock].append(culture)
        if stored is not None:
            by_clock[stored + SECOND].append(culture)
    rng = random.Random(37)
    shown_results = hidden_results = specimens = searched_at = 0
    for clock, items in sorted(by_clock.items()):
        ctx = Context(session_id=None, now=clock)
        for pid in {pid for pid, *_ in items}:
            # every culture is read at every clock (the Python clock); one clock in SEARCHED is searched too
            searched = None
            if rng.random() < SEARCHED:
                searched = _ids(store, ctx, "Observation", [("patient", pid), ("category", "laboratory")])
                searched_at += 1
            for patient, test_id, specimen_id, collected, stored in items:
                if patient != pid:
                    continue
                visible = stored is not None and clock >= stored
                body = _readable(store, ctx, "Observation", test_id)
                assert (body is not None) == visible, f"{test_id} at {clock}: stored {stored}"
                if searched is not None:
                    assert (test_id in searched) == visible, f"{test_id} searched at {clock}: stored {stored}"
                shown_results += visible
                hidden_results += not visible
                if collected is not None and clock >= collected:  # the specimen is known at collection
                    assert _readable(store, ctx, "Specimen", specimen_id) is not None, specimen_id
                    specimens += 1
    print(
        f"\n{len(cultures)} cultures at {len(by_clock)} clocks ({searched_at} searched): {hidden_results}"
        f" hidden before their result was stored, {shown_results} shown after, {specimens} specimens shown"
        " from collection"
    )
    assert hidden_results > len(cultures) and shown_results > 1800 and specimens > 1800 and searched_at > 500
