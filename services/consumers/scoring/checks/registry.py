"""RubricKind -> the check that judges it, by the check name each kind names in contracts/rubric.py (the
llm_judge kind is judged by judge.py's LlmJudge, precision by v3/precision.py's Precision: JUDGED_ELSEWHERE).

A kind whose check is neither here nor judged elsewhere is an error when this module loads, and asking for a
kind with no check raises UnknownKind: a rubric item is never dropped silently."""

from __future__ import annotations

from contracts.rubric import RUBRIC_KINDS
from services.consumers.scoring.checks.answer_checks import (
    AnswerCorrect,
    RetrievalPrecision,
    RetrievalRecall,
)
from services.consumers.scoring.checks.base import RubricCheck
from services.consumers.scoring.checks.cds_checks import CdsCard, CdsNoCard, CdsSuggestion
from services.consumers.scoring.checks.dialogue_checks import AskedPatient
from services.consumers.scoring.checks.record_checks import (
    NoForbiddenWrite,
    NoFutureValue,
    NoUnexpectedWrite,
    WriteMade,
)
from services.consumers.scoring.checks.text_checks import (
    Conclusion,
    DoesNotRecommend,
    EntityMentioned,
    FactCited,
)

_BY_NAME: dict[str, RubricCheck] = {
    type(check).__name__: check
    for check in (FactCited(), EntityMentioned(), Conclusion(), DoesNotRecommend(), WriteMade(),
                  NoForbiddenWrite(), NoUnexpectedWrite(), NoFutureValue(), AskedPatient(), CdsCard(),
                  CdsSuggestion(), CdsNoCard(), AnswerCorrect(), RetrievalRecall(), RetrievalPrecision())
}
JUDGED_ELSEWHERE = frozenset({"LlmJudge", "Precision"})  # the judge; each version's turn rule
_UNMATCHED = [kind for kind, spec in RUBRIC_KINDS.items()
              if spec.check not in _BY_NAME and spec.check not in JUDGED_ELSEWHERE]
if _UNMATCHED:
    raise ImportError(f"rubric kinds whose check no scorer registers: {', '.join(_UNMATCHED)}")
CHECKS: dict[str, RubricCheck] = {kind: _BY_NAME[spec.check] for kind, spec in RUBRIC_KINDS.items()
                            if spec.check in _BY_NAME}


class UnknownKind(KeyError):
    """A rubric kind no check judges (not in contracts/rubric.py, or judged elsewhere and asked for here)."""


def check_of(kind: str) -> RubricCheck:
    """The check registered for `kind`; UnknownKind when none is."""
    check = CHECKS.get(kind)
    if check is None:
        raise UnknownKind(f"no check for rubric kind {kind!r}")
    return check
