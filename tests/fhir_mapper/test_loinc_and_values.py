"""The LOINC crosswalk covers the common labs and vital signs with real MIMIC itemids; value conversions."""

from __future__ import annotations

import csv
import gzip

import orjson

from fhir_mapper.loinc import CROSSWALK, crosswalk
from fhir_mapper.values import instant, number, plain_number, squash

REQUIRED_LAB = {
    "2951-2",
    "2823-3",
    "2075-0",
    "1963-8",
    "3094-0",
    "2160-0",
    "2345-7",
    "17861-6",  # BMP
    "6690-2",
    "718-7",
    "4544-3",
    "777-3",
    "787-2",  # CBC
    "19123-9",
    "2777-1",
    "4548-4",
    "6598-7",
    "32693-4",  # Mg, phosphate, HbA1c, troponin T, lactate
    "1742-6",
    "1920-8",
    "6768-6",
    "1975-2",
    "1751-7",
    "6301-6",
}  # liver panel, INR
REQUIRED_VITAL = {
    "8867-4",
    "9279-1",
    "2708-6",
    "59408-5",
    "8310-5",
    "8480-6",
    "8462-4",
    "8478-0",
    "29463-7",
    "8302-2",
}


def test_crosswalk_covers_the_required_codes_with_real_itemids(demo_dir):
    rows = list(csv.DictReader(CROSSWALK.open(newline="")))
    assert {r["loinc"] for r in rows if r["source"] == "d_labitems"} >= REQUIRED_LAB
    assert {r["loinc"] for r in rows if r["source"] == "d_items"} >= REQUIRED_VITAL
    for source, table in (("d_labitems", "hosp/d_labitems"), ("d_items", "icu/d_items")):
        with gzip.open(demo_dir / f"{table}.csv.gz", "rt", newline="") as handle:
            labels = {r["itemid"]: r["label"] for r in csv.DictReader(handle)}
        for r in rows:
            if r["source"] == source:
                assert labels.get(r["itemid"]) == r["mimic_label"], r  # the itemid is real and means that
    assert crosswalk("d_labitems")["50971"]["code"] == "2823-3"


def test_potassium_labs_are_searchable_by_loinc(demo_run):
    out, _, _ = demo_run
    found = 0
    for line in (out / "MimicObservationLabevents.ndjson").read_bytes().splitlines():
        if b'"2823-3"' in line:
            obs = orjson.loads(line)
            assert obs["code"]["coding"][0]["code"] in ("50971", "52610")
            assert obs["code"]["coding"][1]["system"] == "http://loinc.org"
            found += 1
    assert found > 500


def test_instants_carry_the_new_york_offset_across_dst():
    assert instant("2180-01-06 22:23:00") == "2180-01-06T22:23:00-05:00"
    assert instant("2180-07-06 22:23:00.25") == "2180-07-06T22:23:00.25-04:00"
    assert instant("2180-07-06") == "2180-07-06T00:00:00-04:00"
    assert instant("") is None


def test_numbers_and_text_cleanup():
    assert number("140") == 140 and isinstance(number("140"), int)
    assert number("1.50") == 1.5 and number("") is None
    assert plain_number("1-2") is None and plain_number("2.5") == 2.5
    assert squash("  q  6h\tPRN ") == "q 6h PRN" and squash("   ") is None
