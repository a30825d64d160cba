"""Verification (scorer v4): each result claim against what the record shows at the clock.

A claim is `true` when its value, converted from the unit written into the record's, equals a result of its
subject known at the clock — the one its qualifier names (the latest, the previous ones, the lowest, the
highest, the mean, those of the date written beside it; any known result when it says none) or a fact of the
session about that subject — within a clinician's rounding: the record's value rounded to the claim's own
decimals (half a unit of its last digit), and the table's `converted` relative margin after a unit
conversion (creatinine ×88.4 against 88.42). A claim more precise than the record ("1.84" for 1.8) is not
rounding: it is `wrong`. `wrong`: its subject has results at the clock and none is this; `unsupported`: its
subject has none (the value is invented). A written unit that is unknown, or known but not convertible, is
wrong whatever the number.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from statistics import mean

from services.consumers.scoring.check_inputs import RecordValue
from services.consumers.scoring.units import alternatives, analyte_of, convert
from services.consumers.scoring.v4.claim_model import ResultClaim, Verified
from services.consumers.scoring.v4.reading import reading


def matches(claim: ResultClaim, value: float, unit: str | None, analyte: str | None) -> bool:
    """Does the claim state `value` (in `unit`) within a clinician's rounding?"""
    c = claim.base
    if c.unit_unknown:
        return False
    half = 0.5 * 10 ** -c.cited.decimals + reading()["tolerance"]["absolute_floor"]
    if c.unit is None or unit is None or c.unit == unit:
        if abs(c.value - value) <= half:
            return True
        if c.unit is not None or unit is None:
            return False
        options = alternatives(value, unit, analyte, generic=False)  # a bare number in the lab's SI unit
        return any(abs(c.value - v) <= max(half, reading()["tolerance"]["converted"] * abs(v))
                   for u, v in options.items() if u != unit)
    converted = convert(value, unit, c.unit, analyte)
    if converted is None:
        return False
    return abs(c.value - converted) <= max(half, reading()["tolerance"]["converted"] * abs(converted))


@dataclass(frozen=True)
class Known:
    """A subject's results at the clock (oldest first) and the session's facts about it."""

    values: list[RecordValue]
    facts: list[tuple[float, str | None]]
    code: str

    @property
    def analyte(self) -> str | None:
        return analyte_of(self.code, None)

    def candidates(self, claim: ResultClaim) -> list[tuple[float, str | None]]:
        """The values the claim's qualifier points at (every value known when it names none)."""
        values = self.values
        pairs = [(v.value, v.unit) for v in values]
        q = claim.qualifier
        if not values:
            return list(self.facts)
        if q == "latest":
            return [pairs[-1]] + self.facts[:1]
        if q == "previous":
            return pairs[:-1] or pairs
        if q in ("min", "max"):  # over a window the answer may not say: any result it could be
            return pairs + self.facts
        if q == "mean":
            return [(mean(p[0] for p in pairs), pairs[-1][1])] + self.facts
        if q == "at" and claim.month_day is not None:
            day = claim.month_day
            dated = [(v.value, v.unit) for v in values if v.time is not None and _near_day(v.time, day)]
            return dated or pairs + self.facts  # no result that day: the date dates something else
        return pairs + self.facts


def _near_day(time: datetime, month_day: tuple[int, int]) -> bool:
    """The result was drawn on the day written, or the day before or after (a clock in another zone)."""
    try:
        written = time.replace(month=month_day[0], day=month_day[1])
    except ValueError:
        return False
    return abs((written - time).total_seconds()) <= 36 * 3600


def known_by(values: list[RecordValue], now: datetime) -> list[RecordValue]:
    out = [v for v in values if v.time is None or v.time <= now]
    return sorted(out, key=lambda v: (v.time is not None, v.time or now))


def verify(claim: ResultClaim, known: Known | None) -> Verified:
    """true / wrong / unsupported (see the module)."""
    c = claim.base
    if c.unit_unknown:
        return Verified(claim, "wrong", f"{c.cited.text}: unknown unit")
    if known is None or (not known.values and not known.facts):
        return Verified(claim, "unsupported", f"{c.cited.text}: no result of this subject at the clock")
    analyte = known.analyte
    if any(matches(claim, v, u, analyte) for v, u in known.candidates(claim)):
        return Verified(claim, "true", f"{c.cited.text} {claim.qualifier or ''}".strip())
    if c.unit is not None and known.values and all(
            convert(1.0, known.values[-1].unit or c.unit, c.unit, analyte) is None for _ in (0,)):
        return Verified(claim, "wrong", f"{c.cited.text} {c.unit}: does not convert")
    return Verified(claim, "wrong", f"{c.cited.text} {c.unit or ''}: no such result "
                                    f"{'(' + claim.qualifier + ')' if claim.qualifier else ''}".strip())
