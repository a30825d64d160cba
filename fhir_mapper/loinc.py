"""LOINC codings for MIMIC items, from the curated crosswalk data/loinc_crosswalk.csv.

Beyond the official mapping (whose labs carry only MIMIC codes): the LOINC coding is appended after
the MIMIC coding in Observation.code.coding, so `Observation?code=http://loinc.org|2823-3` finds labs.
"""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

from fhir_mapper.fhir import LOINC

CROSSWALK = Path(__file__).parent / "data" / "loinc_crosswalk.csv"


@cache
def crosswalk(source: str) -> dict[str, dict[str, str]]:
    """{itemid: LOINC coding} for one dictionary ('d_labitems' or 'd_items')."""
    with CROSSWALK.open(newline="", encoding="utf-8") as handle:
        return {
            r["itemid"]: {"system": LOINC, "code": r["loinc"], "display": r["loinc_display"]}
            for r in csv.DictReader(handle)
            if r["source"] == source
        }
