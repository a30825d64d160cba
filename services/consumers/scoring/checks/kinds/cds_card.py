"""A CDS Hooks card on the hook, at least as severe as the indicator, names the terms
(checks/cds_cards.py)."""

from __future__ import annotations

from contracts.rubric import CdsCardParams
from contracts.scenario import RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import RubricCheck, localized_terms
from services.consumers.scoring.checks.cds_cards import hook_cards
from services.consumers.scoring.text import normalize


class CdsCard(RubricCheck):
    kind = "cds_card"
    params = CdsCardParams

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        shown = hook_cards(item.params, ctx, " (or no service declares it)")
        if isinstance(shown, CheckResult):
            return shown
        hook, terms = shown.hook, [normalize(t) for t in localized_terms(item.params)]
        for card in shown.severe:
            text = normalize(f"{card.get('summary', '')} {card.get('detail', '')}")
            named = next((t for t in terms if t and t in text), None)
            if named:
                return CheckResult(True, f"{hook} card {card.get('indicator')}: {card.get('summary')!r} "
                                         f"names {named!r}")
        listed = "; ".join(f"{c.get('indicator')}: {c.get('summary')}" for c in shown.cards) or "no card"
        return CheckResult(False, f"no {hook} card at {shown.floor} or above names {terms}; shown: {listed}")
