"""What a mapping run did: rows read, rejected rows (file:line, reason), absent or skipped tables,
resources written per file, validation failures. One `RunReport` per worker job, merged at the end."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_LISTED = 1000  # rejected rows / validation failures listed per table or file (all are counted)


@dataclass
class RunReport:
    rows_read: dict[str, int] = field(default_factory=dict)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    rejected_count: dict[str, int] = field(default_factory=dict)
    missing_tables: set[str] = field(default_factory=set)
    skipped_tables: dict[str, str] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)
    validation_failures: list[dict[str, Any]] = field(default_factory=list)
    validation_failure_count: dict[str, int] = field(default_factory=dict)
    validated: dict[str, int] = field(default_factory=dict)
    job_cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds of each job (where time goes)

    def reject(self, table: str, file: str, line: int, reason: str) -> None:
        count = self.rejected_count.get(table, 0)
        if count < MAX_LISTED:
            self.rejected.append({"table": table, "file": file, "line": line, "reason": reason})
        self.rejected_count[table] = count + 1

    def invalid(self, file: str, resource_id: str, reason: str) -> None:
        count = self.validation_failure_count.get(file, 0)
        if count < MAX_LISTED:
            self.validation_failures.append({"file": file, "id": resource_id, "reason": reason})
        self.validation_failure_count[file] = count + 1

    def merge(self, other: RunReport) -> None:
        for table, n in other.rows_read.items():
            self.rows_read[table] = max(n, self.rows_read.get(table, 0))
        seen = {(r["file"], r["line"], r["reason"]) for r in self.rejected}
        for table, n in other.rejected_count.items():
            if table not in self.rejected_count:  # the same table read by two jobs is reported once
                self.rejected_count[table] = n
                self.rejected.extend(
                    r
                    for r in other.rejected
                    if r["table"] == table and (r["file"], r["line"], r["reason"]) not in seen
                )
        self.missing_tables |= other.missing_tables
        self.skipped_tables.update(other.skipped_tables)
        for name in ("written", "validation_failure_count", "validated", "job_cpu"):
            getattr(self, name).update(getattr(other, name))
        self.validation_failures.extend(other.validation_failures)

    @property
    def any_rejected(self) -> bool:
        return bool(sum(self.rejected_count.values()) or self.skipped_tables)

    def as_summary(self, elapsed: float, out_files: dict[str, int] | None = None) -> dict[str, Any]:
        written = out_files if out_files is not None else self.written
        return {
            "files": {name: {"count": n} for name, n in sorted(written.items())},
            "total_resources": sum(written.values()),
            "rows_read": dict(sorted(self.rows_read.items())),
            "rejected_rows": sum(self.rejected_count.values()),
            "rejected_by_table": dict(sorted(self.rejected_count.items())),
            "rejected": sorted(self.rejected, key=lambda r: (r["file"], r["line"])),
            "missing_tables": sorted(self.missing_tables),
            "skipped_tables": dict(sorted(self.skipped_tables.items())),
            "validation": {
                "validated": dict(sorted(self.validated.items())),
                "failures": sum(self.validation_failure_count.values()),
                "failures_by_file": dict(sorted(self.validation_failure_count.items())),
                "listed": self.validation_failures,
            },
            "job_cpu_seconds": {job: round(s, 3) for job, s in sorted(self.job_cpu.items())},
            "elapsed_seconds": round(elapsed, 3),
        }
