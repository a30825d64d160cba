"""In-process entry points (the CLI and `rounds run` call these; the same code as the long-lived service).

- `score_run(wiring, run_id, ...) -> RunReport`: re-score one run from the log with a fresh consumer group
  (a new buffer suffix), write its scores under `scorer_version` beside other versions, publish them, and
  return the report. The same version twice gives identical score rows.
- `load_report(engine, run_id, scorer_version=None) -> RunReport`: the stored scores (latest version by
  default) as the report document.
- `make_projection(client, engine, ...)`: the scorer projection (`rounds consume scorer` runs it live).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path

import httpx
import orjson
from sqlalchemy import Engine, inspect, select

from contracts.scenario import Scenario
from contracts.score import RunReport, SessionScore
from events.bus import Bus
from events.projections.replay import new_suffix
from events.topics import SCORES
from foundation.gcpause import gc_paused
from rounds.wiring import Wiring
from services.consumers.scoring import members
from services.consumers.scoring.check_inputs import FinalState
from services.consumers.scoring.fhir_state import Client, LazyClient, StateReader
from services.consumers.scoring.members import make_projection  # noqa: F401  (an entry point of this module)
from services.consumers.scoring.metrics import build_report
from services.consumers.scoring.projection import ScorerProjection
from services.consumers.scoring.scenarios import load_scenarios, scenario_of
from services.consumers.scoring.score_rows import document_digest, store_scores
from services.consumers.scoring.scorer import SCORER_VERSION, score_session
from services.consumers.scoring.turn_parts import Judge

LIVE_GROUP = "scorer"


def score_run(
    wiring: Wiring,
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
    workers: int | None = 1,
    group: str | None = None,
) -> RunReport:
    """`workers` members of the re-score's group (None: `auto_workers`); those past the first run in child
    processes, which need the settings' own bus, FHIR API and no judge object (they make their own engine
    with the root's factory). `group`: the group's name instead of a fresh one, so members on other machines
    join it (`rounds score --group NAME --join`, `members.join`); this process reports when the group is
    done. The bus and the engine are the process's (`wiring`): the re-score does not close them."""
    settings = wiring.settings
    spec = members.MemberSpec(settings, run_id, scorer_version or SCORER_VERSION,
                              members.group_suffix(group) if group else new_suffix(),
                              Path(scenarios) if scenarios else None, topics, scores_topic, timeout_s,
                              engine_factory=wiring.engine_factory)
    fresh = load_scenarios(scenarios) if scenarios else None
    with ExitStack() as stack:
        own = bus is None and client is None and judge is None  # what a member elsewhere can rebuild
        bus = bus or wiring.bus()
        engine = wiring.engine()
        if client is None:  # made on the first sandbox read (none when the log recorded every state)
            client = stack.enter_context(LazyClient(settings, engine))
        projection = members.projection_of(spec, client, engine, judge=judge, scenarios=fresh)
        runner = members.runner_of(spec, bus, engine, projection)
        if workers is None:
            workers = members.auto_workers(bus, projection.topics) if own else 1
        elif workers > 1 and not own:
            raise ValueError("members in other processes need the settings' own bus and FHIR API, no judge")
        try:
            with runner:  # joined (and the tables made) before the others start
                children = members.start(spec, workers - 1)
                try:
                    runner.run(until_caught_up=True, timeout_s=timeout_s)
                finally:
                    members.reap(children)
            _finalize_waiting(engine, projection, client)
        finally:
            for base in ("scoring_events", "scoring_open"):  # the group's buffers; scores stay
                projection.tables[base].drop(engine, checkfirst=True)
        with gc_paused():  # ~10 objects per check of every turn, all alive until the report is built
            return load_report(engine, run_id, spec.scorer_version, known=projection.documents)


def _finalize_waiting(engine: Engine, projection: ScorerProjection, client: Client) -> None:
    """A re-score ends where the log ends: a session still waiting for a sandbox state that the log does not
    hold is scored from its replayed writes (replay.py) and the shared record's values read over the FHIR
    API; one without its scenario (or whose record values cannot be read) is stored as unscorable (counted
    in the report, never scored 0) rather than left out. Scored outside any transaction (an optional judge
    is asked then), stored in one."""
    from contracts.trajectory import Trajectory
    from contracts.trajectory_log import LoggedEvent
    from services.consumers.scoring import replay, stored_text
    from services.consumers.scoring.one_session import score_trajectory

    open_, events = projection.tables["scoring_open"], projection.tables["scoring_events"]
    reader = StateReader(client)
    logs = []
    with engine.connect() as conn:
        waiting = conn.execute(select(open_.c.session_id).where(open_.c.status == "waiting")).scalars().all()
        for session_id in waiting:
            rows = conn.execute(select(events.c.type, events.c.data, events.c.time).where(
                events.c.session_id == session_id).order_by(events.c.position)).all()
            logged = [LoggedEvent(t, orjson.loads(d), tm) for t, d, tm in rows]
            logs.append((session_id, logged, stored_text.load(conn, stored_text.refs(logged))))

    def replayed(log: Trajectory, scenario: Scenario | None) -> FinalState | None:
        """The replayed writes with the record's values read over the FHIR API (None: not readable)."""
        try:
            values = reader.values_for(scenario) if scenario is not None else None
        except (httpx.TransportError, httpx.HTTPStatusError):
            values = None
        return None if values is None else replay.replayed_state_of(log, values)[0]

    scores = []
    for session_id, logged, stored in logs:
        log, state, score = score_trajectory(session_id, logged, stored, replayed, version=projection.version,
                                             judge=projection.judge, scenarios=projection.scenarios)
        if state is not None:
            scores.append(score)
            continue
        scenario = scenario_of(log.started, projection.scenarios)
        score = score_session(log, None, None)
        score = score.model_copy(update={"excluded": "unscorable", "error": "sandbox state not found",
                                         "family": None})
        if scenario is not None:
            score = score.model_copy(update={"scenario": scenario.id, "family": scenario.family,
                                             "difficulty": scenario.difficulty})
        scores.append(score)
    if scores:
        with engine.begin() as conn:
            store_scores(conn, projection.tables, projection.version, scores)


def versions(engine: Engine, run_id: str) -> list[str]:
    """Scorer versions stored for a run, oldest first."""
    table = ScorerProjection().tables["score_versions"]
    if not inspect(engine).has_table(table.name):
        return []
    with engine.connect() as conn:
        rows = conn.execute(select(table.c.scorer_version).where(table.c.run_id == run_id)
                            .order_by(table.c.first_scored, table.c.scorer_version)).scalars()
        return list(rows)


def load_report(engine: Engine, run_id: str, scorer_version: str | None = None, *,
                known: Mapping[bytes, SessionScore] | None = None) -> RunReport:
    """The run's stored scores as a RunReport (the latest scorer version unless one is named). `known`:
    scores this process holds by the digest of their document (`ScorerProjection.documents`); a stored
    document with the same digest is that score (it is its JSON), taken as it is instead of validated again
    (~0.3 ms a session: the most of a re-score's report)."""
    stored = versions(engine, run_id)
    version = scorer_version or (stored[-1] if stored else SCORER_VERSION)
    table = ScorerProjection().tables["score_sessions"]
    sessions: list[SessionScore] = []
    if inspect(engine).has_table(table.name):
        with engine.connect() as conn:
            rows = conn.execute(select(table.c.document).where(
                table.c.run_id == run_id, table.c.scorer_version == version)).scalars()
            sessions = [(known or {}).get(document_digest(doc)) or SessionScore.model_validate_json(doc)
                        for doc in rows]
    return build_report(run_id, version, sessions)
