"""One session while it runs: the turn in progress, its step budget, the exchanges with patient and physician.

Everything the assistant can do during a turn goes through here, so every path is counted and recorded the
same way: in-process tools (`SessionTools`), FHIR requests through the session transport (transport.py), and
the patient endpoint over HTTP (patient_http.py). Faults are noted where they happen (a 5xx or a broken
connection from the FHIR server) so the orchestrator can charge a failed turn to the right party.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contracts.scenario import Scenario
from events.payloads import CdsExchange, ModelCall, ToolCall, ToolResult, communication
from services.simulator.agents.patient import PatientAgent
from services.simulator.agents.physician import Physician
from services.simulator.assistant_protocol import (
    TOOL_NAMES,
    AssistantFailure,
    PatientFailure,
    StepLimitExceeded,
)
from services.simulator.orchestrator.log import SessionRecorder, new_id


class SessionClosed(AssistantFailure):
    """The assistant acted after its turn or session ended (e.g. a timed-out thread still calling)."""


@dataclass
class LiveSession:
    session_id: str
    fhir_base: str
    patient_url: str
    scenario: Scenario
    language: str
    log: SessionRecorder
    physician: Physician
    patient: PatientAgent
    max_steps: int = 8
    voice: Any = None  # agents.voice.PatientVoice | None
    access_token: str | None = None  # the session's bearer token when the FHIR API has auth on
    turn: int = -1
    doctor_message: str | None = None  # Communication id of the turn's physician message
    steps: int = 0
    declared_steps: bool = False  # the assistant reports its tool calls (step): requests are not counted
    over_limit: bool = False
    faults: list[str] = field(default_factory=list)  # server-side failures seen during the turn
    closed: bool = False
    patient_questions: int = 0
    pending_failure: Exception | None = None  # raised where the assistant could not see it (HTTP endpoints)
    model_calls: int = 0  # the assistant's model calls (usage on a tool result or model.call), whole session
    ehr_requests: int = 0  # the assistant's FHIR requests, whole session
    turn_model_calls: int = 0
    turn_started: float = 0.0  # time.monotonic() at the turn's start
    watch: Callable[[LiveSession, bool], None] | None = None  # progress: a model call (False) or turn (True)

    def begin_turn(self, turn: int, doctor_message: str) -> None:
        self.turn, self.doctor_message = turn, doctor_message
        self.turn_model_calls, self.turn_started = 0, time.monotonic()
        self.steps, self.declared_steps, self.over_limit = 0, False, False
        self.faults, self.pending_failure = [], None

    def check_open(self) -> None:
        if self.closed:
            raise SessionClosed(f"session {self.session_id} is over")

    def _count(self, what: str) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            failure = StepLimitExceeded(f"turn {self.turn}: step {self.steps} ({what}) is past the limit of "
                                        f"{self.max_steps}")
            if not self.over_limit:
                self.over_limit, self.pending_failure = True, failure
            raise failure

    # -- what the transport and the endpoints call ---------------------------------------------------------
    def count_request(self, method: str, url: str) -> None:
        """A FHIR request of the assistant (counted unless it reports tool steps itself)."""
        self.check_open()
        self.ehr_requests += 1
        if not self.declared_steps:
            self._count(f"{method} {url}")

    def fault(self, detail: str) -> None:
        self.faults.append(detail)

    # -- SessionTools ----------------------------------------------------------------------------------------
    def step(self, name: str, arguments: dict) -> str:
        """A model tool call: counted, checked against the tool set, recorded as rounds.tool.call."""
        self.check_open()
        self.declared_steps = True
        call_id = new_id()
        args = arguments if isinstance(arguments, dict) else {"value": repr(arguments)}
        self.log.emit(self.session_id,
                      ToolCall(call_id=call_id, name=str(name) or "?", arguments=args, turn=self.turn),
                      correlationid=call_id)
        if name not in TOOL_NAMES:
            raise AssistantFailure(f"turn {self.turn}: unknown tool {name!r}")
        if name != "answer":  # the final answer ends the turn; it is recorded (its usage) but not a tool step
            self._count(str(name))
        return call_id

    def result(
        self,
        call_id: str,
        name: str,
        output: Any = None,
        error: str | None = None,
        latency_ms: float | None = None,
        usage: dict[str, int] | None = None,
    ) -> None:
        self.log.emit(self.session_id,
                      ToolResult(call_id=call_id, name=name, output=output if error is None else None,
                                 error=error, latency_ms=latency_ms, turn=self.turn, usage=usage),
                      correlationid=call_id)
        if usage is not None:  # a model call finished (its usage rides on its first result)
            self._model_called()

    def cds_exchange(self, **data: Any) -> None:
        """A CDS Hooks call or feedback of this turn, as rounds.cds.exchange."""
        self.log.emit(self.session_id, CdsExchange(turn=self.turn, **data))

    def model_call(self, outcome: str, usage: dict[str, int], error: str | None = None) -> None:
        """A model call that produced no tool result (cut or failed): recorded on its own, so its latency and
        tokens are not lost. Recorded after the session's end too (a call cut by the end is still spent)."""
        self.log.emit(self.session_id,
                      ModelCall(outcome=outcome, turn=max(self.turn, 0), usage=usage, error=error))
        self._model_called()

    def _model_called(self) -> None:
        self.model_calls += 1
        self.turn_model_calls += 1
        if self.watch is not None:
            self.watch(self, False)

    async def ask_patient(self, text: str) -> str:
        """The assistant asks the patient: question and answer are both recorded (the answer with the ids of
        the memory facts it disclosed, which the assistant never sees)."""
        self.check_open()
        if not isinstance(text, str) or not text.strip():
            raise AssistantFailure(f"turn {self.turn}: empty question to the patient")
        if not self.declared_steps:
            self._count("ask_patient")
        self.patient_questions += 1
        question_id = new_id()
        self.log.emit(self.session_id,
                      communication(question_id, "assistant", ["patient"], text, language=self.language,
                                    turn=self.turn, kind="question",
                                    in_response_to=[self.doctor_message] if self.doctor_message else None))
        try:
            reply = self.patient.answer(text)
            said = reply.text
            if self.voice is not None and reply.matched:
                said = await self.voice.speak(text, reply, self)
        except Exception as exc:  # noqa: BLE001 - any patient-side bug is the patient's, never the assistant's
            raise PatientFailure(f"turn {self.turn}: the patient agent failed: {exc!r}") from exc
        self.log.emit(self.session_id,
                      communication(new_id(), "patient", ["assistant"], said, language=self.language,
                                    turn=self.turn, kind="answer", disclosed=list(reply.disclosed),
                                    in_response_to=[question_id]))
        await self.log.flush(self.session_id)
        return said

    async def ask_physician(self, text: str) -> str:
        """A clarifying question to the physician (answered from the turn's explicit phrasing, bounded)."""
        self.check_open()
        if not isinstance(text, str) or not text.strip():
            raise AssistantFailure(f"turn {self.turn}: empty question to the physician")
        question_id = new_id()
        self.log.emit(self.session_id,
                      communication(question_id, "assistant", ["doctor"], text, language=self.language,
                                    turn=self.turn, kind="clarification"))
        reply = self.physician.clarify(self.turn, text)
        self.log.emit(self.session_id,
                      communication(new_id(), "doctor", ["assistant"], reply, language=self.language,
                                    turn=self.turn, kind="clarification", in_response_to=[question_id]))
        await self.log.flush(self.session_id)
        return reply
