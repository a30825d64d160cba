"""Silence where nothing is wrong: no card at or above the indicator on the hook (checks/cds_cards.py)."""

from __future__ import annotations

from contracts.rubric import CdsQuietParams
from contracts.scenario import RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import RubricCheck
from services.consumers.scoring.checks.cds_cards import cards_on, fired, hook_and_floor, severe


class CdsNoCard(RubricCheck):
    kind = "cds_no_card"
    params = CdsQuietParams

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        hook, floor = hook_and_floor(item.params)
        if not fired(ctx, hook):
            return CheckResult(False, f"{hook} was not fired in this turn: silence is not shown")
        noisy = [c for c in cards_on(ctx, hook) if severe(c, floor)]
        if noisy:
            shown = "; ".join(str(c.get("summary")) for c in noisy)
            return CheckResult(False, f"{len(noisy)} {hook} card(s) at {floor} or above where nothing is "
                                      f"wrong: {shown}")
        return CheckResult(True, f"no {hook} card at {floor} or above")
