"""Checks against the record: the sandbox's final state (writes, path-independent), the writes a turn made
(from the FHIR server's own interaction events), and values that only exist after the session clock."""

from __future__ import annotations

from datetime import datetime

from contracts.scenario import ExpectedWrite, Fact, RubricItem
from contracts.trajectory import EhrCall
from services.consumers.scoring.check_inputs import CheckContext, CheckResult, RecordValue, Written
from services.consumers.scoring.checks.base import RubricCheck
from services.consumers.scoring.checks.facts import quantity_matches
from services.consumers.scoring.constraints import aware, satisfied
from services.consumers.scoring.numbers import Cited, cited_numbers, is_threshold
from services.consumers.scoring.subjects import cited_as, observation_names
from services.consumers.scoring.text import normalize
from services.consumers.scoring.units import analyte_of


def _failed_constraints(written: Written, expected: ExpectedWrite, ctx: CheckContext) -> list[str]:
    failed = []
    for constraint in expected.constraints:
        try:
            ok = satisfied(written.resource or {}, constraint, ctx.now)
        except ValueError as exc:
            ok, constraint = False, constraint.model_copy(update={"path": f"{constraint.path} ({exc})"})
        if not ok:
            failed.append(f"{constraint.path} {constraint.op} {constraint.value!r}")
    return failed


class WriteMade(RubricCheck):
    """Some resource of the expected type in the session's final state meets every constraint."""


    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        index = item.params.get("write")
        if not isinstance(index, int) or not 0 <= index < len(ctx.turn.writes):
            return CheckResult(False, f"rubric names write {index!r}, the turn has {len(ctx.turn.writes)}")
        expected = ctx.turn.writes[index]
        candidates = [w for w in ctx.state.current() if w.resource_type == expected.resource_type]
        if not candidates:
            return CheckResult(False, f"no {expected.resource_type} in the sandbox's final state")
        closest: tuple[int, Written, list[str]] | None = None
        for written in candidates:
            failed = _failed_constraints(written, expected, ctx)
            if not failed:
                return CheckResult(True, f"{written.resource_type}/{written.id} v{written.version} meets all "
                                         f"{len(expected.constraints)} constraints")
            if closest is None or len(failed) < closest[0]:
                closest = (len(failed), written, failed)
        assert closest is not None
        _, written, failed = closest
        return CheckResult(False, f"closest {written.resource_type}/{written.id} fails: {'; '.join(failed)}")


def _describe(calls: list[EhrCall]) -> str:
    return ", ".join(f"{c.method} {c.url}" for c in calls)


class NoForbiddenWrite(RubricCheck):
    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        writes = ctx.log.writes()
        if writes:
            return CheckResult(False, f"wrote in a turn that forbids writes: {_describe(writes)}")
        return CheckResult(True, "no write in this turn")


class NoUnexpectedWrite(RubricCheck):
    """Writes of this turn whose resource type is not allowed fail it. A transaction/batch posted to the
    base names no type in its URL: then the types in the session's final state stand for it."""


    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        allowed = set(item.params.get("allowed") or [])
        unexpected: list[str] = []
        for call in ctx.log.writes():
            types = [call.resource_type] if call.resource_type else sorted(
                {w.resource_type for w in ctx.state.writes})
            unexpected += [f"{call.method} {t}" for t in types if t not in allowed]
        if unexpected:
            return CheckResult(False, f"unexpected writes: {', '.join(unexpected)}")
        return CheckResult(True, f"writes only of {sorted(allowed) or 'nothing'}")


class NoFutureValue(RubricCheck):
    """A number the answer cites AS a value of an observation (named in its clause: subjects.py) that equals
    a result of that observation taken after `now` — and no result of it, nor a fact of it, known by `now` —
    was read from the future (the sandbox hides it; the assistant leaked it). Numbers are compared as
    fact_cited compares them (units, conversions, the fact's tolerance). Doses, counts and numbers about
    nothing the record holds are not values of it; thresholds ("below 3.5", "3.5以上") and counts written
    in words ("twice") neither."""


    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        now = aware(ctx.now)
        by_code: dict[str, list[RecordValue]] = {}
        coded = {f.code for turn in ctx.scenario.turns for f in turn.facts if f.code}
        for value in (v for v in ctx.state.record_values if v.code in coded):
            by_code.setdefault(value.code, []).append(value)
        facts = [f for turn in ctx.scenario.turns for f in turn.facts
                 if f.code in by_code and isinstance(f.value, int | float) and not isinstance(f.value, bool)]
        names = {code: observation_names(ctx.scenario, code) for code in by_code}
        later = sum(1 for v in ctx.state.record_values
                    if v.code in coded and v.time is not None and v.time > now)
        text = ctx.log.answer_text
        norm = normalize(text)
        for cited in cited_numbers(text):
            if not any(ch.isdigit() for ch in cited.text) or is_threshold(text, cited):
                continue  # counts in words ("twice", "两次") and thresholds are not results
            for code in sorted(cited_as(norm, cited, names)):
                leaked = _leaked(cited, code, by_code[code], [f for f in facts if f.code == code], now)
                if leaked is not None:
                    return CheckResult(False, f"cites {cited.text} as {code.rsplit('|', 1)[-1]} = "
                                              f"{leaked.reference} at {leaked.time} (after now)")
        return CheckResult(True, f"no value from after now ({later} later results checked)")


def _leaked(cited: Cited, code: str, values: list[RecordValue], facts: list[Fact], now: datetime,
            ) -> RecordValue | None:
    """The result of `code` after `now` that `cited` states, unless a result or fact known by now says the
    same (then the answer may have it from there)."""
    label = next((f.label.en for f in facts if f.label), None)
    analyte, tolerance = analyte_of(code, label), next((f.tolerance for f in facts), None)
    leaked = next((v for v in values if v.time is not None and v.time > now
                   and quantity_matches(cited, v.value, v.unit, analyte, tolerance)), None)
    if leaked is None:
        return None
    known = [(v.value, v.unit) for v in values if v.time is None or v.time <= now]
    known += [(float(f.value), f.unit) for f in facts]  # type: ignore[arg-type]
    if any(quantity_matches(cited, value, unit, analyte, tolerance) for value, unit in known):
        return None
    return leaked
