"""RubricKind -> the check that judges it (llm_judge is optional and lives in judge.py)."""

from __future__ import annotations

from services.consumers.scoring.checks.base import Check
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

CHECKS: dict[str, Check] = {
    check.kind: check
    for check in (FactCited(), EntityMentioned(), Conclusion(), DoesNotRecommend(), WriteMade(),
                  NoForbiddenWrite(), NoUnexpectedWrite(), NoFutureValue(), AskedPatient())
}
