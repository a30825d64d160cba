"""Inspect's limits and Rounds' end reasons, both ways.

Inspect → Rounds: a `LimitExceededError` raised inside the assistant's turn (a message, token, turn or cost
limit: Inspect raises it from `generate` or from appending to the conversation) becomes the Rounds failure of
the reason data/limits.json gives, so `run_session` ends the session with that reason and the session is
scored as Rounds scores any such session. A time or working-time limit (or an operator's stop) cancels the
sample instead; `run_session` then ends the session with the reason `cut_reason` gives (the solver's
`SessionSettings.on_cancel`: `timeout`, or `interrupted` for a stop) before the cancellation goes on.

Rounds → Inspect: after the session ended, the solver re-raises the limit error so Inspect records the
sample's limit and still scores it; a session Rounds does not charge to the assistant (`infrastructure_error`,
`patient_error`) becomes `RoundsSessionError`, an Inspect sample error (retried with `--retry-on-error`),
never a score.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from contracts.end_reasons import NOT_ASSISTANT_FAULT
from services.simulator.assistant_protocol import SessionFailure


class RoundsSessionError(RuntimeError):
    """A session Rounds does not charge to the assistant: the sample is an error for Inspect (never 0)."""

    def __init__(self, reason: str, detail: str | None, session_id: str | None) -> None:
        super().__init__(f"Rounds session {session_id or '(not opened)'} ended {reason}: {detail}")
        self.reason, self.detail, self.session_id = reason, detail, session_id


@cache
def _table() -> dict:
    return json.loads(resources.files(__package__).joinpath("data/limits.json").read_text())


def end_reason(limit_type: str) -> str:
    """The Rounds end reason of a session cut by an Inspect limit of `limit_type`."""
    table = _table()
    return table["reasons"].get(limit_type, table["default"])


def failure_for(limit_type: str, message: str) -> SessionFailure:
    """The Rounds failure that ends the session the way the limit says."""
    failure = SessionFailure(f"Inspect {limit_type} limit: {message}")
    failure.reason = end_reason(limit_type)  # any end reason data/limits.json names
    return failure


def not_charged(reason: str) -> bool:
    """Reasons Rounds never charges to the assistant (Inspect: a sample error, retried)."""
    return reason in NOT_ASSISTANT_FAULT


def cut_reason(active, limits) -> tuple[str, str]:
    """(end reason, detail) of a session whose sample Inspect cancelled: the working-time (or bridged)
    limit the sample records, else its time limit when spent, else a stop nobody in the session caused."""
    error = getattr(active, "limit_exceeded_error", None) if active is not None else None
    if error is not None:
        return end_reason(error.type), f"Inspect {error.type} limit: {error.message}"
    clock = getattr(limits, "time", None)
    if clock is not None and clock.limit is not None and clock.usage >= clock.limit * 0.99:
        return end_reason("time"), f"Inspect time limit: {clock.limit} seconds"
    return end_reason("operator"), "the Inspect sample was cancelled"
