"""A CDS Hooks card on the hook, at least as severe as the indicator, names the terms
(checks/cds_cards.py)."""

from __future__ import annotations

from contracts.rubric import CdsCardParams
from contracts.scenario import RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import RubricCheck, localized_terms
from services.consumers.scoring.checks.cds_cards import cards_on, fired, hook_and_floor, severe
from services.consumers.scoring.text import normalize


class CdsCard(RubricCheck):
    kind = "cds_card"
    params = CdsCardParams

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        hook, floor = hook_and_floor(item.params)
        if not fired(ctx, hook):
            return CheckResult(False, f"{hook} was not fired in this turn (or no service declares it)")
        terms = [normalize(t) for t in localized_terms(item.params)]
        cards = cards_on(ctx, hook)
        for card in cards:
            text = normalize(f"{card.get('summary', '')} {card.get('detail', '')}")
            named = next((t for t in terms if t and t in text), None)
            if named and severe(card, floor):
                return CheckResult(True, f"{hook} card {card.get('indicator')}: {card.get('summary')!r} "
                                         f"names {named!r}")
        shown = "; ".join(f"{c.get('indicator')}: {c.get('summary')}" for c in cards) or "no card"
        return CheckResult(False, f"no {hook} card at {floor} or above names {terms}; shown: {shown}")
