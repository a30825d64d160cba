"""Where `rounds report --run RUN` gets its document: the scorer's projections, through the scoring package's
`load_report(engine, run, version)` (services/consumers/scoring/api.py).

The report depends on the scorer, never the other way round (both read the score model in contracts/). The
scorer is imported when a report is asked for, so the report (and `--from-json`) works on an installation
without it; a run with no stored scores is an error, not an empty report.
"""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError

from contracts.score import RunReport
from rounds.wiring import Wiring

SCORING_API = "services.consumers.scoring.api"


class ReportUnavailable(LookupError):
    """No scored-run document for the run (not scored, unknown run or version, or no scorer installed)."""


def load_report(wiring: Wiring, run: str, version: str | None = None) -> RunReport:
    """The scored-run document of `run` at scorer `version` (None: the latest version that scored the run),
    read on the process's engine (and, for what to say when there is none, its log)."""
    hint = "score it with `rounds score --run RUN` or render a document with --from-json FILE"
    try:
        from services.consumers.scoring.api import load_report as scored_report
    except ModuleNotFoundError as exc:
        if exc.name is None or not SCORING_API.startswith(exc.name):
            raise  # the scoring package is there but one of its own imports is missing: a real error
        raise ReportUnavailable(
            f"cannot read the scores of run {run!r}: this installation has no scorer ({SCORING_API}); "
            "render a document with --from-json FILE"
        ) from None
    try:
        report: RunReport = scored_report(wiring.engine(), run, version)
    except SQLAlchemyError as exc:
        message = f"cannot read the scores of run {run!r}: {type(exc).__name__}: {exc}"
        raise ReportUnavailable(message) from None
    if not report.sessions:
        from services.consumers.report.run_state import load_run_state, next_step

        at = f"scorer version {version!r}" if version else "any scorer version"
        state = load_run_state(wiring.bus(), run)
        if version is None and (state.started == 0 or state.open or state.ended.get("interrupted")):
            raise ReportUnavailable(f"no scores for run {run!r}: {next_step(state, run)}; or render a "
                                    "document with --from-json FILE")
        where = wiring.settings.database_url
        raise ReportUnavailable(f"no scores for run {run!r} at {at} in {where}; {hint}")
    return report
