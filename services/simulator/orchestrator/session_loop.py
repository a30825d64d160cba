"""One session, start to end: sandbox → session.started → per turn doctor / assistant's work / answer → ended.

Who is charged for a failure is decided here, once: past the step limit → `max_steps` (even if the assistant
caught the refusal and failed otherwise); the turn's deadline → `timeout`; a failure the assistant raised
while the FHIR server was failing (5xx, broken connection) → `infrastructure_error`; a patient-agent bug →
`patient_error`; anything else the assistant did wrong (raised, returned non-text, unknown tool) →
`assistant_error`. A sandbox that cannot be opened never becomes a session (counted as infrastructure).
A run cancelled mid-session (Ctrl-C) ends the session `interrupted`, never the assistant's, after writing what
it had queued (a finished tool call's result included).
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import httpx

from contracts.scenario import Scenario
from events.payloads import SessionEnded, SessionStarted, communication
from services.simulator.agents.patient import PatientAgent
from services.simulator.agents.physician import Physician
from services.simulator.assistant_protocol import (
    AssistantFailure,
    AssistantTimeout,
    HistoryItem,
    InfrastructureFailure,
    SessionFailure,
    SessionInterrupted,
    SessionTools,
    StepLimitExceeded,
    TurnRequest,
)
from services.simulator.orchestrator.environment import FhirEnvironment
from services.simulator.orchestrator.live_session import LiveSession
from services.simulator.orchestrator.log import SessionRecorder, new_id
from services.simulator.orchestrator.transport import SessionTransport
from services.simulator.scenarios.families import confined


def where(exc: BaseException) -> str:
    """Where a failure of Rounds itself was raised: the innermost frame, and the innermost of Rounds' own
    code when that is elsewhere (a library's error says little without the call that led to it)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "no traceback"
    own = [f for f in frames if "site-packages" not in f.filename and "/lib/python" not in f.filename]
    spots = [frames[-1]] + ([own[-1]] if own and own[-1] is not frames[-1] else [])
    return " <- ".join(f"{'/'.join(f.filename.split('/')[-2:])}:{f.lineno} in {f.name}" for f in spots)

@dataclass(frozen=True)
class SessionJob:
    """One session to run: a scenario line in a language and variant, as trial `trial`."""

    scenario: Scenario
    definition: dict  # the line as read (recorded on session.started)
    digest: str
    trial: int
    language: str
    variant: str

    @property
    def key(self) -> tuple[str, int, str, str]:
        return (self.scenario.id, self.trial, self.language, self.variant)


@dataclass
class SessionOutcome:
    job: SessionJob
    session_id: str | None
    reason: str
    turns: int  # answered (contracts/score.py TURN_COUNTS: reached, answered, scored)
    error: str | None = None
    duration_ms: float = 0.0
    clarifications: int = 0
    patient_questions: int = 0
    model_calls: int = 0
    reached: int = 0  # turns whose physician message was sent
    ehr_requests: int = 0  # the assistant's FHIR requests in the whole session

    @property
    def scenario_turns(self) -> int:
        return len(self.job.scenario.turns)


@dataclass(frozen=True)
class TurnProgress:
    """Where a session is (for the terminal): its turn, how many model calls it made so far in it."""

    session_id: str
    scenario: str
    turn: int  # 0-based index of the turn in progress or just finished
    turns: int  # the scenario's turns
    model_calls: int  # in this turn so far
    finished: bool  # the turn is over
    seconds: float  # since the turn began
    ehr_requests: int = 0  # the assistant's FHIR requests in the session so far


@dataclass
class SessionSettings:
    run_id: str
    assistant_spec: str
    seed: int = 0
    max_steps: int = 8
    turn_timeout_s: float = 120.0
    replay_of: str | None = None
    causation: dict[str, str] = field(default_factory=dict)  # job key -> original session.started event id
    voice: object = None
    run_options: dict = field(default_factory=dict)  # recorded on session.started (runOptions)
    on_turn: Callable[[TurnProgress], None] | None = None
    # what a cancellation of the session means, as (reason, detail); None: the run was stopped (interrupted).
    # A harness whose limits cancel sessions (Inspect's time limit: `timeout`) says which limit it was.
    on_cancel: Callable[[], tuple[str, str | None]] | None = None


def charge(exc: BaseException, live: LiveSession) -> SessionFailure:
    """The failure a turn ends with, attributed to whoever caused it."""
    if live.over_limit and isinstance(live.pending_failure, StepLimitExceeded):
        return live.pending_failure
    if isinstance(exc, StepLimitExceeded):
        return exc
    if isinstance(exc, TimeoutError):
        if live.faults:
            return InfrastructureFailure(f"turn {live.turn}: timed out while the FHIR server failed: "
                                         f"{live.faults[0]}")
        return AssistantTimeout(f"turn {live.turn}: no answer within the deadline")
    if isinstance(exc, SessionFailure) and exc.reason != "assistant_error":
        return exc
    if live.faults:
        return InfrastructureFailure(f"turn {live.turn}: FHIR server failure {live.faults[0]} ({exc!r})")
    if isinstance(exc, SessionFailure):
        return exc
    return AssistantFailure(f"turn {live.turn}: the assistant raised {exc!r}"[:2000])


async def run_session(env: FhirEnvironment, log: SessionRecorder, assistant, job: SessionJob,
                      settings: SessionSettings, retry_of: str | None = None) -> SessionOutcome:
    started = time.monotonic()
    scenario = job.scenario
    try:
        patient = scenario.patient if confined(scenario.family) else None
        session_id, fhir_base = await env.open_session(scenario.now, patient, scenario.encounter)
    except SessionFailure as failure:
        return SessionOutcome(job, None, failure.reason, 0, failure.detail)
    live = LiveSession(
        session_id=session_id, fhir_base=fhir_base,
        patient_url=f"{env.patient_root}/sessions/{session_id}/patient", scenario=scenario,
        language=job.language, log=log, physician=Physician(scenario, job.language, job.variant),
        patient=PatientAgent(scenario, job.language), max_steps=settings.max_steps, voice=settings.voice,
        access_token=env.access_tokens.pop(session_id, None),  # exactly the session's token (auth on)
        watch=_watcher(settings, session_id, scenario.id, len(scenario.turns)),
    )
    env.sessions[session_id] = live
    if hasattr(assistant, "observe_scenario"):  # the oracle reads the truth; nothing else may
        assistant.observe_scenario(session_id, scenario)
    client = httpx.AsyncClient(transport=SessionTransport(env.transport, live), base_url=fhir_base,
                               timeout=settings.turn_timeout_s,
                               headers={"Accept": "application/fhir+json",
                                        **({"Authorization": f"Bearer {live.access_token}"}
                                           if live.access_token else {})})
    turns, reached, failure = 0, 0, None
    try:
        log.emit(session_id, SessionStarted(
            assistant=settings.assistant_spec, patient=scenario.patient, encounter=scenario.encounter,
            scenario=scenario.id, as_of=scenario.now, fhir_base=fhir_base, seed=settings.seed,
            run_id=settings.run_id, trial=job.trial, language=job.language, variant=job.variant,
            scenario_digest=job.digest, scenario_definition=job.definition, replay_of=settings.replay_of,
            run_options=settings.run_options or None, retry_of=retry_of,
        ), causationid=settings.causation.get("|".join(map(str, job.key))))
        history: list[HistoryItem] = []
        for turn in scenario.turns:
            text = live.physician.say(turn.index)
            doctor_id = new_id()
            log.emit(session_id, communication(
                doctor_id, "doctor", ["assistant"], text, language=job.language, turn=turn.index,
                kind="request"))
            await log.flush(session_id)
            reached += 1
            live.begin_turn(turn.index, doctor_id)
            answer = await _turn(assistant, live, client, settings, TurnRequest(
                session_id=session_id, run_id=settings.run_id, turn=turn.index, message=text,
                language=job.language, history=tuple(history), fhir_base=fhir_base,
                patient_url=live.patient_url, patient=scenario.patient, now=scenario.now.isoformat(),
                max_steps=settings.max_steps, access_token=live.access_token, encounter=scenario.encounter,
                draft_orders=tuple(w.resource for w in turn.writes), last_turn=turn is scenario.turns[-1]))
            log.emit(session_id, communication(
                new_id(), "assistant", ["doctor"], answer, language=job.language, turn=turn.index,
                kind="answer", in_response_to=[doctor_id]))
            history += [HistoryItem("doctor", text, turn.index), HistoryItem("assistant", answer, turn.index)]
            turns += 1
            if live.watch is not None:
                live.watch(live, True)
    except SessionFailure as exc:
        failure = exc
    except asyncio.CancelledError:  # the run is being stopped: record the end, then let the run stop
        failure = SessionInterrupted(f"the run was stopped during turn {live.turn} "
                                     f"({live.model_calls} model calls in the session)")
        if settings.on_cancel is not None:
            failure.reason, failure.detail = settings.on_cancel()
    except Exception as exc:  # noqa: BLE001 - the bus or the orchestrator itself failed
        failure = InfrastructureFailure(f"the simulator failed: {exc!r} ({where(exc)})"[:2000])
    # Shielded: a harness's cancel scope (Inspect's time limit) cancels again at every await while it is
    # cancelled; the end is recorded once, whole, and the harness's next await meets its cancellation.
    with anyio.CancelScope(shield=True):
        live.closed = True
        await client.aclose()
        await env.end_session(session_id)
        outcome = SessionOutcome(job, session_id, failure.reason if failure else "completed", turns,
                                 failure.detail if failure else None, (time.monotonic() - started) * 1000,
                                 live.physician.clarifications, live.patient_questions, live.model_calls,
                                 reached, live.ehr_requests)
        try:
            log.emit(session_id, SessionEnded(
                reason=outcome.reason, turns=turns, duration_ms=outcome.duration_ms, error=outcome.error,
                run_id=settings.run_id))
            await log.flush(session_id)  # whatever the last turn left queued, then the end: one write
        except Exception as exc:  # noqa: BLE001 - the log is down: the run's summary still says what happened
            outcome.reason, outcome.error = "infrastructure_error", f"could not record the end: {exc!r}"
        finally:
            env.sessions.pop(session_id, None)
            log.forget(session_id)
    return outcome


def _watcher(settings: SessionSettings, session_id: str, scenario: str, turns: int
             ) -> Callable[[LiveSession, bool], None] | None:
    """The live session's progress hook: a model call finished (False) or a turn did (True)."""
    report = settings.on_turn
    if report is None:
        return None

    def watch(live: LiveSession, finished: bool) -> None:
        report(TurnProgress(session_id, scenario, live.turn, turns, live.turn_model_calls, finished,
                            time.monotonic() - live.turn_started, live.ehr_requests))

    return watch


async def _turn(assistant, live: LiveSession, client: httpx.AsyncClient, settings: SessionSettings,
                request: TurnRequest) -> str:
    tools = SessionTools(http=client, ask_patient=live.ask_patient, step=live.step, result=live.result,
                         model_call=live.model_call,
                         ask_physician=live.ask_physician, cds_exchange=live.cds_exchange)
    try:
        answer = await asyncio.wait_for(assistant.respond(request, tools), settings.turn_timeout_s)
    except BaseException as exc:
        if isinstance(exc, asyncio.CancelledError) and not isinstance(exc, TimeoutError):
            raise
        raise charge(exc, live) from exc
    if live.pending_failure is not None:
        raise charge(live.pending_failure, live)
    if not isinstance(answer, str) or not answer.strip():
        raise AssistantFailure(f"turn {live.turn}: the answer is not text: {type(answer).__name__} "
                               f"{answer!r}"[:500])
    return answer
