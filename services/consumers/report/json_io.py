"""The report's JSON: exactly RunReport's own serialization (field names as declared, no aliases), so what
`rounds report --json` writes, `rounds report --from-json` reads back unchanged.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from contracts.score import RunReport


class ReportFileError(ValueError):
    """A report file that cannot be read or is not a RunReport document; the message names file and reason."""


def to_json(report: RunReport) -> str:
    return report.model_dump_json(indent=2) + "\n"


def read_json(path: Path) -> RunReport:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportFileError(f"{path}: cannot read: {exc}") from None
    try:
        return RunReport.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise ReportFileError(f"{path}: not a scored-run document: {where}: {first['msg']}") from None
