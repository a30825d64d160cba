"""Silence where nothing is wrong: no card at or above the indicator on the hook (checks/cds_cards.py)."""

from __future__ import annotations

from contracts.rubric import CdsQuietParams
from contracts.scenario import RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import RubricCheck
from services.consumers.scoring.checks.cds_cards import hook_cards


class CdsNoCard(RubricCheck):
    kind = "cds_no_card"
    params = CdsQuietParams

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        shown = hook_cards(item.params, ctx, ": silence is not shown")
        if isinstance(shown, CheckResult):
            return shown
        hook, floor, noisy = shown.hook, shown.floor, shown.severe
        if noisy:
            listed = "; ".join(str(c.get("summary")) for c in noisy)
            return CheckResult(False, f"{len(noisy)} {hook} card(s) at {floor} or above where nothing is "
                                      f"wrong: {listed}")
        return CheckResult(True, f"no {hook} card at {floor} or above")
