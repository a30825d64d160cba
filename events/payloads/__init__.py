"""Typed payload models (an event's `data`), one module per area; the catalog maps event types to them."""

from events.payloads.interaction import EhrRequest, EhrResponse, ToolCall, ToolResult
from events.payloads.messages import Communication, communication
from events.payloads.outcome import DeadLetter, FhirResourceChange, ScoreSession, ScoreTurn
from events.payloads.session import SessionEnded, SessionStarted

__all__ = [
    "Communication",
    "DeadLetter",
    "EhrRequest",
    "EhrResponse",
    "FhirResourceChange",
    "ScoreSession",
    "ScoreTurn",
    "SessionEnded",
    "SessionStarted",
    "ToolCall",
    "ToolResult",
    "communication",
]
