"""The tuple form of the reader (hot tables) yields the same rows, lines, rejects and counts as the dict
form, on clean chunks, chunks with bad rows, multi-line quoted fields and a gzip cut short."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from fhir_mapper import reader
from fhir_mapper.reader import read_table, read_tuples, schema
from fhir_mapper.report import RunReport

TABLE = "icu/chartevents"


def _table(root: Path, cut: bool) -> None:
    columns = list(schema()[TABLE])
    lines = [",".join(columns)]
    for i in range(30):
        value = '"two\nlines"' if i == 4 else str(60 + i)
        warning = "x" if i == 7 else "0"  # a malformed int in a column the mapper does not read
        charttime = "2180-01-01 0:00" if i == 9 else "2180-01-01 00:00:00"
        lines.append(f"1,2,3,4,{charttime},,2200{i % 3},{value},{60 + i},bpm,{warning}")
    lines.insert(12, "1,2,3")  # wrong number of fields
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    (root / "icu").mkdir(parents=True)
    (root / f"{TABLE}.csv.gz").write_bytes(data[: len(data) * 2 // 3] if cut else data)


@pytest.mark.parametrize("cut", [False, True])
def test_tuple_and_dict_rows_agree(tmp_path: Path, monkeypatch, cut: bool) -> None:
    monkeypatch.setattr(reader, "_CHUNK", 8)  # several chunks, some clean, some with rejects
    _table(tmp_path, cut)
    columns = ("stay_id", "charttime", "itemid", "value")
    dict_report, tuple_report = RunReport(), RunReport()
    dicts = [(*(r[c] for c in columns), r["_line"]) for r in read_table(tmp_path, TABLE, dict_report)]
    tuples = list(read_tuples(tmp_path, TABLE, tuple_report, columns, None))
    assert tuples == dicts
    assert tuple_report.rejected == dict_report.rejected
    assert tuple_report.rows_read == dict_report.rows_read
    reasons = {r["line"]: r["reason"] for r in tuple_report.rejected}
    if not cut:
        assert len(tuples) == 28 and tuple_report.rows_read[TABLE] == 31
        assert ("3", "2180-01-01 00:00:00", "22001", "two\nlines", 7) in tuples  # line of a 2-line row
        assert "warning" in reasons[10] and "charttime" in reasons[12] and "3 fields" in reasons[14]
    else:
        assert "unreadable" in tuple_report.rejected[-1]["reason"]
    only_read = list(read_tuples(tmp_path, TABLE, RunReport(), columns, columns))
    assert len(only_read) == len(tuples) + (1 if not cut else 0)  # `warning` unchecked when not asked
