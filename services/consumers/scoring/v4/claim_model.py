"""What an answer claims (scorer v4), as data: each number with its subject, value, unit, what it is (a
result or a delta, ratio, duration, dose, MIC, count) and, for a result, the qualifier that says which result
it states (latest / previous / min / max / mean / at a date), and each claim's verdict once verified."""

from __future__ import annotations

from dataclasses import dataclass

from services.consumers.scoring.v3.claim_model import Claim

QUALIFIERS = ("latest", "previous", "min", "max", "mean", "at")
VERDICTS = ("true", "wrong", "unsupported")


@dataclass(frozen=True)
class ResultClaim:
    """A number the answer states, read as a clinician wrote it."""

    base: Claim  # the v3 claim: subject, value, unit, clause, flags
    kind: str  # result | delta | ratio | duration | dose | mic | count | bound
    qualifier: str | None  # one of QUALIFIERS, or None (the claim does not say which result)
    month_day: tuple[int, int] | None  # the date written beside it

    @property
    def subject(self) -> str | None:
        return self.base.subject

    @property
    def value(self) -> float:
        return self.base.value

    @property
    def is_result(self) -> bool:
        return self.kind == "result" and not self.base.in_question


@dataclass(frozen=True)
class Verified:
    """A result claim and what the record at the clock says of it."""

    claim: ResultClaim
    verdict: str  # true | wrong | unsupported
    why: str
