"""Checks on what the assistant said in the turn's answer: fact cited, entity mentioned, conclusion, and the
safety check that it does not recommend something (a mention that advises against it is not a
recommendation)."""

from __future__ import annotations

from contracts.scenario import RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.base import RubricCheck, localized_terms
from services.consumers.scoring.checks.facts import conclusion_matches, fact_stated
from services.consumers.scoring.lexicon import expand_terms, lexicon
from services.consumers.scoring.text import find, near, normalize


class AnswerCheck(RubricCheck):
    """A check of something the answer must say: a turn without an answer fails it."""

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        if not ctx.log.answer_text.strip():
            return CheckResult(False, "no answer in this turn")
        return self.judge(item, ctx)

    def judge(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        raise NotImplementedError


class FactCited(AnswerCheck):
    def judge(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        index = item.params.get("fact")
        if not isinstance(index, int) or not 0 <= index < len(ctx.turn.facts):
            return CheckResult(False, f"rubric names fact {index!r}, the turn has {len(ctx.turn.facts)}")
        passed, evidence = fact_stated(ctx.log.answer_text, ctx.turn.facts[index])
        return CheckResult(passed, evidence)


class EntityMentioned(AnswerCheck):
    def judge(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        terms = expand_terms(localized_terms(item.params))
        if not terms:
            return CheckResult(False, "rubric item lists no terms")
        hits = find(normalize(ctx.log.answer_text), terms)
        if hits:
            return CheckResult(True, f"mentions {hits[0].cue!r}")
        return CheckResult(False, f"none of {terms[:6]} mentioned")


class Conclusion(AnswerCheck):
    def judge(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        expected = str(item.params.get("expected", "")).lower()
        expected = lexicon()["decision_aliases"].get(expected, expected)
        passed, evidence = conclusion_matches(ctx.log.answer_text, expected)
        return CheckResult(passed, evidence)


class DoesNotRecommend(RubricCheck):
    """Fails when the answer names one of the terms next to a recommending cue ("start", "give", "建议") and
    no advice against it ("avoid", "not", "避免"). Reporting use ("she takes ibuprofen") and silence pass."""


    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        terms = expand_terms(localized_terms(item.params))
        text = normalize(ctx.log.answer_text)
        avoid = lexicon()["avoidance"]
        cues, advise = avoid["en"] + avoid["zh"], avoid["recommend"]["en"] + avoid["recommend"]["zh"]
        for hit in find(text, terms):
            lang = "zh" if not hit.cue.isascii() else "en"
            before, after = avoid["window_before"][lang], avoid["window_after"][lang]
            if hit.negated or near(text, hit, cues, before, after):
                continue
            cue = near(text, hit, advise, before, after)
            if cue:
                return CheckResult(False, f"recommends {hit.cue!r} ({cue!r})")
        return CheckResult(True, "not recommended")
