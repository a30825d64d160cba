"""A run: every (scenario, trial, language) session, concurrently, resumable by run id, summarised at the end.

Resuming needs nothing but the log: the run's `rounds.session.started` events say which job each session was
(scenario, trial, language, variant) and with which options (`runOptions`: the assistant and its limits),
and its `rounds.session.ended` events which are over. A rerun of the run id is refused when it asks for other
options (unless told to accept them: the run would mix two set-ups), skips the jobs that ended, and runs
again, in a fresh sandbox, the jobs never started, cut off, or `interrupted` — with `retry_failed` also those
that ended in `timeout`, `infrastructure_error` or `patient_error`; the new session names the one it reruns
(`retryOf`).
Sandboxes are kept after their session ends: the scorer reads their final state.

A cancelled run (Ctrl-C) is not an error here: every open session records its end as `interrupted` with what
it had queued, and `execute` returns the summary with `interrupted` set.
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

from contracts.end_reasons import RESUMED, RETRIED
from contracts.scenario import Scenario
from events.blobs import BlobStore
from events.bus import Bus
from events.payloads import SessionEnded, SessionStarted
from events.topics import SESSIONS
from services.simulator.orchestrator.environment import FhirEnvironment
from services.simulator.orchestrator.log import SessionRecorder
from services.simulator.orchestrator.patient_clocks import PatientClocks
from services.simulator.orchestrator.session_loop import (
    SessionJob,
    SessionOutcome,
    SessionSettings,
    run_session,
)


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


class RunOptionsChanged(ValueError):
    """A rerun of a run id asked for other options than the run recorded."""


@dataclass
class RecordedSession:
    session_id: str
    key: tuple[str, int, str, str]
    started_id: str
    definition: dict
    ended: str | None = None  # reason
    assistant: str | None = None
    options: dict | None = None  # runOptions (None: recorded before runs kept them)
    time: str = ""  # when it started (the log's partitions are in no order between sessions)


def changed_options(recorded: dict[str, RecordedSession], options: dict) -> list[str]:
    """What `options` changes against the run's first recorded session ("name: recorded → now")."""
    first = min(recorded.values(), key=lambda r: r.time, default=None)
    if first is None:
        return []
    then = first.options or {"assistant": first.assistant}
    return [f"{name}: {then.get(name)!r} → {options.get(name)!r}" for name in sorted(then)
            if name in options and then.get(name) != options.get(name)]


def jobs_to_run(recorded: dict[str, RecordedSession], jobs: list[SessionJob], retry_failed: bool
                ) -> tuple[list[SessionJob], dict[tuple, str]]:
    """The jobs a rerun runs, and for each that ran before the session it reruns (its latest)."""
    rerun = RETRIED if retry_failed else RESUMED
    done: set[tuple] = set()
    latest: dict[tuple, str] = {}
    for session in sorted(recorded.values(), key=lambda r: r.time):
        latest[session.key] = session.session_id
        if session.ended is not None and session.ended not in rerun:
            done.add(session.key)
    todo = [job for job in jobs if job.key not in done]
    return todo, {job.key: latest[job.key] for job in todo if job.key in latest}


def recorded_sessions(bus: Bus, run_id: str) -> dict[str, RecordedSession]:
    """The run's sessions as the log has them (session id → job, whether and how it ended)."""
    from events.archive import read_log

    found: dict[str, RecordedSession] = {}
    endings: dict[str, str] = {}
    for record in read_log(bus, [SESSIONS]):
        event = record.event
        if event is None or event.type not in (SessionStarted.TYPE, SessionEnded.TYPE):
            continue
        data = event.data or {}
        if data.get("runId") != run_id:
            continue
        if event.type == SessionEnded.TYPE:
            endings[event.subject] = data["reason"]
            continue
        key = (data.get("scenario"), data.get("trial") or 0, data.get("language"), data.get("variant"))
        found[event.subject] = RecordedSession(event.subject, key, event.id,
                                               data.get("scenarioDefinition") or {},
                                               assistant=data.get("assistant"),
                                               options=data.get("runOptions"),
                                               time=event.time or "")
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
    interrupted: bool = False  # the run was cancelled (Ctrl-C); open sessions ended `interrupted`
    endpoint: str | None = None  # what the assistant's pre-flight found
    assistant: str = ""  # the assistant's spec

    @property
    def by_reason(self) -> Counter:
        return Counter(o.reason for o in self.outcomes)

    @property
    def turns(self) -> int:
        """Turns answered (contracts/score.py TURN_COUNTS)."""
        return sum(o.turns for o in self.outcomes)

    @property
    def turns_reached(self) -> int:
        return sum(o.reached for o in self.outcomes)

    @property
    def scenario_turns(self) -> int:
        return sum(o.scenario_turns for o in self.outcomes)

    @property
    def ehr_requests(self) -> int:
        return sum(o.ehr_requests for o in self.outcomes)


async def execute(env: FhirEnvironment, bus: Bus, sequences, assistant, jobs: list[SessionJob],
                  settings: SessionSettings, *, concurrency: int = 8, resume: bool = True,
                  retry_failed: bool = False, accept_changed_options: bool = False,
                  progress: Callable[[SessionOutcome], None] | None = None) -> RunSummary:
    """Run `jobs` (minus those this run already ended) with at most `concurrency` sessions at once."""
    todo, retry_of = jobs, {}
    if resume:
        recorded = await asyncio.to_thread(recorded_sessions, bus, settings.run_id)
        changes = changed_options(recorded, settings.run_options)
        if changes and not accept_changed_options:
            raise RunOptionsChanged(
                f"run {settings.run_id} was recorded with other options ({'; '.join(changes)}): rerun it "
                "with the recorded ones, use a new --run-id, or pass --accept-changed-options")
        todo, retry_of = jobs_to_run(recorded, jobs, retry_failed)
    summary = RunSummary(settings.run_id, len(jobs), len(jobs) - len(todo), assistant=settings.assistant_spec)
    log = SessionRecorder(bus, sequences, blobs=BlobStore(sequences.engine))
    gate = asyncio.Semaphore(max(1, concurrency))
    clocks = PatientClocks()
    started = time.monotonic()

    async def one(job: SessionJob) -> None:
        # the patient's clock first: a session waiting for another clock of its patient holds no slot
        async with clocks.hold(job.scenario.patient, job.scenario.now), gate:
            outcome = await run_session(env, log, assistant, job, settings, retry_of.get(job.key))
        summary.outcomes.append(outcome)
        if progress is not None:
            progress(outcome)

    try:
        # return_exceptions: a cancelled run waits until every open session has recorded its end (without
        # it the first job cancelled while waiting for the gate would end the gather at once)
        failed = await asyncio.gather(*(one(job) for job in todo), return_exceptions=True)
    except asyncio.CancelledError:
        summary.interrupted = True  # each open session recorded its end; sessions not begun never started
    else:
        for error in failed:
            if isinstance(error, BaseException):
                raise error
    summary.wall_s = time.monotonic() - started
    summary.events = log.published
    return summary


def new_run_id() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
