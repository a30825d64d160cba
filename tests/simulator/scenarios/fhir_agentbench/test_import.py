"""`rounds scenarios import fhir-agentbench`: a small question file written for these tests in the peer's
published CSV format (tests/simulator/scenarios/fhir_agentbench/fixtures/questions_small.csv: every gold
shape, a gold id the
record lacks, a patient it lacks) over the simulator's hand-written record, and bad files that must stop
the import with their row and column, writing nothing."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rounds.settings import Settings
from services.simulator.scenarios.fhir_agentbench.importer import import_questions
from services.simulator.scenarios.fhir_agentbench.rows import BadRow, read_questions
from tests.wiring import app_on

SMALL = Path(__file__).parent / "fixtures" / "questions_small.csv"


def _import(url: str):
    return asyncio.run(import_questions(app_on(Settings(database_url=url)), read_questions(SMALL)))


def test_the_import_counts_skips_by_reason_and_dropped_gold_by_type(record_url: str) -> None:
    imported = _import(record_url)
    s = imported.summary
    assert (s["questions"], s["sessions"]) == (13, 12)
    assert s["skipped"] == {"patient_absent": 1, "not_mappable": 0, "no_clock": 0}
    assert s["gold_ids"]["dropped_absent_from_record"] == {"Observation": 1}
    assert s["gold_ids"]["kept"] == {"MedicationRequest": 2, "Observation": 12, "Patient": 1}
    assert s["by_table"] == {"labevents": 7, "outputevents": 1, "patients": 1, "prescriptions": 3}
    by_id = {sc.source["question_id"]: sc for sc in imported.scenarios}
    value = by_id["q-value"]
    assert value.turns[0].sources_by_type() == {"Observation": ["sim-cr-3"]}  # the absent id is dropped
    assert value.patient == "Patient/sim-p1" and value.family == "fhir-agentbench"
    assert value.source["main_table"] == "labevents"
    # the clock is after the patient's last data (the last creatinine, 2150-01-03 06:00 UTC)
    assert value.now.isoformat() == "2150-01-03T06:01:00+00:00"
    dose = by_id["q-dose"].turns[0]
    assert dose.text.en.explicit == ("What dose of apixaban was prescribed to patient 1?\n"
                                     "I want to use the dose_val_rx column for the dose of any medication.")
    kinds = {item.kind: item.params for item in by_id["q-no"].turns[0].rubric}
    assert kinds["answer_correct"] == {"gold": [[0]], "boolean": True}
    assert {"retrieval_recall", "retrieval_precision", "llm_judge"} <= set(kinds)
    assert by_id["q-list"].turns[0].rubric[0].params["gold"] == [["2150-01-01 01:00:00"],
                                                                 ["2150-01-02 01:00:00"]]
    assert by_id["q-empty"].turns[0].facts == []
    assert by_id["q-null"].turns[0].answer.en.startswith("No record")


def _cli(tmp_path: Path, url: str, csv_file: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ROUNDS_DATABASE_URL": url, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "rounds.cli", "scenarios", "import", "fhir-agentbench",
                           str(csv_file), "--out", str(tmp_path / "fab.jsonl")],
                          capture_output=True, text=True, timeout=300, env=env)


def test_the_command_writes_the_sessions_and_prints_the_counts(tmp_path: Path, record_url: str) -> None:
    res = _cli(tmp_path, record_url, SMALL)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "12 sessions of 13 questions" in res.stdout
    assert "skipped: patient_absent=1, not_mappable=0, no_clock=0" in res.stdout
    assert "gold ids dropped (absent from the record): Observation=1" in res.stdout
    lines = (tmp_path / "fab.jsonl").read_text().splitlines()
    assert len(lines) == 12
    summary = json.loads((tmp_path / "fab.summary.json").read_text())
    assert summary["skipped"]["patient_absent"] == 1


def _rewrite(tmp_path: Path, change) -> Path:
    with SMALL.open(newline="") as fh:
        rows = list(csv.reader(fh))
    change(rows)
    out = tmp_path / "bad.csv"
    with out.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    return out


def _set(row: int, column: str, value: str):
    def change(rows: list[list[str]]) -> None:
        rows[row][rows[0].index(column)] = value
    return change


def _drop_column(column: str):
    def change(rows: list[list[str]]) -> None:
        i = rows[0].index(column)
        for r in rows:
            del r[i]
    return change


BAD = [
    (_drop_column("true_fhir_ids"), "row 0 (question ?), column true_fhir_ids: missing from the header"),
    (_set(3, "true_fhir_ids", "{'Observation': ['sim-cr-1'"),
     "row 3 (question q-count), column true_fhir_ids"),
    (_set(2, "true_fhir_ids", "['sim-cr-1']"),
     "row 2 (question q-no), column true_fhir_ids: expected a dict"),
    (_set(5, "main_table_name", "chartevent"), "row 5 (question q-ratio), column main_table_name: unknown"),
    (_set(4, "true_answer", "[[2.4"), "row 4 (question q-value), column true_answer"),
    (_set(6, "patient_fhir_id", ""), "row 6 (question q-time), column patient_fhir_id"),
    (_set(7, "mappable_to_fhir", "maybe"), "row 7 (question q-text), column mappable_to_fhir"),
]


@pytest.mark.parametrize(("change", "message"), BAD)
def test_a_bad_row_names_row_and_column_and_nothing_is_imported(change, message: str, tmp_path: Path) -> None:
    bad = _rewrite(tmp_path, change)
    with pytest.raises(BadRow) as raised:
        read_questions(bad)
    assert message in str(raised.value)


def test_the_command_exits_non_zero_on_a_bad_row_and_writes_nothing(tmp_path: Path, record_url: str) -> None:
    bad = _rewrite(tmp_path, _set(3, "main_table_name", "nosuchtable"))
    res = _cli(tmp_path, record_url, bad)
    assert res.returncode == 2
    assert "row 3 (question q-count), column main_table_name: unknown table 'nosuchtable'" in res.stderr
    assert "nothing imported" in res.stderr
    assert not (tmp_path / "fab.jsonl").exists() and not (tmp_path / "fab.summary.json").exists()
