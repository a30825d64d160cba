"""Precision (scorer v4): what an answer claims beyond what it was asked, and what it gets wrong.

- Every wrong or invented result claim (verify.py) costs the rubric's `per_wrong`, whatever its precision,
  and so does every conclusion that contradicts what the turn asks (a wrong verdict costs on every turn
  type).
- True results the turn did not ask for are free up to a generous budget (the task type's, plus the
  family's allowance for summaries and medication reviews; never below the rubric's own); each beyond it
  costs `per_extra`, and padding alone never takes the turn below `extra_floor` (×0.5 on a turn whose facts
  are right).
- A spray of bare numbers that name nothing (`spray` or more in one clause) is a set of invented claims;
  fewer bare numbers are read as nothing.
Verbosity (the answer's claims and characters) is reported beside the factor, never folded into it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from contracts.rubric import PrecisionParams
from contracts.scenario import Turn
from services.consumers.scoring.v4.claim_model import Verified
from services.consumers.scoring.v4.reading import reading


@dataclass(frozen=True)
class Precision:
    factor: float
    wrong: list[Verified]
    extra: list[Verified]
    wrong_conclusions: list[str]
    budget: int
    per_wrong: float
    per_extra: float
    verbosity: dict

    def deductions(self, names: Mapping[str, list[str]]) -> dict:
        def rows(found: list[Verified]) -> list[dict]:
            return [{"text": v.claim.base.cited.text, "unit": v.claim.base.unit, "subject": v.claim.subject,
                     "verdict": v.verdict, "qualifier": v.claim.qualifier,
                     "name": (names.get(v.claim.subject) or [None])[0] if v.claim.subject else None}
                    for v in found]
        return {"factor": self.factor, "wrong": rows(self.wrong), "extra": rows(self.extra),
                "wrong_conclusions": self.wrong_conclusions, "budget": self.budget,
                "beyond_budget": max(0, len(self.extra) - self.budget), "per_wrong": self.per_wrong,
                "per_extra": self.per_extra, "verbosity": self.verbosity}

    def evidence(self) -> str:
        wrong = ", ".join(f"{v.claim.base.cited.text} ({v.verdict})" for v in self.wrong[:5]) or "none"
        return (f"factor {self.factor:.2f}: {len(self.wrong)} wrong or invented claims ({wrong}), "
                f"{len(self.wrong_conclusions)} wrong conclusions × {self.per_wrong}; {len(self.extra)} true "
                f"extras (budget {self.budget}) × {self.per_extra} beyond it")


def budget_of(turn: Turn, family: str | None, rule: PrecisionParams) -> int:
    table = reading()["precision"]
    base = table["budget_by_task"].get(turn.task_type, 8)
    return max(rule.budget, base + table["per_family_extra"].get(family or "", 0))


def precision(verified: list[Verified], asked: set[int], wrong_conclusions: list[str], turn: Turn,
              family: str | None, params: dict | None, chars: int) -> Precision:
    """`asked`: ids of the verified claims that met a fact of the turn (never extras)."""
    rule = PrecisionParams.model_validate(params or {})
    table = reading()["precision"]
    bare = [v for v in verified if v.claim.subject is None and v.claim.base.unitless]
    sprays = Counter(v.claim.base.clause for v in bare)
    wrong, extra = [], []
    for v in verified:
        if v.claim.subject is None and (not v.claim.base.unitless
                                        or sprays[v.claim.base.clause] < reading()["spray"]):
            continue
        if v.verdict != "true":
            wrong.append(v)
        elif id(v) not in asked:
            extra.append(v)
    budget = budget_of(turn, family, rule)
    padding = max(table["extra_floor"], 1.0 - table["per_extra"] * max(0, len(extra) - budget))
    factor = max(0.0, padding - rule.per_wrong * (len(wrong) + len(wrong_conclusions)))
    verbosity = {"claims": len(verified), "true_extras": len(extra), "chars": chars}
    return Precision(round(factor, 6), wrong, extra, wrong_conclusions, budget, rule.per_wrong,
                     table["per_extra"], verbosity)
