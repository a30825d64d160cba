"""In-process entry points (the CLI and `rounds run` call these; the same code as the long-lived service).

- `score_run(settings, run_id, ...) -> RunReport`: re-score one run from the log with a fresh consumer group
  (a new buffer suffix), write its scores under `scorer_version` beside other versions, publish them, and
  return the report. The same version twice gives identical score rows.
- `load_report(engine, run_id, scorer_version=None) -> RunReport`: the stored scores (latest version by
  default) as the report document.
- `scorer_runner(...)`: the live group (`rounds consume scorer`).
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from pathlib import Path

import httpx
from sqlalchemy import Engine, inspect, select

from events.bus import Bus
from events.projections.replay import new_suffix
from events.projections.runner import ProjectionRunner
from events.relay import Relay
from events.topics import SCORES
from rounds.db import make_engine
from rounds.settings import Settings
from services.consumers.report.model import RunReport, SessionScore
from services.consumers.scoring.fhir_state import fhir_client, read_state
from services.consumers.scoring.metrics import build_report
from services.consumers.scoring.projection import ScorerProjection
from services.consumers.scoring.scenarios import load_scenarios
from services.consumers.scoring.scorer import SCORER_VERSION, Judge

LIVE_GROUP = "scorer"


def make_projection(client: httpx.Client, **kwargs) -> ScorerProjection:
    def state(session: str, scenario):
        return read_state(client, session, scenario)

    return ScorerProjection(read_state=state, **kwargs)


def scorer_runner(bus: Bus, engine: Engine, client: httpx.Client, *, group_id: str = LIVE_GROUP,
                  batch_size: int = 200, **kwargs) -> ProjectionRunner:
    projection = make_projection(client, **kwargs)
    return ProjectionRunner(bus, engine, projection, group_id=group_id, batch_size=batch_size)


def run_service(runner: ProjectionRunner, relay: Relay, stop: threading.Event | None = None,
                idle_exit_s: float | None = None, until_caught_up: bool = False) -> None:
    """Poll and apply batches; after each, publish what the batch queued (the relay)."""
    import time

    runner.open()
    targets = runner.end_targets() if until_caught_up else None
    last = time.monotonic()
    while not (stop and stop.is_set()) and not runner._stop.is_set():
        if targets is not None and runner.caught_up(targets):
            break
        if runner.poll_once().batches:
            last = time.monotonic()
        relay.drain()
        if idle_exit_s is not None and time.monotonic() - last >= idle_exit_s:
            break
    relay.drain()


def score_run(
    settings: Settings,
    run_id: str,
    *,
    scorer_version: str | None = None,
    scenarios: str | Path | None = None,
    bus: Bus | None = None,
    topics: tuple[str, ...] | None = None,
    scores_topic: str = SCORES,
    client: httpx.Client | None = None,
    judge: Judge | None = None,
    timeout_s: float | None = 600,
) -> RunReport:
    version = scorer_version or SCORER_VERSION
    fresh = load_scenarios(scenarios) if scenarios else None
    with ExitStack() as stack:
        if bus is None:
            from events.factory import open_bus

            bus = open_bus(settings)
            stack.callback(bus.close)
        engine = make_engine(settings.database_url)
        stack.callback(engine.dispose)
        if client is None:
            client = stack.enter_context(fhir_client(settings))
        suffix = new_suffix()
        projection = make_projection(client, suffix=suffix, topics=topics, run_id=run_id,
                                     scorer_version=version, scenarios=fresh, judge=judge,
                                     scores_topic=scores_topic)
        runner = ProjectionRunner(bus, engine, projection, group_id=f"scorer.rescore.{suffix}",
                                  batch_size=500, poll_timeout_s=0.2, publish_dead_letters=False)
        try:
            with runner:
                runner.run(until_caught_up=True, timeout_s=timeout_s)
        finally:
            for base in ("scoring_events", "scoring_open"):  # the group's buffers; scores stay
                projection.tables[base].drop(engine, checkfirst=True)
        Relay(engine, bus).drain()
        return load_report(engine, run_id, version)


def versions(engine: Engine, run_id: str) -> list[str]:
    """Scorer versions stored for a run, oldest first."""
    table = ScorerProjection().tables["score_versions"]
    if not inspect(engine).has_table(table.name):
        return []
    with engine.connect() as conn:
        rows = conn.execute(select(table.c.scorer_version).where(table.c.run_id == run_id)
                            .order_by(table.c.first_scored, table.c.scorer_version)).scalars()
        return list(rows)


def load_report(engine: Engine, run_id: str, scorer_version: str | None = None) -> RunReport:
    """The run's stored scores as a RunReport (the latest scorer version unless one is named)."""
    known = versions(engine, run_id)
    version = scorer_version or (known[-1] if known else SCORER_VERSION)
    table = ScorerProjection().tables["score_sessions"]
    sessions: list[SessionScore] = []
    if inspect(engine).has_table(table.name):
        with engine.connect() as conn:
            rows = conn.execute(select(table.c.document).where(
                table.c.run_id == run_id, table.c.scorer_version == version)).scalars()
            sessions = [SessionScore.model_validate_json(doc) for doc in rows]
    return build_report(run_id, version, sessions)


def open_engine(settings: Settings) -> Engine:
    return make_engine(settings.database_url)
