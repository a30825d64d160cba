"""Bad input is reported with file:line and skipped; the rest of the run completes; the exit code says so."""

from __future__ import annotations

import csv
import gzip
import io
import shutil
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from fhir_mapper.pipeline import EXIT_REJECTED, run_map
from rounds.cli import app

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

KEEP = ["hosp/patients", "hosp/admissions", "hosp/transfers", "hosp/d_labitems", "hosp/d_icd_procedures"]


def _rows(path: Path, n: int | None = None) -> tuple[list[str], list[list[str]]]:
    with gzip.open(path, "rt", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        rows = [row for _, row in zip(range(n) if n else iter(int, 1), reader, strict=False)]
    return header, rows


def _write(path: Path, header: list[str], rows: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header, *rows])
    path.write_bytes(gzip.compress(buf.getvalue().encode()))


@pytest.fixture(scope="module")
def bad_mimic(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bad_mimic")
    for table in KEEP:
        (root / table).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(demo_dir / f"{table}.csv.gz", root / f"{table}.csv.gz")
    header, rows = _rows(demo_dir / "hosp/labevents.csv.gz", 40)
    col = {c: i for i, c in enumerate(header)}
    bad_date, bad_number, unknown_item = list(rows[5]), list(rows[6]), list(rows[7])
    bad_date[col["charttime"]] = "2180-13-45 25:00"
    bad_number[col["valuenum"]] = "12..3"
    unknown_item[col["itemid"]] = "99999999"
    rows[5], rows[6], rows[7] = bad_date, bad_number, unknown_item  # data lines 7, 8, 9 of the file
    _write(root / "hosp/labevents.csv.gz", header, rows)
    # a gzip cut in the middle: the rows before the cut are mapped, the rest is reported
    micro = (demo_dir / "hosp/microbiologyevents.csv.gz").read_bytes()
    (root / "hosp/microbiologyevents.csv.gz").write_bytes(micro[: len(micro) // 2])
    # a table missing a column the schema requires is skipped as a whole
    header, rows = _rows(demo_dir / "hosp/procedures_icd.csv.gz")
    drop = header.index("icd_version")
    _write(
        root / "hosp/procedures_icd.csv.gz",
        header[:drop] + header[drop + 1 :],
        [r[:drop] + r[drop + 1 :] for r in rows],
    )
    return root


@pytest.fixture(scope="module")
def bad_run(bad_mimic: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, int]:
    out = tmp_path_factory.mktemp("bad_out")
    summary, code = run_map(bad_mimic, out, workers=1)
    return out, summary, code


def test_bad_rows_are_reported_with_file_line_and_reason(bad_run):
    _, summary, code = bad_run
    labs = {r["line"]: r for r in summary["rejected"] if r["file"] == "hosp/labevents.csv.gz"}
    assert set(labs) == {7, 8, 9}
    assert "charttime" in labs[7]["reason"] and "datetime" in labs[7]["reason"]
    assert "valuenum" in labs[8]["reason"] and "float" in labs[8]["reason"]
    assert "unknown itemid 99999999" in labs[9]["reason"]
    assert summary["files"]["MimicObservationLabevents.ndjson"]["count"] == 37
    assert code == EXIT_REJECTED


def test_truncated_gzip_keeps_what_was_read_and_reports_where_it_stopped(bad_run):
    _, summary, _ = bad_run
    [cut] = [r for r in summary["rejected"] if r["file"] == "hosp/microbiologyevents.csv.gz"]
    assert "unreadable" in cut["reason"] and cut["line"] > 100
    assert 0 < summary["rows_read"]["hosp/microbiologyevents"] < 2899
    assert 0 < summary["files"]["MimicSpecimen.ndjson"]["count"] < 1336


def test_missing_column_skips_the_table_and_absent_tables_are_listed(bad_run):
    out, summary, _ = bad_run
    assert "icd_version" in summary["skipped_tables"]["hosp/procedures_icd"]
    assert "MimicProcedure.ndjson" not in summary["files"]
    assert {"icu/icustays", "icu/chartevents", "hosp/prescriptions", "ed/edstays"} <= set(
        summary["missing_tables"]
    )
    # the rest of the run completed
    assert summary["files"]["MimicPatient.ndjson"]["count"] == 100
    assert summary["files"]["MimicEncounter.ndjson"]["count"] == 275
    assert orjson.loads((out / "summary.json").read_bytes())["rejected_rows"] == summary["rejected_rows"] == 4


def test_cli_exit_code_and_clean_run(bad_mimic: Path, tmp_path: Path):
    runner = CliRunner()
    result = runner.invoke(
        app, ["map", "--mimic", str(bad_mimic), "--out", str(tmp_path / "o"), "--workers", "2"]
    )
    assert result.exit_code == EXIT_REJECTED, result.output
    assert "4 rejected rows, 1 skipped tables" in result.output
    clean = tmp_path / "clean"
    for table in KEEP:
        (clean / table).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(bad_mimic / f"{table}.csv.gz", clean / f"{table}.csv.gz")
    result = runner.invoke(app, ["map", "--mimic", str(clean), "--out", str(tmp_path / "c"), "--validate"])
    assert result.exit_code == 0, result.output
    summary = orjson.loads((tmp_path / "c" / "summary.json").read_bytes())
    assert summary["validation"]["validated"]["MimicPatient.ndjson"] == 100
    assert (
        runner.invoke(app, ["map", "--mimic", str(tmp_path / "nope"), "--out", str(tmp_path / "x")]).exit_code
        == 2
    )


def test_a_failing_job_is_reported_and_the_others_complete(bad_mimic: Path, tmp_path: Path, monkeypatch):
    import dataclasses

    from fhir_mapper import jobs

    def explode(ctx):
        raise ValueError("boom")

    monkeypatch.setitem(jobs.JOBS, "labevents", dataclasses.replace(jobs.JOBS["labevents"], run=explode))
    out = tmp_path / "o"
    out.mkdir()
    (out / "MimicStale.ndjson").write_text("{}\n")  # files of an earlier run are removed
    summary, code = run_map(bad_mimic, out, workers=1)
    assert summary["skipped_tables"]["job labevents"] == "failed: ValueError: boom"
    assert summary["files"]["MimicPatient.ndjson"]["count"] == 100
    assert not (out / "MimicStale.ndjson").exists() and code == EXIT_REJECTED
