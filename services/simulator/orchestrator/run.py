"""A run: every (scenario, trial, language) session, concurrently, resumable by run id, summarised at the end.

Resuming needs nothing but the log: the run's `rounds.session.started` events say which job each session was
(scenario, trial, language, variant) and its `rounds.session.ended` events which are over; those jobs are
skipped, any other (never started, or started and cut off) runs again in a fresh sandbox. Sandboxes are kept
after their session ends: the scorer reads their final state.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from events.bus import Bus
from events.topics import SESSIONS
from services.simulator.data_model import Scenario
from services.simulator.orchestrator.environment import FhirEnvironment
from services.simulator.orchestrator.log import SessionLog
from services.simulator.orchestrator.session import SessionJob, SessionOutcome, SessionSettings, run_session


def canonical_digest(line: dict) -> str:
    """sha256 of the line's canonical JSON (sorted keys, no spaces, UTF-8): `scenarioDigest`."""
    canonical = json.dumps(line, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def read_scenarios(path: Path, limit: int | None = None) -> list[tuple[Scenario, dict]]:
    """The scenario lines of a JSONL file (blank lines skipped), validated; errors name `file:line`."""
    out: list[tuple[Scenario, dict]] = []
    with path.open(encoding="utf-8") as lines:
        for number, text in enumerate(lines, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
                out.append((Scenario.model_validate(line), line))
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not a valid scenario line: {exc}") from None
            if limit is not None and len(out) >= limit:
                break
    return out


def plan(scenarios: Iterable[tuple[Scenario, dict]], trials: int, languages: Iterable[str],
         variant: str) -> list[SessionJob]:
    return [
        SessionJob(scenario, line, canonical_digest(line), trial, language, variant)
        for scenario, line in scenarios
        for language in languages
        for trial in range(trials)
    ]


@dataclass
class RecordedSession:
    session_id: str
    key: tuple[str, int, str, str]
    started_id: str
    definition: dict
    ended: str | None = None  # reason


def recorded_sessions(bus: Bus, run_id: str) -> dict[str, RecordedSession]:
    """The run's sessions as the log has them (session id → job, whether and how it ended)."""
    from events.archive import read_log

    found: dict[str, RecordedSession] = {}
    endings: dict[str, str] = {}
    for record in read_log(bus, [SESSIONS]):
        event = record.event
        if event is None or event.type not in ("rounds.session.started", "rounds.session.ended"):
            continue
        data = event.data or {}
        if data.get("runId") != run_id:
            continue
        if event.type == "rounds.session.ended":
            endings[event.subject] = data["reason"]
            continue
        key = (data.get("scenario"), data.get("trial") or 0, data.get("language"), data.get("variant"))
        found[event.subject] = RecordedSession(event.subject, key, event.id,
                                               data.get("scenarioDefinition") or {})
    for session_id, reason in endings.items():
        if session_id in found:
            found[session_id].ended = reason
    return found


@dataclass
class RunSummary:
    run_id: str
    planned: int
    skipped: int  # already ended in an earlier attempt of this run
    outcomes: list[SessionOutcome] = field(default_factory=list)
    wall_s: float = 0.0
    events: int = 0

    @property
    def by_reason(self) -> Counter:
        return Counter(o.reason for o in self.outcomes)

    @property
    def turns(self) -> int:
        return sum(o.turns for o in self.outcomes)


async def execute(env: FhirEnvironment, bus: Bus, sequences, assistant, jobs: list[SessionJob],
                  settings: SessionSettings, *, concurrency: int = 8, resume: bool = True,
                  progress: Callable[[SessionOutcome], None] | None = None) -> RunSummary:
    """Run `jobs` (minus those this run already ended) with at most `concurrency` sessions at once."""
    done: set[tuple] = set()
    if resume:
        recorded = await asyncio.to_thread(recorded_sessions, bus, settings.run_id)
        done = {r.key for r in recorded.values() if r.ended is not None}
    todo = [job for job in jobs if job.key not in done]
    summary = RunSummary(settings.run_id, len(jobs), len(jobs) - len(todo))
    log = SessionLog(bus, sequences)
    gate = asyncio.Semaphore(max(1, concurrency))
    started = time.monotonic()

    async def one(job: SessionJob) -> None:
        async with gate:
            outcome = await run_session(env, log, assistant, job, settings)
        summary.outcomes.append(outcome)
        if progress is not None:
            progress(outcome)

    await asyncio.gather(*(one(job) for job in todo))
    summary.wall_s = time.monotonic() - started
    summary.events = log.published
    return summary


def new_run_id() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
