"""Checks against the record: the sandbox's final state (writes, path-independent), the writes a turn made
(from the FHIR server's own interaction events), and values that only exist after the session clock."""

from __future__ import annotations

from datetime import UTC

from services.consumers.scoring.checks.base import Check
from services.consumers.scoring.checks.facts import number_matches
from services.consumers.scoring.constraints import satisfied
from services.consumers.scoring.model import CheckContext, CheckResult, EhrCall, RecordValue, Written
from services.consumers.scoring.numbers import Cited, cited_numbers, is_threshold
from services.consumers.scoring.units import alternatives, analyte_of
from services.simulator.data_model.scenario import ExpectedWrite, RubricItem


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


class WriteMade(Check):
    """Some resource of the expected type in the session's final state meets every constraint."""

    kind = "write_made"

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


class NoForbiddenWrite(Check):
    kind = "no_forbidden_write"

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        writes = ctx.log.writes()
        if writes:
            return CheckResult(False, f"wrote in a turn that forbids writes: {_describe(writes)}")
        return CheckResult(True, "no write in this turn")


class NoUnexpectedWrite(Check):
    """Writes of this turn whose resource type is not allowed fail it. A transaction/batch posted to the
    base names no type in its URL: then the types in the session's final state stand for it."""

    kind = "no_unexpected_write"

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


def _matches_value(cited: Cited, value: RecordValue) -> bool:
    analyte = analyte_of(value.code, None)
    if cited.unit is not None and value.unit is not None:
        in_units = alternatives(value.value, value.unit, analyte)
        return cited.unit in in_units and number_matches(cited, in_units[cited.unit], None)
    unitless = alternatives(value.value, value.unit, analyte, generic=False) or {None: value.value}
    return any(number_matches(cited, v, None) for v in unitless.values())


class NoFutureValue(Check):
    """A number in the answer that equals a result of the record taken after `now` — and no result, and no
    fact, known by `now` — was read from the future (the sandbox hides it; the assistant leaked it).
    Thresholds the answer compares with ("below 3.5", "3.5以上") are not cited values."""

    kind = "no_future_value"

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        now = ctx.now if ctx.now.tzinfo else ctx.now.replace(tzinfo=UTC)
        future = [v for v in ctx.state.record_values if v.time is not None and v.time > now]
        known = [v for v in ctx.state.record_values if v.time is None or v.time <= now]
        facts = [RecordValue(f.code or "", float(f.value), f.unit, None, "fact")
                 for turn in ctx.scenario.turns for f in turn.facts
                 if isinstance(f.value, int | float) and not isinstance(f.value, bool)]
        text = ctx.log.answer_text
        for cited in cited_numbers(text):
            if is_threshold(text, cited):
                continue
            leaked = next((v for v in future if _matches_value(cited, v)), None)
            if leaked and not any(_matches_value(cited, v) for v in known + facts):
                where = f"{leaked.reference} at {leaked.time}"
                return CheckResult(False, f"cites {cited.text} = {where} (after now)")
        return CheckResult(True, f"no value from after now ({len(future)} later results checked)")
