"""What a mapper job sees: streaming rows, the output sink, the run report and compact lookups
(dictionaries such as d_labitems/d_items/d_icd_*), each loaded once per process when first asked."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fhir_mapper.output import NdjsonSink
from fhir_mapper.reader import read_table, read_tuples, table_path
from fhir_mapper.report import RunReport
from fhir_mapper.spill import SpillGroups
from rounds.shards import ALL, Shard


@dataclass
class MapContext:
    mimic: Path
    sink: NdjsonSink
    report: RunReport
    group_limit: int = 100_000  # values held in memory per group-by before spilling to disk
    shard: Shard = ALL  # the patients this run maps (rounds/shards.py): the others' rows are not read
    _cache: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.emit = self.sink.emit  # hot path (once per resource): skip one call layer

    def rows(self, table: str, columns: tuple[str, ...] | None = None) -> Iterator[dict[str, str]]:
        return read_table(self.mimic, table, self.report, columns, self.shard)

    def tuples(
        self, table: str, columns: tuple[str, ...], checked: tuple[str, ...] | None = None
    ) -> Iterator[tuple]:
        """Rows of a hot table as tuples of `columns` plus the line (reader.read_tuples); `checked`
        defaults to every column of the table."""
        return read_tuples(self.mimic, table, self.report, columns, checked, self.shard)

    def has(self, table: str) -> bool:
        return table_path(self.mimic, table) is not None

    def groups(self, merge: Callable[[Any, Any], Any], light: bool = False) -> SpillGroups:
        """A bounded-memory group-by that spills next to the output (see spill.py); `light` groups (a few
        numbers per key) may hold 5x more values."""
        limit = self.group_limit * (5 if light else 1)
        return SpillGroups(merge, limit=limit, directory=self.sink.out)

    def emit(self, profile: str, resource: dict[str, Any]) -> None:
        self.sink.emit(profile, resource)

    def reject(self, table: str, row: dict[str, Any], reason: str) -> None:
        """A row valid as CSV but unusable for mapping (e.g. an unknown itemid)."""
        self.reject_line(table, row["_line"], reason)

    def reject_line(self, table: str, line: int, reason: str) -> None:
        path = table_path(self.mimic, table)
        name = str(path.relative_to(self.mimic)) if path else table
        self.report.reject(table, name, line, reason)

    def lookup(self, name: str) -> Any:
        if name not in self._cache:
            self._cache[name] = LOOKUPS[name](self)
        return self._cache[name]


def _d_items(ctx: MapContext) -> dict[str, dict[str, str]]:
    keep = ("label", "category", "unitname", "lownormalvalue", "highnormalvalue")
    return {r["itemid"]: {k: r[k] for k in keep} for r in ctx.rows("icu/d_items")}


def _d_labitems(ctx: MapContext) -> dict[str, tuple[str, str]]:
    rows = ctx.rows("hosp/d_labitems", ("itemid", "label", "fluid"))
    return {r["itemid"]: (r["label"], r["fluid"]) for r in rows}


def _icd_titles(table: str):
    def load(ctx: MapContext) -> dict[tuple[str, str], str]:
        rows = ctx.rows(table, ("icd_code", "icd_version", "long_title"))
        return {(r["icd_code"].strip(), r["icd_version"]): r["long_title"] for r in rows}

    return load


def _subjects(ctx: MapContext) -> set[str]:
    return {r["subject_id"] for r in ctx.rows("hosp/patients", ("subject_id",))}


def _prescription_pharmacy_ids(ctx: MapContext) -> set[int]:
    return {int(r["pharmacy_id"]) for r in ctx.rows("hosp/prescriptions") if r["pharmacy_id"]}


def _edstay_intime(ctx: MapContext) -> dict[str, str]:
    return {r["stay_id"]: r["intime"] for r in ctx.rows("ed/edstays")}


LOOKUPS = {
    "d_items": _d_items,
    "d_labitems": _d_labitems,
    "hosp/d_icd_diagnoses": _icd_titles("hosp/d_icd_diagnoses"),
    "hosp/d_icd_procedures": _icd_titles("hosp/d_icd_procedures"),
    "subjects": _subjects,
    "prescription_pharmacy_ids": _prescription_pharmacy_ids,
    "edstay_intime": _edstay_intime,
}
