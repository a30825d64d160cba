"""Checks of a CDS Hooks service's cards (the `cds-hooks:` assistant): what it showed on which hook of the
turn, read from the turn's `rounds.cds.exchange` events — the right warning on the right hook, severe
enough; a suggestion whose action is the right FHIR write; silence when nothing is wrong."""

from __future__ import annotations

from contracts.scenario import FieldConstraint, RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import RubricCheck, localized_terms
from services.consumers.scoring.constraints import satisfied
from services.consumers.scoring.text import normalize

SEVERITY = {"info": 0, "warning": 1, "critical": 2}  # CDS Hooks 2.0 card indicators, least to most urgent


def cards_on(ctx: CheckContext, hook: str) -> list[dict]:
    """The cards the turn's calls of `hook` returned (every service declaring it)."""
    return [card for call in ctx.log.cds
            if call.exchange.hook == hook and call.exchange.outcome == "cards"
            for card in call.exchange.cards]


def _fired(ctx: CheckContext, hook: str) -> bool:
    return any(call.exchange.hook == hook for call in ctx.log.cds)


def _severe(card: dict, floor: str) -> bool:
    return SEVERITY.get(str(card.get("indicator")), -1) >= SEVERITY.get(floor, 1)


class CdsCard(RubricCheck):
    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        hook, floor = str(item.params.get("hook", "")), str(item.params.get("indicator", "warning"))
        if not _fired(ctx, hook):
            return CheckResult(False, f"{hook} was not fired in this turn (or no service declares it)")
        terms = [normalize(t) for t in localized_terms(item.params)]
        cards = cards_on(ctx, hook)
        for card in cards:
            text = normalize(f"{card.get('summary', '')} {card.get('detail', '')}")
            named = next((t for t in terms if t and t in text), None)
            if named and _severe(card, floor):
                return CheckResult(True, f"{hook} card {card.get('indicator')}: {card.get('summary')!r} "
                                         f"names {named!r}")
        shown = "; ".join(f"{c.get('indicator')}: {c.get('summary')}" for c in cards) or "no card"
        return CheckResult(False, f"no {hook} card at {floor} or above names {terms}; shown: {shown}")


def _actions(cards: list[dict], resource_type: str):
    """(suggestion label, action type, resource) of every create/update of `resource_type` the cards
    suggest."""
    for card in cards:
        for suggestion in card.get("suggestions") or ():
            for action in suggestion.get("actions") or ():
                resource = action.get("resource") or {}
                writes = action.get("type") in ("create", "update")
                if writes and resource.get("resourceType") == resource_type:
                    yield suggestion.get("label"), action["type"], resource


class CdsSuggestion(RubricCheck):
    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        hook, rtype = str(item.params.get("hook", "")), str(item.params.get("resource_type", ""))
        try:
            constraints = [FieldConstraint.model_validate(c) for c in item.params.get("constraints") or ()]
        except ValueError as exc:
            return CheckResult(False, f"rubric constraints are not FieldConstraints: {exc}")
        tried = []
        for label, kind, resource in _actions(cards_on(ctx, hook), rtype):
            failed = [f"{c.path} {c.op} {c.value!r}" for c in constraints if not _holds(resource, c, ctx)]
            if not failed:
                return CheckResult(True, f"{hook} suggestion {label!r} {kind}s a {rtype} meeting all "
                                         f"{len(constraints)} constraints")
            tried.append(f"{label!r} fails {'; '.join(failed)}")
        return CheckResult(False, f"no {hook} suggestion makes the {rtype} write"
                                  + (f" ({' | '.join(tried)})" if tried else ""))


def _holds(resource: dict, constraint, ctx: CheckContext) -> bool:
    try:
        return satisfied(resource, constraint, ctx.now)
    except ValueError:
        return False


class CdsNoCard(RubricCheck):
    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        hook, floor = str(item.params.get("hook", "")), str(item.params.get("indicator", "warning"))
        if not _fired(ctx, hook):
            return CheckResult(False, f"{hook} was not fired in this turn: silence is not shown")
        noisy = [c for c in cards_on(ctx, hook) if _severe(c, floor)]
        if noisy:
            shown = "; ".join(str(c.get("summary")) for c in noisy)
            return CheckResult(False, f"{len(noisy)} {hook} card(s) at {floor} or above where nothing is "
                                      f"wrong: {shown}")
        return CheckResult(True, f"no {hook} card at {floor} or above")
