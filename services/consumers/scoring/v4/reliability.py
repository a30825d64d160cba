"""Reliability (scorer v4): an assistant that told the physician wrong results in a session is not trusted for
the rest of it.

A physician who caught an assistant stating a result the record contradicts (a value under the wrong lab, a
unit that does not convert, a number no result is) re-checks everything it says afterwards, including the
turns that state no number: asking the patient, the orders it wrote. So every turn of the session is
scored × (1 − the share of the session's verified result claims that are `wrong`), from the turn of the
first wrong claim on (`reading.json` `reliability.from`: "first_wrong", or "session" for every turn).
Only `wrong` counts: an `unsupported` claim (no result of its subject at the clock) and a true extra are
precision's business (precision.py), and so is a wrong claim inside its own turn; the share is what the
assistant got wrong of what it said it had read. The factor is reported as its own check (weight 0) so a
reader sees why a turn lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from contracts.score import Check, TurnScore
from services.consumers.scoring.v4.claim_model import Verified
from services.consumers.scoring.v4.reading import reading


@dataclass(frozen=True)
class Reliability:
    """The session's wrong share and the first turn it applies to."""

    true: int
    wrong: list[tuple[int, Verified]]  # (turn index, claim)
    since: int | None  # the first turn the factor applies to; None: no wrong claim

    @property
    def share(self) -> float:
        said = self.true + len(self.wrong)
        return len(self.wrong) / said if said else 0.0

    def factor(self, turn: int) -> float:
        if self.since is None or turn < self.since:
            return 1.0
        return round(1.0 - self.share, 6)

    def evidence(self, turn: int) -> str:
        if self.since is None:
            return f"factor 1.00: none of the session's {self.true} verified result claims is wrong"
        shown = ", ".join(f"turn {i}: {v.claim.base.cited.text} {v.claim.base.unit or ''}".strip()
                          for i, v in self.wrong[:5])
        applies = "applies" if turn >= self.since else f"applies from turn {self.since}"
        return (f"factor {self.factor(turn):.2f} ({applies}): {len(self.wrong)} of the session's "
                f"{self.true + len(self.wrong)} verified result claims are wrong ({shown})")

    def measures(self, turn: int) -> dict:
        return {"reliability": self.factor(turn), "wrong_share": round(self.share, 6),
                "wrong_claims": len(self.wrong), "verified_claims": self.true + len(self.wrong),
                "since_turn": self.since}


def reliability(verified: Mapping[int, Sequence[Verified]]) -> Reliability:
    """`verified`: each reached turn's verified result claims, by turn index. Claims naming no subject are
    left out: they are read as a subject's only when true (scorer.py `_verified`), never wrong."""
    true, wrong = 0, []
    for index in sorted(verified):
        for v in verified[index]:
            if v.claim.subject is None:
                continue
            if v.verdict == "true":
                true += 1
            elif v.verdict == "wrong":
                wrong.append((index, v))
    since = None
    if wrong:
        since = wrong[0][0] if reading()["reliability"]["from"] == "first_wrong" else min(verified)
    return Reliability(true, wrong, since)


def trusted(turn: TurnScore, trust: Reliability) -> TurnScore:
    """The turn scored × the session's factor, with the factor as its own check (weight 0) among the
    turn's non-gate checks."""
    index = turn.index
    check = Check(id="reliability", kind="reliability", passed=trust.factor(index) >= 1.0, weight=0.0,
                  evidence=trust.evidence(index), measures=trust.measures(index))
    at = next((i for i, c in enumerate(turn.checks) if c.safety), len(turn.checks))
    return turn.model_copy(update={"score": round(turn.score * trust.factor(index), 6),
                                   "checks": [*turn.checks[:at], check, *turn.checks[at:]]})
