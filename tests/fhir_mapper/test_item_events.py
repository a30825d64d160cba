"""Chart events from a tiny MIMIC-shaped fixture: the official filters, LOINC, reference ranges, rejects."""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import orjson

from fhir_mapper.ids import fhir_id
from fhir_mapper.pipeline import run_job
from fhir_mapper.reader import schema


def write_table(root: Path, table: str, rows: list[dict[str, str]]) -> None:
    """A CSV.gz with exactly the schema's columns (missing values empty)."""
    columns = list(schema()[table])
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows([{c: r.get(c, "") for c in columns} for r in rows])
    (root / table).parent.mkdir(parents=True, exist_ok=True)
    (root / f"{table}.csv.gz").write_bytes(gzip.compress(buf.getvalue().encode()))


def test_chartevents_filters_codes_and_rejects(tmp_path: Path):
    mimic, out = tmp_path / "mimic", tmp_path / "out"
    out.mkdir()
    write_table(
        mimic,
        "icu/d_items",
        [
            {
                "itemid": "220045",
                "label": "Heart Rate",
                "category": "Routine Vital Signs",
                "unitname": "bpm",
                "lownormalvalue": "60",
                "highnormalvalue": "100",
            },
            {"itemid": "223901", "label": "GCS - Motor Response", "category": "Neurological"},
        ],
    )
    base = {"subject_id": "1", "hadm_id": "2", "stay_id": "3", "storetime": "2150-01-01 10:05:00"}
    write_table(
        mimic,
        "icu/chartevents",
        [
            {
                **base,
                "charttime": "2150-01-01 10:00:00",
                "itemid": "220045",
                "value": "88",
                "valuenum": "88",
                "valueuom": "bpm",
            },
            {**base, "charttime": "2150-01-01 10:00:00", "itemid": "223901", "value": "Obeys Commands"},
            {
                **base,
                "charttime": "2150-01-01 11:00:00",
                "itemid": "220045",
                "value": "",
            },  # no value: left out
            {
                **base,
                "stay_id": "34934165",
                "charttime": "2151-10-03 05:14:00",
                "itemid": "220045",
                "value": "70",
            },
            {**base, "charttime": "2150-01-01 12:00:00", "itemid": "999999", "value": "1"},  # unknown item
        ],
    )
    report = run_job("chartevents", mimic, out, stride=1)
    assert report.written == {"MimicObservationChartevents.ndjson": 2}
    assert report.validation_failure_count == {}
    assert [(r["line"], r["reason"]) for r in report.rejected] == [
        (6, "unknown itemid 999999 (not in d_items)")
    ]
    hr, gcs = map(orjson.loads, (out / "MimicObservationChartevents.ndjson").read_bytes().splitlines())
    assert hr["id"] == fhir_id("ObservationChartevents", "3-2150-01-01 10:00:00-220045-88")
    assert hr["code"]["coding"][1]["code"] == "8867-4"
    assert hr["valueQuantity"] == {
        "value": 88,
        "unit": "bpm",
        "system": "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-units",
        "code": "bpm",
    }
    assert hr["referenceRange"][0]["low"]["value"] == 60 and hr["referenceRange"][0]["high"]["value"] == 100
    assert hr["effectiveDateTime"] == "2150-01-01T10:00:00-05:00"
    assert gcs["valueString"] == "Obeys Commands" and gcs["code"]["coding"][1]["code"] == "9268-4"
    assert gcs["category"][0]["coding"][0]["code"] == "Neurological"
