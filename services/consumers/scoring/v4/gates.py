"""The future-value gate (scorer v4): it fires only on a result claim that equals a result from after the
clock AND equals no result of that subject known at the clock (nor a fact of the session). A correct value
converted to another unit, or a value also seen earlier, is never a leak; a number in a future-tense clause
that names no subject ("it will be 2.6") is held against every lab."""

from __future__ import annotations

from datetime import datetime

from services.consumers.scoring.check_inputs import CheckResult, RecordValue
from services.consumers.scoring.constraints import aware
from services.consumers.scoring.units import analyte_of
from services.consumers.scoring.v4.claim_model import ResultClaim
from services.consumers.scoring.v4.verify import matches


def future_gate(claims: list[ResultClaim], by_code: dict[str, list[RecordValue]], now: datetime,
                facts: dict[str, list[tuple[float, str | None]]]) -> CheckResult | None:
    """The first claim that leaks a result from after `now` (None: no leak)."""
    now = aware(now)
    for claim in claims:
        if not claim.is_result or claim.base.unit_unknown:
            continue
        if claim.subject in by_code:
            codes = [claim.subject]
        elif claim.subject is None and claim.base.future:
            codes = list(by_code)
        else:
            continue
        for code in codes:
            analyte = analyte_of(code, None)
            values = by_code[code]
            later = next((v for v in values if v.time is not None and aware(v.time) > now
                          and matches(claim, v.value, v.unit, analyte)), None)
            if later is None:
                continue
            known = [(v.value, v.unit) for v in values if v.time is None or aware(v.time) <= now]
            if any(matches(claim, value, unit, analyte) for value, unit in known + facts.get(code, [])):
                continue
            return CheckResult(False, f"states {claim.base.cited.text} = {later.reference} of "
                                      f"{code.rsplit('|', 1)[-1]} at {later.time} (after now, never known "
                                      "before)")
    return None
