"""The fact_cited and conclusion checks v3 and v4 share. A fact is stated (v3's `fact_stated_v3`, unless a
version reads some kinds of fact its own way first) and then held to the version's grounding: v3 asks whether
the fact's resources reached the assistant, v4 whether what the answer says rests on a response body. Only
those two steps differ between the versions, so they are what each passes in."""

from __future__ import annotations

from collections.abc import Callable

from contracts.scenario import Fact, RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.v3.claim_model import ParsedAnswer
from services.consumers.scoring.v3.conclusions import asked_of_fact, asked_of_item
from services.consumers.scoring.v3.conclusions import judge as judge_conclusion
from services.consumers.scoring.v3.facts import fact_stated_v3
from services.consumers.scoring.v3.session_view import SessionView
from services.consumers.scoring.v3.subjects import subject_of
from services.consumers.scoring.v3.turn import named_fact

Grounding = Callable[[Fact], CheckResult | None]  # None: nothing to hold the fact to
OwnReading = Callable[[Fact], tuple[bool, str] | None]  # None: the fact is read as v3 reads it


def _question(ctx: CheckContext) -> str:
    return ctx.log.doctor.text if ctx.log.doctor else ""


def fact_cited(item: RubricItem, ctx: CheckContext, view: SessionView, text: str, parsed: ParsedAnswer,
               grounding: Grounding, own: OwnReading | None = None) -> CheckResult:
    """The fact the item names, stated in the answer (`own` first, then v3's reading) and, when stated,
    grounded (`grounding`): a fact told from nothing the assistant read fails, with both evidences."""
    fact = named_fact(item, ctx)
    if isinstance(fact, CheckResult):
        return fact
    stated = own(fact) if own is not None else None
    if stated is None:
        question, key = _question(ctx), subject_of(fact)
        names = view.names.get(key, [])
        stated = fact_stated_v3(text, fact, parsed, view.known.get(key, []), question, names,
                                asked_of_fact(fact, ctx.turn, question, view.names))
    passed, evidence = stated
    if passed:
        ground = grounding(fact)
        if ground is not None:
            return CheckResult(ground.passed, f"{evidence}; {ground.evidence}")
    return CheckResult(passed, evidence)


def conclusion(item: RubricItem, ctx: CheckContext, view: SessionView, parsed: ParsedAnswer) -> CheckResult:
    """A conclusion item judged on the answer's conclusion claims about what the item asks."""
    ask = asked_of_item(item.params, ctx.turn, _question(ctx), view.names)
    return CheckResult(*judge_conclusion(parsed.conclusions, ask))
