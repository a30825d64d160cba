"""Typed payload models (an event's `data`), one module per area; the catalog maps event types to them."""

from events.payloads.cds import CdsExchange
from events.payloads.interaction import (
    EhrRequest,
    EhrResponse,
    ModelCall,
    ResourceVersion,
    ToolCall,
    ToolResult,
)
from events.payloads.messages import (
    ASSISTANT_MESSAGE,
    DOCTOR_MESSAGE,
    MESSAGE_PREFIX,
    MESSAGE_TYPES,
    PATIENT_MESSAGE,
    Communication,
    communication,
)
from events.payloads.outcome import (
    DeadLetter,
    FhirResourceChange,
    FhirResourceKnown,
    JudgeCall,
    ScoreSession,
    ScoreTurn,
)
from events.payloads.sandbox import SandboxState
from events.payloads.session import (
    END_REASONS,
    SessionEnded,
    SessionEndedV1,
    SessionStarted,
    session_ended_v1_to_v2,
)

__all__ = [
    "ASSISTANT_MESSAGE",
    "DOCTOR_MESSAGE",
    "MESSAGE_PREFIX",
    "MESSAGE_TYPES",
    "PATIENT_MESSAGE",
    "END_REASONS",
    "SessionEndedV1",
    "session_ended_v1_to_v2",
    "CdsExchange",
    "Communication",
    "DeadLetter",
    "EhrRequest",
    "EhrResponse",
    "FhirResourceChange",
    "FhirResourceKnown",
    "ResourceVersion",
    "SandboxState",
    "ScoreSession",
    "ScoreTurn",
    "JudgeCall",
    "SessionEnded",
    "SessionStarted",
    "ToolCall",
    "ToolResult",
    "ModelCall",
    "communication",
]
