"""A card on the hook suggests an action (create/update) whose resource is the right FHIR write."""

from __future__ import annotations

from contracts.rubric import CdsSuggestionParams
from contracts.scenario import FieldConstraint, RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import RubricCheck
from services.consumers.scoring.checks.cds_cards import cards_on
from services.consumers.scoring.constraints import satisfied


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
    kind = "cds_suggestion"
    params = CdsSuggestionParams

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
