"""What the checks look at (a session's events grouped by turn, the sandbox's final state) and what they
return. Data only; session_log.py builds the log, fhir_state.py reads the state, checks/ judge them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from contracts.scenario import RubricItem, Scenario, Turn

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
    """A message of the turn: `kind` is doctor | answer | question | clarification | patient | assistant."""

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
        """What the checks judge: the whole text (stored_text.py), else the text as carried."""
        return self.whole if self.whole is not None else self.text


@dataclass
class TurnLog:
    index: int
    doctor: Utterance | None = None
    messages: list[Utterance] = field(default_factory=list)
    ehr: list[EhrCall] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    cds: list[dict[str, Any]] = field(default_factory=list)  # rounds.cds.exchange data of the turn

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
class SessionLog:
    session_id: str
    started: dict[str, Any] = field(default_factory=dict)  # rounds.session.started data
    started_time: str | None = None
    ended: dict[str, Any] | None = None
    ended_time: str | None = None
    turns: dict[int, TurnLog] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return (self.ended or {}).get("runId") or self.started.get("runId") or "-"

    @property
    def reason(self) -> str:
        return (self.ended or {}).get("reason", "open")


@dataclass(frozen=True)
class Written:
    """A resource in the session's final state (the current version of something it wrote)."""

    resource_type: str
    id: str
    version: int
    deleted: bool
    method: str
    resource: dict[str, Any] | None


@dataclass(frozen=True)
class RecordValue:
    """A value in the shared record (Observation) for a code a turn's facts name, with its clinical time."""

    code: str
    value: float
    unit: str | None
    time: datetime | None
    reference: str


class SharedValues(list[RecordValue]):
    """Record values that the final states of many sessions share (the recorded states of one patient's
    sessions hold the same results of the shared record): built once, never changed, so what the checks
    derive from them (by code, known by a time) is derived once, not per session and turn."""

    __slots__ = ("_by_code", "_known")

    def __init__(self, values: Iterable[RecordValue]) -> None:
        super().__init__(values)
        self._by_code: dict[str, list[RecordValue]] | None = None
        self._known: dict[datetime, dict[str, list[tuple[float, str | None]]]] = {}


def values_by_code(values: list[RecordValue]) -> dict[str, list[RecordValue]]:
    """The values by code, each code's in their order (of SharedValues: computed once, read it only)."""
    if isinstance(values, SharedValues) and values._by_code is not None:
        return values._by_code
    out: dict[str, list[RecordValue]] = {}
    for value in values:
        out.setdefault(value.code, []).append(value)
    if isinstance(values, SharedValues):
        values._by_code = out
    return out


def known_until(values: list[RecordValue], now: datetime) -> dict[str, list[tuple[float, str | None]]]:
    """(value, unit) by code of the values without a time or at `now` or before (of SharedValues: computed
    once per time, read it only)."""
    if isinstance(values, SharedValues) and now in values._known:
        return values._known[now]
    known: dict[str, list[tuple[float, str | None]]] = {}
    for value in values:
        if value.time is None or value.time <= now:
            known.setdefault(value.code, []).append((value.value, value.unit))
    if isinstance(values, SharedValues):
        values._known[now] = known
    return known


@dataclass
class FinalState:
    writes: list[Written] = field(default_factory=list)
    record_values: list[RecordValue] = field(default_factory=list)  # for no_future_value

    def current(self) -> list[Written]:
        return [w for w in self.writes if not w.deleted and w.resource is not None]


@dataclass(frozen=True)
class CheckContext:
    """Everything a check may look at for one rubric item of one turn."""

    scenario: Scenario
    turn: Turn
    log: TurnLog
    session: SessionLog
    state: FinalState
    language: str

    @property
    def now(self) -> datetime:
        return self.scenario.now


@dataclass(frozen=True)
class CheckResult:
    passed: bool
    evidence: str
    # figures beside the verdict, copied onto the scored check (a measure kind's value, its breakdown keys)
    measures: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ItemResult:
    item: RubricItem
    result: CheckResult
