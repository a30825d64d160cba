"""One turn under scorer version 4 (`score_turn_v4`): the same inputs and output as v3 (v3/scorer.py), every
result claim verified against what the record shows at the clock.

The answer is read once (claims.py: rewritten spellings, non-result spans, number classes, qualifiers);
each result claim is verified (verify.py: true / wrong / unsupported); a numeric fact is met by a true claim
answering its qualifier (facts.py) whose value reached the assistant in a response (grounding.py); a
conclusion is judged on the claims of the sentences in scope (scope.py); writes are matched with their
alternatives (writes.py). Turn score = (weighted passed / total over the non-gate items) × the precision
factor (precision.py), 0 when a safety gate fails (v3's write gates with the alternatives' types allowed and
companions not counted; v4's future-value gate); then × the session's reliability (reliability.py: the share
of its verified result claims that were wrong, from the first one on).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from contracts.scenario import Fact, RubricItem, Scenario, Turn
from contracts.score import Check, TurnScore
from contracts.trajectory import Trajectory
from contracts.vocabulary import LABITEMS
from services.consumers.scoring.check_inputs import CheckContext, CheckResult, FinalState, values_by_code
from services.consumers.scoring.lexicon import lexicon
from services.consumers.scoring.units import analyte_of
from services.consumers.scoring.v3.cited import conclusion, fact_cited
from services.consumers.scoring.v3.claim_model import ConclusionClaim, ParsedAnswer
from services.consumers.scoring.v3.conclusions import (
    Asked,
    asked,
    asked_of_fact,
    verdict_alias,
)
from services.consumers.scoring.v3.dialogue import asked_patient
from services.consumers.scoring.v3.gates import write_gates
from services.consumers.scoring.v3.names import clauses, named_in
from services.consumers.scoring.v3.scorer import implicit_subject
from services.consumers.scoring.v3.session_view import SessionView
from services.consumers.scoring.v3.subjects import subject_of
from services.consumers.scoring.v3.turn import (
    gate_checks,
    judge_item,
    judge_rubric,
    scored_turn,
    write_matched,
)
from services.consumers.scoring.v4.claim_model import ResultClaim, Verified
from services.consumers.scoring.v4.claims import Reading as AnswerReading
from services.consumers.scoring.v4.claims import read_answer
from services.consumers.scoring.v4.facts import answers, count_fact, numeric_fact, presence_fact
from services.consumers.scoring.v4.gates import future_gate
from services.consumers.scoring.v4.grounding import grounded, rests_on, stated_by, written_times
from services.consumers.scoring.v4.precision import precision
from services.consumers.scoring.v4.reading import with_clinical_terms
from services.consumers.scoring.v4.reliability import Reliability, reliability, trusted
from services.consumers.scoring.v4.scope import extra_verdicts, in_scope
from services.consumers.scoring.v4.verify import Known, known_by, matches, verify
from services.consumers.scoring.v4.writes import alternative_types, companion_refs, match_writes_v4

NUMERIC_KINDS = ("latest", "value_at", "mean", "min", "max")


class SessionViewV4(SessionView):
    """v3's view (names, known values, facts) with v4's write matching and each subject's dated results."""

    def __init__(self, scenario: Scenario, log: Trajectory, state: FinalState) -> None:
        super().__init__(scenario, log, state)
        self.matching = match_writes_v4(scenario, state.current())
        self.by_code = values_by_code(state.record_values)
        self._known: dict[str, Known | None] = {}
        self._read: dict[int, TurnClaims | None] = {}
        self._reliability: Reliability | None = None

    def known_of(self, subject: str) -> Known | None:
        if subject not in self._known:
            values = known_by(self.by_code.get(subject, []), self.scenario.now)
            facts = self.fact_values.get(subject, [])
            is_lab = subject.startswith(LABITEMS) and (subject in self.by_code
                                                        or bool(self.state.record_values))
            self._known[subject] = Known(values, facts, subject) if values or facts or is_lab else None
        return self._known[subject]

    def read(self, index: int) -> TurnClaims | None:
        """The turn's answer read and its result claims verified, once (the session's reliability reads every
        turn before any is scored); None for a turn the assistant never reached."""
        if index not in self._read:
            self._read[index] = _read_turn(self, index)
        return self._read[index]

    def reliability(self) -> Reliability:
        if self._reliability is None:
            self._reliability = reliability({i: r.verified for i in range(len(self.scenario.turns))
                                             if (r := self.read(i)) is not None})
        return self._reliability


@dataclass(frozen=True)
class TurnClaims:
    """One answer's claims as the turn's checks and the session's reliability read them."""

    reading: AnswerReading
    claims: list[ResultClaim]  # with the turn's implicit subject
    conclusions: list[ConclusionClaim]  # in scope
    verified: list[Verified]


def _read_turn(view: SessionViewV4, index: int) -> TurnClaims | None:
    turn, turn_log = view.scenario.turns[index], view.log.turns.get(index)
    if turn_log is None or turn_log.doctor is None:
        return None
    question = turn_log.doctor.text
    concludes = _concludes(turn)
    reading = read_answer(turn_log.answer_text, view.names, question if concludes else None)
    bases = implicit_subject([c.base for c in reading.claims], turn.facts)
    claims = [c if b is c.base else replace(c, base=b) for c, b in zip(reading.claims, bases, strict=True)]
    found = reading.conclusions
    if concludes:
        found = extra_verdicts(reading.norm, question, found, named_in(reading.norm, view.names),
                               clauses(reading.norm))
    verified = _verified(claims, view, list(dict.fromkeys(subject_of(f) for f in turn.facts)))
    return TurnClaims(reading, claims, in_scope(found, reading.norm), verified)


def _verified(claims: list[ResultClaim], view: SessionViewV4, asked: list[str]) -> list[Verified]:
    """Each result claim verified; a number naming nothing is a true result of an asked subject when one of
    them has it (a series written on its own line), else unsupported."""
    out = []
    for c in claims:
        if not c.is_result or (c.subject or "").startswith("drug:"):
            continue
        if c.subject is None:
            found = next((v for key in asked if (k := view.known_of(key)) is not None
                          and (v := verify(ResultClaim(replace(c.base, subject=key), c.kind, c.qualifier,
                                                       c.month_day), k)).verdict == "true"), None)
            out.append(found or Verified(c, "unsupported", f"{c.base.cited.text}: names nothing"))
            continue
        known = view.known_of(c.subject)
        if known is not None:
            out.append(verify(c, known))
    return out


def _asks(ctx: CheckContext, view: SessionViewV4, question: str) -> list[Asked]:
    out = []
    for item in ctx.turn.rubric:
        if item.kind == "conclusion":
            expected = str(item.params.get("expected", "")).lower()
            out.append(asked(verdict_alias(expected) or expected, ctx.turn, question, view.names))
    for fact in ctx.turn.facts:
        if fact.kind in ("trend", "decision") and (a := asked_of_fact(fact, ctx.turn, question, view.names)):
            out.append(a)
    return out


def _wrong_conclusions(found: list[ConclusionClaim], asks: list[Asked]) -> list[str]:
    contradicts = lexicon()["contradicts"]
    return list(dict.fromkeys(f"{c.label} ({c.cue})" for a in asks for c in found
                              if a.about(c) and c.label in contradicts.get(a.expected, [])))


@dataclass(frozen=True)
class Reading:
    """The turn's answer as v4 read it, what its own checks look at beside the context and the view."""

    verified: list[Verified]
    claims: list[ResultClaim]
    parsed: ParsedAnswer
    norm: str
    text: str
    times: dict[int, frozenset[tuple[int, int]]]  # the time of day written beside each claim, by its start


def _numeric(fact: Fact) -> bool:
    return isinstance(fact.value, int | float) and not isinstance(fact.value, bool)


def _fact_cited(item: RubricItem, ctx: CheckContext, view: SessionViewV4, r: Reading) -> CheckResult:
    """v3's fact check with v4's reading of results, counts and presence, grounded where what the answer
    says was read (a numeric fact on the very results its true claims state)."""

    def own(fact: Fact) -> tuple[bool, str] | None:
        if _numeric(fact) and fact.kind in NUMERIC_KINDS:
            return numeric_fact(fact, r.verified)
        if _numeric(fact) and fact.kind == "count":
            return count_fact(fact, r.claims, r.norm, view.names.get(subject_of(fact), []))
        if fact.kind == "absent" or isinstance(fact.value, bool):
            return presence_fact(r.text, fact)
        return None

    def grounding(fact: Fact) -> CheckResult | None:
        numeric = _numeric(fact) and fact.kind in NUMERIC_KINDS
        stated = _stated(fact, r.verified, view, r.times) if numeric else None
        return grounded(fact, ctx.session, ctx.log, stated)

    return fact_cited(item, ctx, view, r.text, r.parsed, grounding, own)


# The kinds v4 reads its own way (every other kind by its registered check: turn_parts.py `check_item`)
OWN_CHECKS: dict[str, Callable[[RubricItem, CheckContext, SessionViewV4, Reading], CheckResult]] = {
    "fact_cited": _fact_cited,
    "conclusion": lambda item, ctx, view, r: conclusion(item, ctx, view, r.parsed),
    "write_made": write_matched,
    "asked_patient": lambda item, ctx, view, r: asked_patient(item, ctx, with_clinical_terms),
}



def _stated(fact: Fact, verified: list[Verified], view: SessionViewV4,
            times: dict[int, frozenset[tuple[int, int]]]) -> set[str] | None:
    """The results the true claims meeting a numeric fact state (grounding.py `stated_by`; `times`: the time
    of day written beside each claim, by where it starts); None when one of them does not single one out."""
    key = subject_of(fact)
    about = [v for v in verified if v.claim.subject == key and v.claim.is_result]
    unqualified = {v.claim.value for v in about if v.claim.qualifier is None}
    known = view.known_of(key)
    out: set[str] = set()
    for v in about:
        if v.verdict == "true" and answers(fact, v.claim, unqualified) and matches(
                v.claim, float(fact.value), fact.unit, analyte_of(fact.code, None)):  # type: ignore[arg-type]
            refs = stated_by(v.claim, known.values if known is not None else [],
                             times.get(v.claim.base.cited.start, frozenset()))
            if refs is None:
                return None
            out |= refs
    return out or None


def _rests_on(item: RubricItem, ctx: CheckContext, result: CheckResult) -> CheckResult:
    """A passing conclusion, write or mention still fails when what it rests on never reached the
    assistant (grounding.py `rests_on`)."""
    ground = rests_on(item.kind, None, ctx.turn, ctx.scenario.turns[:ctx.turn.index], ctx.session, ctx.log)
    if ground is None or ground.passed:
        return result
    return CheckResult(False, f"{result.evidence}; {ground.evidence}")


def _asked_value(v: Verified, facts: list[Fact]) -> bool:
    """Does a true claim state a value the turn asks (never an extra)?"""
    return any(subject_of(f) == v.claim.subject and isinstance(f.value, int | float)
               and not isinstance(f.value, bool)
               and matches(v.claim, float(f.value), f.unit, analyte_of(f.code, None)) for f in facts)


def _concludes(turn: Turn) -> bool:
    return any(i.kind == "conclusion" for i in turn.rubric) or any(
        f.kind in ("trend", "decision") for f in turn.facts)


def score_turn_v4(scenario: Scenario, index: int, log: Trajectory, state: FinalState, language: str,
                  view: SessionViewV4, judge=None) -> TurnScore:
    """The turn by its own checks, then × the session's reliability (reliability.py `trusted`)."""
    scored = _score_turn(scenario, index, log, state, language, view, judge)
    return trusted(scored, view.reliability()) if scored.reached else scored


def _score_turn(scenario: Scenario, index: int, log: Trajectory, state: FinalState, language: str,
                view: SessionViewV4, judge=None) -> TurnScore:
    turn = scenario.turns[index]
    turn_log = log.turns.get(index)
    if turn_log is None or turn_log.doctor is None:
        return TurnScore(index=index, score=0.0, task_type=turn.task_type, reached=False)
    ctx = CheckContext(scenario, turn, turn_log, log, state, language)
    question = turn_log.doctor.text
    turn_claims = view.read(index)
    assert turn_claims is not None  # the turn was reached
    reading, claims, verified = turn_claims.reading, turn_claims.claims, turn_claims.verified
    conclusions = turn_claims.conclusions
    parsed = ParsedAnswer([c.base for c in claims], conclusions)
    starts = [c.base.cited.start for c in claims] + [len(reading.norm)]
    times = {c.base.cited.start: written_times(reading.norm, reading.spans, c.base.cited.start
                                               + len(c.base.cited.text), starts[i + 1])
             for i, c in enumerate(claims)}
    read = Reading(verified, claims, parsed, reading.norm, reading.text, times)

    def judge_one(item: RubricItem) -> CheckResult | None:
        result = judge_item(item, ctx, judge, OWN_CHECKS, view, read)
        if result is not None and result.passed and item.kind != "fact_cited":
            result = _rests_on(item, ctx, result)
        return result

    judged = judge_rubric(ctx, judge, judge_one, measures=True)
    gates = judged.gates + _gates(ctx, claims, view, judged.rubric_gates, reading.norm)
    asked_ids = {id(v) for v in verified if v.verdict == "true" and _asked_value(v, turn.facts)}
    prec = precision(verified, asked_ids, _wrong_conclusions(conclusions, _asks(ctx, view, question)), turn,
                     scenario.family, judged.rule, len(turn_log.answer_text))
    return scored_turn(index, turn, turn_log, judged, gates, prec, view.names)

def score_turns(scenario: Scenario, log: Trajectory, state: FinalState, language: str,
                judge=None) -> list[TurnScore]:
    """Every turn of the scenario over one SessionViewV4 (the shape of every version: versions.py)."""
    view = SessionViewV4(scenario, log, state)
    return [score_turn_v4(scenario, i, log, state, language, view, judge) for i in range(len(scenario.turns))]

def _gates(ctx: CheckContext, claims: list[ResultClaim], view: SessionViewV4,
           rubric: dict[str, RubricItem], norm: str) -> list[Check]:
    allowed = {w.resource_type for w in ctx.turn.writes} | alternative_types(ctx.turn)
    for item in ctx.turn.rubric:
        if item.kind == "no_unexpected_write":
            allowed |= set(item.params.get("allowed") or [])
    writes = write_gates(ctx, allowed, companion_refs(ctx.turn, ctx.state.current()))
    leak = future_gate(claims, view.by_code, ctx.now, view.fact_values, norm)
    return gate_checks(ctx, rubric, writes, leak)
