"""The answer names one of the terms, in either language or a lexicon synonym (earns nothing alone)."""

from __future__ import annotations

from contracts.rubric import TermsParams
from contracts.scenario import RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import AnswerCheck, localized_terms
from services.consumers.scoring.lexicon import expand_terms
from services.consumers.scoring.text import find, normalize


class EntityMentioned(AnswerCheck):
    kind = "entity_mentioned"
    params = TermsParams

    def judge(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        terms = expand_terms(localized_terms(item.params))
        if not terms:
            return CheckResult(False, "rubric item lists no terms")
        hits = find(normalize(ctx.log.answer_text), terms)
        if hits:
            return CheckResult(True, f"mentions {hits[0].cue!r}")
        return CheckResult(False, f"none of {terms[:6]} mentioned")
