"""How a session ends and who is charged for it, as one table.

The simulator reads it to decide what a rerun runs again and its exit code, the scorer to keep sessions that
are not the assistant's fault out of every score (never scored 0), the report to count those apart. The
reasons themselves are the recorded event's (`events.payloads.session.EndReason`); a test holds the table
to them, so a new reason cannot be recorded without saying who is at fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from events.payloads.session import EndReason

Fault = Literal["nobody", "assistant", "rounds", "patient"]


@dataclass(frozen=True)
class EndOfSession:
    fault: Fault  # who the end is charged to ("nobody": it ran to the end, or the run was stopped)
    scored: bool  # the session enters the scores (else it is only counted, never scored 0)
    retried: bool  # `--retry-failed` runs it again (interrupted ones are rerun on every resume)
    doc: str


END_OF_SESSION: dict[EndReason, EndOfSession] = {
    "completed": EndOfSession("nobody", True, False, "every turn was answered"),
    "max_steps": EndOfSession("assistant", True, False, "the assistant looped past the turn's tool steps"),
    "timeout": EndOfSession("assistant", True, True, "no answer within the turn's deadline (a slow endpoint "
                                                     "may do better on a rerun)"),
    "assistant_error": EndOfSession("assistant", True, False, "the assistant raised, returned garbage or "
                                                              "called an unknown tool"),
    "infrastructure_error": EndOfSession("rounds", False, True, "Rounds, the FHIR server or the network "
                                                                "failed a valid request"),
    "patient_error": EndOfSession("patient", False, True, "the simulated patient failed"),
    "interrupted": EndOfSession("nobody", False, True, "the run was stopped while the session was open"),
}

# Reasons never charged to the assistant: such sessions are excluded from scores, never scored 0.
NOT_ASSISTANT_FAULT: frozenset[str] = frozenset(r for r, end in END_OF_SESSION.items() if not end.scored)
# What a rerun with `--retry-failed` runs again; `interrupted` alone is rerun on every resume.
RESUMED: frozenset[str] = frozenset({"interrupted"})
RETRIED: frozenset[str] = frozenset(r for r, end in END_OF_SESSION.items() if end.retried)
