"""What an assistant under test receives each turn, what it may use, and how its failures are classified.

Every adapter (`baseline`, `oracle`, `python:`, `http:`, `openai:`, `mcp`) implements `Assistant`; the
orchestrator owns timing, step limits and events. The assistant's FHIR calls always go over HTTP to the
session's FHIR base (so the FHIR server records them as `rounds.ehr.*`); patient questions go through
`SessionTools.ask_patient` (recorded as `rounds.message.patient` exchanges).

Who is charged for a failure is part of the contract: `AssistantFailure` is the assistant's fault (it raised,
returned garbage, called an unknown tool, looped past the step limit); `InfrastructureFailure` is Rounds' or
the network's (the FHIR server 5xx'd on a valid request, the model endpoint was unreachable after retries);
`PatientFailure` is the simulated patient's. Only the first kind may lower a score.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

import httpx

from contracts.languages import Language
from events.payloads.session import EndReason

# The tools every tool-using adapter offers (full set every turn, as in PhysAssistBench); any other name is an
# unknown tool, which is the assistant's fault.
TOOL_NAMES: frozenset[str] = frozenset(
    {"fhir_search", "fhir_read", "fhir_create", "fhir_update", "ask_patient", "ask_physician", "answer"}
)


@dataclass(frozen=True)
class HistoryItem:
    """One earlier message of the conversation as the assistant saw it (its own answers stay in)."""

    role: Literal["doctor", "assistant"]
    text: str
    turn: int


@dataclass(frozen=True)
class TurnRequest:
    session_id: str
    run_id: str
    turn: int
    message: str  # the physician's words
    language: Language
    history: tuple[HistoryItem, ...]
    fhir_base: str  # absolute URL of the session's sandbox
    patient_url: str  # POST {"text": ...} -> {"text": ...}
    patient: str  # "Patient/<id>" the session is about
    now: str  # the session clock (ISO 8601)
    access_token: str | None = None  # when auth is on: the session token, else None
    max_steps: int = 8  # tool steps allowed this turn
    encounter: str | None = None  # "Encounter/<id>" of the stay, when the scenario names it
    # the physician's orders this turn as FHIR resources (the scenario's expected writes): what an EHR's
    # order entry drafts and signs, so a CDS Hooks service sees them as order-select/order-sign draftOrders
    draft_orders: tuple[dict, ...] = ()
    last_turn: bool = False  # the session's last turn (a CDS client fires encounter-discharge after it)


@dataclass
class SessionTools:
    """The tools the orchestrator hands an in-process assistant for one turn."""

    http: httpx.AsyncClient  # base_url = the session's FHIR base
    ask_patient: Callable[[str], Awaitable[str]]
    # Record a tool step (model tool call): the orchestrator counts steps and emits rounds.tool.call; it
    # returns the call id (raises StepLimitExceeded past `max_steps`, AssistantFailure for an unknown tool).
    step: Callable[[str, dict], str | None] = field(default=lambda name, args: None)
    # The tool's outcome for a call id from `step`: emits rounds.tool.result
    # (call_id, name, output=None, error=None, latency_ms=None, usage=None).
    result: Callable[..., None] = field(default=lambda *args, **kwargs: None)
    # A model call that produced no tool result (outcome "timeout" | "cancelled" | "step_limit" | "failed",
    # usage, error=None): emits rounds.model.call, so a cut call's latency and tokens are still accounted.
    model_call: Callable[..., None] = field(default=lambda *args, **kwargs: None)
    # Ask the physician a clarifying question instead of answering (bounded by the physician; counted).
    ask_physician: Callable[[str], Awaitable[str]] | None = None
    # Record a CDS Hooks exchange (the fields of events.payloads.CdsExchange but `turn`): emits
    # rounds.cds.exchange for the turn (the cds-hooks: adapter's hooks, cards and feedback).
    cds_exchange: Callable[..., None] = field(default=lambda **data: None)


@runtime_checkable
class Assistant(Protocol):
    """An assistant under test. `spec` is how it was named on the command line (recorded in events)."""

    spec: str

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        """The assistant's answer to the physician for this turn (non-empty text)."""
        ...

    async def aclose(self) -> None: ...


class SessionFailure(Exception):
    """Ends a session with `reason`; `detail` is recorded on `rounds.session.ended`."""

    reason: EndReason = "infrastructure_error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class AssistantFailure(SessionFailure):
    """The assistant raised, returned no text or called an unknown tool: its fault, scored as it stands."""

    reason: EndReason = "assistant_error"


class StepLimitExceeded(SessionFailure):
    """More tool steps or FHIR requests in a turn than `max_steps` allow (a loop is the assistant's)."""

    reason: EndReason = "max_steps"


class AssistantTimeout(SessionFailure):
    """The assistant gave no answer within the turn's deadline (a slow endpoint is the assistant's, and
    `--retry-failed` runs it again)."""

    reason: EndReason = "timeout"


class InfrastructureFailure(SessionFailure):
    """Rounds, the FHIR server or the network failed a valid request: never scored, rerun on request."""

    reason: EndReason = "infrastructure_error"


class PatientFailure(SessionFailure):
    """The simulated patient failed to answer.

    A bug of Rounds, never the assistant's: the session is counted apart and never scored."""

    reason: EndReason = "patient_error"


class SessionInterrupted(SessionFailure):
    """The run was stopped (Ctrl-C) while the session was open: nobody's fault, rerun on resume."""

    reason: EndReason = "interrupted"


class EndpointUnavailable(RuntimeError):
    """The assistant's endpoint cannot serve the run at all (unreachable, key refused, unknown model): found
    by the pre-flight before the first session, so the run stops with one message instead of failing every
    session."""
