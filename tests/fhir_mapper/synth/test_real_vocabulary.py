"""The curated itemids are real MIMIC-IV ones: labels, fluids, categories and units agree with the open demo's
dictionaries (read in place from ../shared/data/mimic-iv-demo)."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from fhir_mapper.synth.catalog import catalog


def _table(root: Path, table: str) -> list[dict[str, str]]:
    path = root / f"{table}.csv.gz"
    if not path.exists():
        pytest.skip(f"{path} absent")
    with gzip.open(path, "rt", encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def demo(shared_data: Path) -> Path:
    return shared_data / "mimic-iv-demo"


def test_lab_items_match_d_labitems(demo: Path) -> None:
    real = {int(r["itemid"]): r for r in _table(demo, "hosp/d_labitems")}
    for itemid, item in catalog().labs.items():
        assert (real[itemid]["label"], real[itemid]["fluid"], real[itemid]["category"]) == (
            item["label"],
            item["fluid"],
            item["category"],
        ), itemid


def test_icu_items_match_d_items(demo: Path) -> None:
    real = {int(r["itemid"]): r for r in _table(demo, "icu/d_items")}
    for item in catalog().d_items():
        row = real[item["itemid"]]
        assert (row["label"], row["linksto"], row["category"]) == (
            item["label"],
            item["linksto"],
            item["category"],
        )
        if item.get("unitname") and row["unitname"] not in ("", "None"):
            assert row["unitname"] == item["unitname"], item["itemid"]


def test_microbiology_itemids_match_the_demo(demo: Path) -> None:
    rows = _table(demo, "hosp/microbiologyevents")
    names = {}
    for r in rows:
        for col, name in (
            ("spec_itemid", "spec_type_desc"),
            ("test_itemid", "test_name"),
            ("org_itemid", "org_name"),
            ("ab_itemid", "ab_name"),
        ):
            if r[col]:
                names[(col, int(r[col]))] = r[name]
    micro = catalog().micro
    checked = 0
    for culture in micro["cultures"].values():
        for col, name in (("spec_itemid", "spec_type_desc"), ("test_itemid", "test_name")):
            if (col, culture[col]) in names:
                assert names[(col, culture[col])] == culture[name]
                checked += 1
    for org in micro["organisms"].values():
        assert names[("org_itemid", org["org_itemid"])] == org["org_name"]
    for ab in micro["antibiotics"].values():
        assert names[("ab_itemid", ab["ab_itemid"])] == ab["ab_name"]
    assert checked >= 8
