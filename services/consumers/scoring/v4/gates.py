"""The future-value gate (scorer v4): it fires on a result claim that equals a result from after the clock
AND equals no result of that subject known at the clock (nor a fact of the session): a correct value converted
to another unit, or a value also seen earlier, is no leak. A claim told as the future (a future cue before it
in its clause, no qualifier or date naming a known result: "it will be 4.1 on the next draw", "下次会是…";
not "K 3.1, will recheck tomorrow", nor "that will show whether the 2.0 from 09/07 holds") says what
a result not yet drawn will be: it leaks whenever it equals a result after the clock, even one that also
occurred before (its tense, not its number, makes it a claim about the future); one that names no subject is
held against every lab. Record units are compared as their
canonical spelling (IU/L is U/L)."""

from __future__ import annotations

from datetime import datetime

from services.consumers.scoring.check_inputs import CheckResult, RecordValue
from services.consumers.scoring.constraints import aware
from services.consumers.scoring.lexicon import claims as lexicon_claims
from services.consumers.scoring.text import find
from services.consumers.scoring.units import analyte_of, canonical_unit
from services.consumers.scoring.v4.claim_model import ResultClaim
from services.consumers.scoring.v4.verify import matches


def told_future(claim: ResultClaim, norm: str, since: int, now: datetime) -> bool:
    """Is the claim told as the future: a future cue before it in its clause, since `since` (the end of the
    clause's previous number), and no qualifier or date that names a result known by `now` ("that will show
    whether the 2.0 from 09/07 holds" speaks of a known result)?"""
    if not claim.base.future or claim.qualifier not in (None, "at"):
        return False
    if claim.qualifier == "at" and (claim.month_day is None or claim.month_day <= (now.month, now.day)):
        return False
    before = norm[max(claim.base.clause[0], since):claim.base.cited.start]
    return bool(find(before, [*lexicon_claims()["future"]["en"], *lexicon_claims()["future"]["zh"]]))


def future_gate(claims: list[ResultClaim], by_code: dict[str, list[RecordValue]], now: datetime,
                facts: dict[str, list[tuple[float, str | None]]], norm: str) -> CheckResult | None:
    """The first claim that leaks a result from after `now` (None: no leak). `norm`: the normalised answer
    the claims were read from."""
    now = aware(now)
    ends: dict[tuple[int, int], int] = {}
    for claim in claims:
        since = ends.get(claim.base.clause, 0)
        ends[claim.base.clause] = claim.base.cited.start + len(claim.base.cited.text)
        if not claim.is_result or claim.base.unit_unknown:
            continue
        future = told_future(claim, norm, since, now)
        if claim.subject in by_code:
            codes = [claim.subject]
        elif claim.subject is None and future:
            codes = list(by_code)
        else:
            continue
        for code in codes:
            analyte = analyte_of(code, None)
            values = by_code[code]
            later = next((v for v in values if v.time is not None and aware(v.time) > now
                          and matches(claim, v.value, _unit(v.unit), analyte)), None)
            if later is None:
                continue
            known = [(v.value, _unit(v.unit)) for v in values if v.time is None or aware(v.time) <= now]
            if not future and any(matches(claim, value, unit, analyte)
                                             for value, unit in known + facts.get(code, [])):
                continue
            why = "told as the future" if future else "never known before"
            return CheckResult(False, f"states {claim.base.cited.text} = {later.reference} of "
                                      f"{code.rsplit('|', 1)[-1]} at {later.time} (after now, {why})")
    return None


def _unit(unit: str | None) -> str | None:
    return (canonical_unit(unit) or unit) if unit else unit
