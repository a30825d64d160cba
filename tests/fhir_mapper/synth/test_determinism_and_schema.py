"""Same seed -> same bytes; every file follows fhir_mapper/schema/mimic_iv_tables.json exactly."""

from __future__ import annotations

import gzip
import hashlib
import importlib
import re
from pathlib import Path

import pytest

from fhir_mapper.synth import generate
from fhir_mapper.synth.context import ID_BLOCKS, IdBlockFull, Ids
from fhir_mapper.synth.tables import schema
from tests.fhir_mapper.synth.conftest import N_PATIENTS, rows

PATTERNS = {
    "int": re.compile(r"-?\d+"),
    "float": re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?"),
    "date": re.compile(r"\d{4}-\d{2}-\d{2}"),
    "datetime": re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"),
}


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.gz"))
    }


def test_same_seed_gives_identical_bytes_and_other_seeds_differ(tmp_path: Path) -> None:
    generate(tmp_path / "a", 25, seed=5)
    generate(tmp_path / "b", 25, seed=5)
    generate(tmp_path / "c", 25, seed=6)
    a, b, c = _digests(tmp_path / "a"), _digests(tmp_path / "b"), _digests(tmp_path / "c")
    assert a == b
    assert len(a) == len(schema())
    assert a["hosp/labevents.csv.gz"] != c["hosp/labevents.csv.gz"]
    assert a["icu/chartevents.csv.gz"] != c["icu/chartevents.csv.gz"]
    # the gzip header carries no name and no mtime
    header = (tmp_path / "a" / "hosp" / "patients.csv.gz").read_bytes()[:10]
    assert header[4:8] == b"\0\0\0\0" and header[3] & 0x08 == 0


def test_a_patient_does_not_depend_on_how_many_follow(tmp_path: Path) -> None:
    generate(tmp_path / "small", 3, seed=9)
    generate(tmp_path / "large", 8, seed=9)
    small = list(rows(tmp_path / "small", "hosp/admissions"))
    large = list(rows(tmp_path / "large", "hosp/admissions"))
    assert small == large[: len(small)]


def test_every_table_has_schema_header_and_values_of_the_column_type(synth_dir: Path) -> None:
    for table, columns in schema().items():
        path = synth_dir / f"{table}.csv.gz"
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            assert handle.readline().rstrip("\n").split(",") == list(columns), table
        count = 0
        for row in rows(synth_dir, table):
            count += 1
            assert list(row) == list(columns)
            for column, typ in columns.items():
                value = row[column]
                if value and typ in PATTERNS:
                    assert PATTERNS[typ].fullmatch(value), f"{table}.{column}={value!r} is not {typ}"
        assert count > 0, f"{table} is empty"


def test_dates_are_shifted_into_2110_2210(synth_dir: Path) -> None:
    for table, columns in schema().items():
        date_columns = [c for c, t in columns.items() if t in ("date", "datetime")]
        for row in rows(synth_dir, table):
            for column in date_columns:
                if row[column]:
                    assert 2110 <= int(row[column][:4]) <= 2210, (table, column, row[column])


def test_unknown_column_is_refused(tmp_path: Path) -> None:
    from fhir_mapper.synth.tables import TableSet

    with TableSet(tmp_path) as tables:
        try:
            tables.write("hosp/patients", {"subject_id": 1, "sex": "F"})
        except KeyError as exc:
            assert "sex" in str(exc)
        else:
            raise AssertionError("an unknown column was accepted")


def test_a_patient_outgrowing_its_id_block_is_a_clear_error() -> None:
    ids = Ids(index=3)
    hadm = ID_BLOCKS["hadm_id"]
    drawn = [ids.new("hadm_id") for _ in range(hadm.size)]
    assert drawn == list(range(hadm.start + 3 * hadm.size, hadm.start + 4 * hadm.size))
    with pytest.raises(IdBlockFull, match=r"patient 3 needs more than 4 hadm_ids"):
        ids.new("hadm_id")
    assert ids.new("labevent_id") == ID_BLOCKS["labevent_id"].start + 3 * ID_BLOCKS["labevent_id"].size


def test_session_set_has_the_expected_patients(synth_dir: Path) -> None:
    subjects = [int(r["subject_id"]) for r in rows(synth_dir, "hosp/patients")]
    assert len(subjects) == N_PATIENTS == len(set(subjects))
    assert min(subjects) >= 20_000_000


def test_extra_draws_in_one_generator_leave_other_tables_unchanged(tmp_path: Path, monkeypatch) -> None:
    gen = importlib.import_module("fhir_mapper.synth.generate")  # the package re-exports generate()

    generate(tmp_path / "before", 12, seed=4)
    original = gen.write_meds

    def greedy_meds(ctx, patient, adm, seq):  # a future, more elaborate eMAR that draws more numbers
        for _ in range(50):
            ctx.rng.random()
        original(ctx, patient, adm, seq)

    monkeypatch.setattr(gen, "write_meds", greedy_meds)
    generate(tmp_path / "after", 12, seed=4)
    before, after = _digests(tmp_path / "before"), _digests(tmp_path / "after")
    for table in ("hosp/labevents", "icu/chartevents", "hosp/microbiologyevents", "ed/vitalsign"):
        assert before[f"{table}.csv.gz"] == after[f"{table}.csv.gz"], table
    assert before["hosp/emar.csv.gz"] != after["hosp/emar.csv.gz"]
