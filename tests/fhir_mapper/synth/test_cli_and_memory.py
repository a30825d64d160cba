"""`rounds synth` end to end, its bad-input errors, and memory that stays flat as the patient count grows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rounds.cli import app
from tests.fhir_mapper.synth.conftest import rows

pytestmark = pytest.mark.slow  # whole pipelines, subprocesses or real services: not in the fast lane

runner = CliRunner()


def test_cli_writes_every_table_and_reports_counts(tmp_path: Path) -> None:
    result = runner.invoke(app, ["synth", "--patients", "4", "--seed", "2", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "hosp/labevents" in result.output and "total rows" in result.output
    assert len(list(rows(tmp_path / "out", "hosp/patients"))) == 4
    assert (tmp_path / "out" / "icu" / "chartevents.csv.gz").exists()
    assert (tmp_path / "out" / "note" / "discharge.csv.gz").exists()


def test_negative_patient_count_is_refused(tmp_path: Path) -> None:
    result = runner.invoke(app, ["synth", "--patients", "-3", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "--patients" in result.output
    assert not (tmp_path / "out").exists()


def test_unwritable_output_folder_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = runner.invoke(app, ["synth", "--patients", "2", "--out", str(blocker / "sub")])
    assert result.exit_code == 2
    assert "cannot write to" in result.output and "--out" in result.output


def test_zero_patients_still_writes_headers_and_dictionaries(tmp_path: Path) -> None:
    result = runner.invoke(app, ["synth", "--patients", "0", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert list(rows(tmp_path, "hosp/patients")) == []
    assert len(list(rows(tmp_path, "hosp/d_labitems"))) > 30


PEAK = """
import resource, sys
from pathlib import Path
from fhir_mapper.synth import generate
generate(Path(sys.argv[1]), int(sys.argv[2]), seed=1)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _peak_kib(out: Path, patients: int) -> int:
    done = subprocess.run(
        [sys.executable, "-c", PEAK, str(out), str(patients)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return int(done.stdout.strip())


def test_peak_memory_does_not_grow_with_the_patient_count(tmp_path: Path) -> None:
    small = _peak_kib(tmp_path / "small", 60)
    large = _peak_kib(tmp_path / "large", 600)
    assert large - small < 15 * 1024, (
        f"peak RSS grew {(large - small) / 1024:.1f} MiB from 60 to 600 patients"
    )
