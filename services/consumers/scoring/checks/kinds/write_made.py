"""The sandbox's final state holds the expected write (path-independent: the end state, not the calls)."""

from __future__ import annotations

from contracts.rubric import WriteParams
from contracts.scenario import ExpectedWrite, RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult, Written
from services.consumers.scoring.checks.base import RubricCheck
from services.consumers.scoring.constraints import satisfied


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

    kind = "write_made"
    params = WriteParams

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
