"""The trajectory: one session as the simulator recorded it on `rounds.sessions` — the physician's turns, each
with its messages, the EHR exchanges the FHIR server recorded, the tool calls and CDS Hooks exchanges — read
back into types once (trajectory_log.py `build_trajectory`) and read by every scorer version, the report's
conversation view, replay and the Inspect task (the way τ²-bench's simulation run is shared by orchestrator
and evaluator). The simulator writes the events (services/simulator/orchestrator/log.py `SessionRecorder`);
nothing reads them as dicts after this.

Data only: the classes and what follows from their own fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from events.payloads import CdsExchange, SessionEnded, SessionStarted

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class EhrCall:
    """One FHIR request through the session's base, with its response (status None: no response logged)."""

    method: str
    url: str
    position: int  # order in the session's log
    status: int | None = None
    latency_ms: float | None = None
    query: dict[str, list[str]] = field(default_factory=dict)
    resources: tuple[str, ...] | None = None  # "Type/id" of what the response gave (None: not logged)
    body: str | None = None  # the response body as recorded (inline or its stored copy; None: not held)
    request_body: str | None = None  # the request's body, likewise (a replay applies a Bundle's entries)

    @property
    def resource_type(self) -> str | None:
        head = self.url.strip("/").split("/", 1)[0].split("?", 1)[0]
        return head if head[:1].isupper() else None

    @property
    def succeeded(self) -> bool:
        return self.status is not None and self.status < 400

    @property
    def is_write(self) -> bool:
        return self.method in WRITE_METHODS


@dataclass(frozen=True)
class Utterance:
    """A message of the turn: `kind` is doctor | answer | question | clarification | patient."""

    kind: str
    text: str
    position: int
    message_id: str
    time: str | None = None
    disclosed: tuple[str, ...] = ()
    sender: str = ""  # doctor | assistant | patient (a clarification goes both ways)
    whole: str | None = None  # the whole text when `text` is the head of one too large for an event

    @property
    def full_text(self) -> str:
        """What the checks judge: the whole text (its stored copy), else the text as carried."""
        return self.whole if self.whole is not None else self.text


@dataclass(frozen=True)
class ToolEvent:
    """A tool call or its result (`rounds.tool.call|result`) as the turn's tool figures count it."""

    event: str  # call | result
    name: str
    error: str | None = None
    latency_ms: float | None = None


@dataclass(frozen=True)
class CdsCall:
    """A CDS Hooks exchange of the turn (`rounds.cds.exchange`) and where it stands in the log."""

    position: int
    exchange: CdsExchange


@dataclass
class TrajectoryTurn:
    """One physician turn: the doctor's message and everything the log recorded until the next one."""

    index: int
    doctor: Utterance | None = None
    messages: list[Utterance] = field(default_factory=list)
    ehr: list[EhrCall] = field(default_factory=list)
    tools: list[ToolEvent] = field(default_factory=list)
    cds: list[CdsCall] = field(default_factory=list)

    @property
    def answers(self) -> list[Utterance]:
        return [m for m in self.messages if m.kind == "answer"]

    @property
    def answer_text(self) -> str:
        return "\n".join(m.full_text for m in self.answers)

    @property
    def answer_position(self) -> int | None:
        answers = self.answers
        return answers[-1].position if answers else None

    @property
    def questions(self) -> list[Utterance]:
        return [m for m in self.messages if m.kind == "question"]

    @property
    def patient_replies(self) -> list[Utterance]:
        return [m for m in self.messages if m.kind == "patient"]

    def writes(self) -> list[EhrCall]:
        """Successful write requests of this turn (the server recorded them, not the assistant)."""
        return [call for call in self.ehr if call.is_write and call.succeeded]


@dataclass
class Trajectory:
    """A session: how it started (run, scenario, language, ...) and ended, and its turns by index."""

    session_id: str
    started: SessionStarted | None = None
    started_time: str | None = None
    ended: SessionEnded | None = None
    ended_time: str | None = None
    turns: dict[int, TrajectoryTurn] = field(default_factory=dict)
    ehr_before: list[EhrCall] = field(default_factory=list)  # before the first doctor message (no turn's)

    def ehr_calls(self) -> list[EhrCall]:
        """Every EHR exchange of the session in log order: what a replay applies."""
        calls = self.ehr_before + [call for turn in self.turns.values() for call in turn.ehr]
        return sorted(calls, key=lambda call: call.position)

    @property
    def run_id(self) -> str:
        ended = self.ended.run_id if self.ended else None
        return ended or (self.started.run_id if self.started else None) or "-"

    @property
    def reason(self) -> str:
        return self.ended.reason if self.ended else "open"

    @property
    def language(self) -> str:
        return (self.started.language if self.started else None) or "en"

    @property
    def variant(self) -> str:
        return (self.started.variant if self.started else None) or "explicit"
