"""CDS Hooks exchanges (`rounds.cds.exchange`): Rounds as the EHR (the CDS client) called a CDS service
under test — a hook with its context and prefetch, the service's cards and systemActions, or its error or
timeout — or sent it feedback on its cards. On `rounds.sessions` with the session's other events, so the
scorer judges cards where they were shown (the turn) and the report lists them."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from events.payloads.base import Payload


class CdsExchange(Payload):
    TYPE: ClassVar[str] = "rounds.cds.exchange"

    turn: int = Field(ge=0)
    service: str = Field(min_length=1, description="the service's id from its discovery document")
    hook: str = Field(min_length=1, description="patient-view, order-select, order-sign, encounter-discharge")
    hook_instance: str = Field(min_length=1)
    outcome: Literal["cards", "error", "timeout", "feedback"]
    context: dict[str, Any] = Field(default_factory=dict)
    prefetch: list[str] = Field(default_factory=list, description="the prefetch keys Rounds filled")
    http_status: int | None = Field(default=None, ge=100, le=599)
    latency_ms: float | None = Field(default=None, ge=0)
    cards: list[dict[str, Any]] = Field(default_factory=list)
    system_actions: list[dict[str, Any]] = Field(default_factory=list)
    feedback: list[dict[str, Any]] = Field(default_factory=list, description="what was POSTed to /feedback")
    error: str | None = None
