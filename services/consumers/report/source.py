"""Where `rounds report --run RUN` gets its document: the scorer's projections, through the scoring package.

Until services/consumers/scoring provides a builder of RunReport for (run, scorer version), `load_report` says
so and points to `--from-json`; the CLI is written against this one function so that wiring it is one change
here.
"""

from __future__ import annotations

from rounds.settings import Settings
from services.consumers.report.model import RunReport


class ReportUnavailable(LookupError):
    """No scored-run document for the run (not scored, unknown run or version, or no scorer installed)."""


def load_report(settings: Settings, run: str, version: str | None = None) -> RunReport:
    """The scored-run document of `run` at scorer `version` (None: the latest version that scored the run)."""
    raise ReportUnavailable(
        f"cannot build the report of run {run!r} from {settings.database_url}: the scorer's projections "
        "are not "
        "readable from this version of Rounds yet; render a document with --from-json FILE"
    )
