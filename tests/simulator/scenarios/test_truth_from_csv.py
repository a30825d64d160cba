"""The truth of sampled turns recomputed from the raw MIMIC-IV demo CSV files (never from FHIR): values, units
and times of the cited results, `latest` really the latest drawn of the results known at `now`, aggregates
over the right window, trends, absences, and the conditional-order decisions with their doses and
forbidden writes.

CSV times are local wall-clock times; the official mapping renders them in America/New_York, so a CSV time
is compared with a fact's time as that zone's instant. A result is known at max(charttime, storetime)."""

from __future__ import annotations

import csv
import gzip
import math
import random
import uuid
from collections import defaultdict
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from services.simulator.scenarios.vocabulary import lab_keys_by_itemid, vocabulary

ZONE = ZoneInfo("America/New_York")
LABITEMS = "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-d-labitems|"
LAB_KINDS = {"latest", "value_at", "mean", "min", "max", "count", "trend", "absent"}
SAMPLE = 260


def _uuid(name: str, key: str) -> str:
    root = uuid.uuid5(uuid.NAMESPACE_OID, "MIMIC-IV")
    return str(uuid.uuid5(uuid.uuid5(root, name), key))


def _local(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=ZONE)


class Row:
    __slots__ = ("ref", "value", "unit", "chart", "known")

    def __init__(self, r: dict[str, str]) -> None:
        self.ref = "Observation/" + _uuid("ObservationLabevents", r["labevent_id"])
        self.value = float(r["valuenum"])
        self.unit = r["valueuom"] or None
        self.chart = _local(r["charttime"])
        self.known = max(self.chart, _local(r["storetime"])) if r["storetime"] else self.chart


@pytest.fixture(scope="module")
def csv_record(demo_raw):
    """(labs by (patient ref, itemid), rows by reference, birth dates by patient ref) from the CSV files."""
    hosp = demo_raw / "hosp"
    wanted = set(lab_keys_by_itemid())
    subjects = {}
    with gzip.open(hosp / "patients.csv.gz", "rt") as fh:
        for r in csv.DictReader(fh):
            subjects[r["subject_id"]] = ("Patient/" + _uuid("Patient", r["subject_id"]), int(r["anchor_age"]))
    labs: dict[tuple[str, str], list[Row]] = defaultdict(list)
    by_ref: dict[str, Row] = {}
    with gzip.open(hosp / "labevents.csv.gz", "rt") as fh:
        for r in csv.DictReader(fh):
            if r["itemid"] in wanted and r["valuenum"] and r["charttime"]:
                row = Row(r)
                labs[(subjects[r["subject_id"]][0], r["itemid"])].append(row)
                by_ref[row.ref] = row
    first_in: dict[str, str] = {}
    with gzip.open(hosp / "transfers.csv.gz", "rt") as fh:
        for r in csv.DictReader(fh):
            if r["intime"] and (r["subject_id"] not in first_in or r["intime"] < first_in[r["subject_id"]]):
                first_in[r["subject_id"]] = r["intime"]
    births = {}
    for subject, (ref, age) in subjects.items():
        if subject in first_in:
            day = date.fromisoformat(first_in[subject][:10])
            births[ref] = (
                day.replace(year=day.year - age)
                if (day.month, day.day) != (2, 29)
                else date(day.year - age, 2, 28)
            )
    return labs, by_ref, births


def _itemid(code: str) -> str:
    assert code.startswith(LABITEMS), code
    return code.removeprefix(LABITEMS)


def _known(rows: list[Row], now: datetime) -> list[Row]:
    return [r for r in rows if r.known <= now]


def _check_lab_fact(fact, scenario, labs, by_ref) -> None:
    rows = _known(labs.get((scenario.patient, _itemid(fact.code)), []), scenario.now)
    if fact.kind == "trend" and fact.window and fact.window[1] != scenario.now:  # before vs after a drug
        first, last = (by_ref[r] for r in fact.references)
        assert (first.value, last.value) == (fact.model_extra["first"], fact.model_extra["last"])
        assert first.known <= last.known <= scenario.now
        _check_direction(fact, last.value - first.value)
        return
    if fact.window:
        start, end = fact.window
        assert end == scenario.now
        in_window = [r for r in rows if r.chart >= start]
    else:
        in_window = rows
    if fact.kind == "absent":
        assert not in_window, f"{scenario.id}: absent but the CSV has {len(in_window)} results"
        return
    if fact.kind in ("latest", "value_at"):
        row = by_ref[fact.reference]
        assert row in rows, f"{scenario.id}: {fact.reference} not known at now"
        assert (row.value, row.unit, row.chart) == (fact.value, fact.unit, fact.time)
        if fact.kind == "latest":
            assert row in in_window
            # the latest drawn of the known results, what the sandbox's `_sort=-date` shows first (not the one
            # reported last: a result drawn at 13:15 and reported after one drawn at 13:46 is not the latest)
            later = [r for r in in_window if (r.chart, r.known) > (row.chart, row.known)]
            assert not later, f"{scenario.id}: a later result exists"
        return
    refs = {r.ref for r in in_window}
    assert set(fact.references) == refs, f"{scenario.id}: {fact.kind} window differs"
    values = [r.value for r in in_window]
    if fact.kind == "count":
        assert fact.value == len(values)
    elif fact.kind == "mean":
        assert math.isclose(fact.value, round(sum(values) / len(values), 2), abs_tol=1e-9)
    elif fact.kind in ("min", "max"):
        assert fact.value == (min if fact.kind == "min" else max)(values)
    elif fact.kind == "trend":
        ordered = sorted(in_window, key=lambda r: (r.chart, r.known, r.ref))
        _check_direction(fact, ordered[-1].value - ordered[0].value)


def _check_direction(fact, delta: float) -> None:
    step = next(v["trend_delta"] for v in vocabulary()["labs"].values() if v["itemid"] == _itemid(fact.code))
    assert fact.value == ("up" if delta >= step else "down" if delta <= -step else "unchanged")


def _check_decision(turn, fact, scenario, labs, by_ref) -> None:
    rule = fact.model_extra.get("rule")
    ref = fact.reference or (fact.references[0] if fact.references else None)
    row = by_ref.get(ref or "")
    value = row.value if row else None
    if rule == "potassium_replacement":
        order = value is not None and value < 3.5
        if order:
            assert fact.model_extra["dose"] == math.floor((3.5 - value) / 0.1 + 1e-9) * 10
    elif rule == "magnesium_replacement":
        if row is None:  # no magnesium known within the 24 hours before now
            rows = _known(labs.get((scenario.patient, "50960"), []), scenario.now)
            assert not [r for r in rows if r.chart >= scenario.now - timedelta(hours=24)], scenario.id
        else:
            assert scenario.now - row.chart <= timedelta(hours=24)
        order = value is not None and value < 1.9
        if order:
            assert fact.model_extra["dose"] == (4 if value < 1.0 else 2 if value < 1.5 else 1)
    elif rule == "hba1c_reorder":
        if row is None:
            assert not _known(labs.get((scenario.patient, "50852"), []), scenario.now), scenario.id
        order = row is None or (scenario.now - row.chart) > timedelta(days=365)
    else:
        return
    assert fact.value == ("order" if order else "no_order"), scenario.id
    if turn.task_type == "write":
        assert turn.forbid_writes == (not order) and bool(turn.writes) == order
        for write in turn.writes:
            for c in write.constraints:
                if c.op == "approx":
                    assert c.value == fact.model_extra["dose"]


def _age(birth: date, now: datetime) -> int:
    return now.year - birth.year - ((now.month, now.day) < (birth.month, birth.day))


def test_sampled_turns_match_the_raw_csv(demo_build, csv_record) -> None:
    labs, by_ref, births = csv_record
    turns = [
        (s, t)
        for s in demo_build.scenarios
        for t in s.turns
        if any(
            f.kind in LAB_KINDS and f.code and f.code.startswith(LABITEMS) or f.kind == "decision"
            for f in t.facts
        )
        or any(f.code == "urn:rounds:derived|age" for f in t.facts)
    ]
    sample = random.Random(15).sample(turns, min(SAMPLE, len(turns)))
    assert len(sample) >= 200
    checked = defaultdict(int)
    for scenario, turn in sample:
        for fact in turn.facts:
            if fact.kind in LAB_KINDS and fact.code and fact.code.startswith(LABITEMS):
                _check_lab_fact(fact, scenario, labs, by_ref)
                checked[fact.kind] += 1
            elif fact.kind == "decision":
                _check_decision(turn, fact, scenario, labs, by_ref)
                checked["decision"] += 1
            elif fact.code == "urn:rounds:derived|age":
                assert fact.value == _age(births[scenario.patient], scenario.now)
                checked["age"] += 1
    for kind in ("latest", "value_at", "mean", "min", "max", "count", "trend", "decision"):
        assert checked[kind] > 0, f"no {kind} fact in the sample: {dict(checked)}"


def test_every_lab_fact_time_is_at_or_before_now_and_units_come_from_the_record(
    demo_build, csv_record
) -> None:
    labs, by_ref, _ = csv_record
    for scenario in demo_build.scenarios:
        for turn in scenario.turns:
            for fact in turn.facts:
                if fact.reference in by_ref:
                    row = by_ref[fact.reference]
                    assert row.known <= scenario.now
                    if fact.kind in ("latest", "value_at"):
                        assert (row.value, row.unit) == (fact.value, fact.unit)
