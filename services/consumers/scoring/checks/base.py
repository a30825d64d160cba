"""What a check is: a small object, called with a rubric item and its context, returning a typed result."""

from __future__ import annotations

from typing import ClassVar

from services.consumers.scoring.model import CheckContext, CheckResult
from services.simulator.data_model.scenario import RubricItem


class Check:
    """Subclasses set `kind` (a RubricKind) and implement `__call__`; they never raise on odd input (a
    malformed item is a failed check with the reason as evidence — a scenario bug must not stop a run)."""

    kind: ClassVar[str]

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        raise NotImplementedError


def localized_terms(params: dict, key: str = "terms") -> list[str]:
    """Terms of an item in both languages (an answer may name a drug in either)."""
    terms = params.get(key) or {}
    if isinstance(terms, list):
        return [str(t) for t in terms]
    return [str(t) for values in terms.values() for t in (values or [])]
