"""Precision (v3): an answer is judged on what it claims, not only on what it hits.

The rule is rubric data (a `precision` item's params; PrecisionParams' defaults for a turn without one):
- wrong: a claim about one of the turn's subjects that states neither a fact of the session nor a result of
  that subject known by `now`, or is written in a unit that is unknown or does not convert — each costs
  `per_wrong`;
- extra: a claim about a result the turn did not ask for (another lab, an unattributed number, a result of
  the asked subject that is not the asked value) — beyond `budget` of them, each costs `per_extra`.
The turn's score is multiplied by max(0, 1 - per_wrong * wrong - per_extra * max(0, extra - budget)). Doses
(claims about drugs), thresholds, counts and questions are not results.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from contracts.rubric import PrecisionParams
from contracts.scenario import Fact
from services.consumers.scoring.checks.facts import quantity_matches
from services.consumers.scoring.numbers import cited_numbers
from services.consumers.scoring.units import analyte_of
from services.consumers.scoring.v3.claim_model import Claim
from services.consumers.scoring.v3.subjects import subject_of


@dataclass(frozen=True)
class Precision:
    factor: float
    wrong: list[Claim]
    extra: list[Claim]
    budget: int
    per_wrong: float
    per_extra: float

    def deductions(self, names: Mapping[str, list[str]]) -> dict:
        """What the report shows of the rule on a turn: each wrong claim and each unasked-for result (the
        number as written, its unit, its subject key and first name), the budget, the rates and the factor."""
        def claims(found: list[Claim]) -> list[dict]:
            return [{"text": c.cited.text, "unit": c.unit, "subject": c.subject,
                     "name": (names.get(c.subject) or [None])[0] if c.subject else None} for c in found]
        return {"factor": self.factor, "wrong": claims(self.wrong), "extra": claims(self.extra),
                "budget": self.budget, "beyond_budget": max(0, len(self.extra) - self.budget),
                "per_wrong": self.per_wrong, "per_extra": self.per_extra}

    def evidence(self) -> str:
        wrong = ", ".join(c.cited.text for c in self.wrong[:5]) or "none"
        return (f"factor {self.factor:.2f}: {len(self.wrong)} wrong claims ({wrong}) × {self.per_wrong}; "
                f"{len(self.extra)} unasked results (budget {self.budget}) × {self.per_extra} beyond it")


def _states(claim: Claim, value: float, unit: str | None, code: str | None) -> bool:
    return not claim.unit_unknown and quantity_matches(claim.cited, value, unit, analyte_of(code, None), None)


def precision(claims: list[Claim], facts: list[Fact], subjects: set[str],
              known: dict[str, list[tuple[float, str | None]]], params: dict | None) -> Precision:
    r = PrecisionParams.model_validate(params or {})  # the item's params, the model's defaults for the rest
    asked = [(subject_of(f), float(f.value), f.unit, f.code) for f in facts
             if isinstance(f.value, int | float) and not isinstance(f.value, bool)]
    asked += [(subject_of(f), n.value, None, None) for f in facts if isinstance(f.value, str)
              for n in cited_numbers(f.value)]  # "129/85 mmHg", an MRN: the numbers of a string fact
    wrong: list[Claim] = []
    extra: list[Claim] = []
    for c in claims:
        if c.threshold or c.in_question or (c.subject or "").startswith("drug:"):
            continue
        if any(c.subject in (key, None) and _states(c, value, unit, code)
               for key, value, unit, code in asked):
            continue
        if c.subject in subjects and (c.unit_unknown or not any(
                _states(c, v, u, c.subject) for v, u in known.get(c.subject, []))):
            wrong.append(c)
            continue
        extra.append(c)
    over = max(0, len(extra) - r.budget)
    factor = max(0.0, 1.0 - r.per_wrong * len(wrong) - r.per_extra * over)
    return Precision(round(factor, 6), wrong, extra, r.budget, r.per_wrong, r.per_extra)
