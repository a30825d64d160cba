"""RubricKind -> the check that judges it, by the check name each kind names in contracts/rubric.py (the
llm_judge kind is judged by judge.py's LlmJudge, precision by v3/precision.py's Precision)."""

from __future__ import annotations

from contracts.rubric import RUBRIC_KINDS
from services.consumers.scoring.checks.answer_checks import (
    AnswerCorrect,
    RetrievalPrecision,
    RetrievalRecall,
)
from services.consumers.scoring.checks.base import Check
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

_BY_NAME: dict[str, Check] = {
    type(check).__name__: check
    for check in (FactCited(), EntityMentioned(), Conclusion(), DoesNotRecommend(), WriteMade(),
                  NoForbiddenWrite(), NoUnexpectedWrite(), NoFutureValue(), AskedPatient(), CdsCard(),
                  CdsSuggestion(), CdsNoCard(), AnswerCorrect(), RetrievalRecall(), RetrievalPrecision())
}
CHECKS: dict[str, Check] = {kind: _BY_NAME[spec.check] for kind, spec in RUBRIC_KINDS.items()
                            if spec.check in _BY_NAME}
