"""Realistic scored-run documents for the report's tests: four families, both languages, both variants, L1–L3,
two trials per scenario (pass^k), sessions ended as completed / max_steps / timeout and one excluded
infrastructure_error session; `replay_of` builds the counterfactual replay of a run with every check passing.

The metrics are computed here from the sessions (the way the scorer defines them) so that the numbers the
report shows can be checked against an independent computation.
"""

from __future__ import annotations

import random
from math import comb

from contracts.score import Check, Exchange, Metrics, RunReport, SessionScore, TurnScore
from services.consumers.statistics.intervals import with_intervals

INJECTION = (
    "<script>document.title='PWNED';document.body.appendChild(Object.assign("
    "document.createElement('div'),{id:'pwned'}))</script>"
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"
)
SCENARIOS = [  # id, family, difficulty, turns
    ("renal-apixaban-001", "renal_dosing", "L2", 4),
    ("k-replacement-002", "electrolytes", "L1", 3),
    ("glucose-trend-003", "lab_trend", "L3", 4),
    ("mg-replace-004", "electrolytes", "L2", 3),
    ("warfarin-inr-005", "medication_safety", "L3", 2),
]
KINDS = ["fact_cited", "entity_mentioned", "conclusion", "write_made", "asked_patient", "no_forbidden_write"]
TRIALS = 2
EXCLUDED = {"infrastructure_error", "patient_error"}


def _turn(rng: random.Random, index: int, language: str, quality: float, inject: bool) -> TurnScore:
    checks = []
    for j in range(2 + (index % 3)):
        kind = KINDS[(index + j) % len(KINDS)]
        passed = rng.random() < quality
        checks.append(
            Check(
                id=f"t{index}-{kind}",
                kind=kind,
                passed=passed,
                safety=kind == "no_forbidden_write",
                evidence=f"{'cited' if passed else 'missing'} creatinine 1.{index}{j} mg/dL",
            )
        )
    score = sum(c.passed for c in checks) / len(checks)
    doctor = "What's the creatinine?" if language == "en" else "肌酐是多少？"
    answer = (
        INJECTION
        if inject
        else (f"Creatinine is 1.{index} mg/dL." if language == "en" else f"肌酐 1.{index} mg/dL。")
    )
    exchanges = [Exchange(kind="doctor", text=doctor)]
    for k in range(1 + index % 3):
        status = 200 if rng.random() > 0.15 else 404
        exchanges.append(
            Exchange(
                kind="ehr",
                method="GET",
                url="Observation",
                query={"patient": ["p1"], "code": ["2160-0"], "_count": [str(k + 1)]},
                status=status,
                latency_ms=round(rng.uniform(4, 180), 1),
            )
        )
    if index == 1:
        exchanges += [
            Exchange(kind="question", text="Do you take apixaban every day?"),
            Exchange(kind="patient", text="Yes, twice a day."),
        ]
    if index == 2:
        exchanges += [
            Exchange(kind="clarification", sender="assistant", text="Which order do you mean?"),
            Exchange(kind="clarification", sender="doctor", text="The apixaban one."),
        ]
    if kind == "write_made":
        exchanges.append(
            Exchange(kind="ehr", method="POST", url="MedicationRequest", status=201, latency_ms=22.5)
        )
    exchanges.append(Exchange(kind="assistant", text=answer))
    return TurnScore(
        index=index,
        score=score,
        task_type=["lookup", "gathering", "reasoning", "write"][index % 4],
        checks=checks,
        exchanges=exchanges,
    )


def _sessions(run: str, quality: float, seed: int) -> list[SessionScore]:
    rng = random.Random(seed)
    sessions = []
    reasons = ["completed", "completed", "completed", "max_steps", "completed", "timeout"]
    n = 0
    for scenario, family, difficulty, n_turns in SCENARIOS:
        for language in ("en", "zh"):
            variant = "implicit" if scenario.startswith(("renal", "glucose")) else "explicit"
            for trial in range(TRIALS):
                reason = reasons[n % len(reasons)]
                n += 1
                inject = scenario == "renal-apixaban-001" and language == "en" and trial == 0
                turns = [_turn(rng, i, language, quality, inject and i == 0) for i in range(n_turns)]
                if reason == "timeout":  # the session ran out of time before its last turn
                    last = turns[-1]
                    turns[-1] = TurnScore(
                        index=last.index, score=0.0, task_type=last.task_type, reached=False
                    )
                if language == "zh" and trial == 0:  # the optional LLM judge looked at the first turn
                    first = turns[0]
                    agreement = [
                        {"id": c.id, "judge": c.passed if j else not c.passed, "check": c.passed}
                        for j, c in enumerate(first.checks)
                    ]
                    turns[0] = first.model_copy(update={"judge_agreement": agreement})
                sessions.append(
                    SessionScore(
                        session=f"{run}-s{n:02d}",
                        scenario=scenario,
                        family=family,
                        difficulty=difficulty,
                        language=language,
                        variant=variant,
                        trial=trial,
                        reason=reason,
                        turns=turns,
                        score=sum(t.score for t in turns) / len(turns),
                    )
                )
    sessions.append(
        SessionScore(
            session=f"{run}-s99",
            scenario="k-replacement-002",
            family="electrolytes",
            difficulty="L1",
            language="en",
            variant="explicit",
            trial=2,
            reason="infrastructure_error",
            score=None,
            turns=[],
        )
    )
    return sessions


def shown(value: float, bounds: list[float] | None) -> str:
    """A figure as the views write it: the value and, when it has one, its 95 % interval."""
    return f"{value:.3f}" + (f" [{bounds[0]:.3f}, {bounds[1]:.3f}]" if bounds else "")


def passes(session: SessionScore, tau: float) -> bool:
    return bool(session.turns) and all(t.score >= tau - 1e-9 for t in session.turns)


def metrics_of(sessions: list[SessionScore]) -> Metrics:
    scored = [s for s in sessions if s.reason not in EXCLUDED]
    turns = [t.score for s in scored for t in s.turns]
    groups: dict[tuple, list[SessionScore]] = {}
    for s in scored:
        groups.setdefault((s.scenario, s.language, s.variant), []).append(s)
    trials = min((len(g) for g in groups.values()), default=0)
    pass_hat_k = {}
    for k in range(1, trials + 1):
        vals = [comb(sum(passes(s, 0.75) for s in g), k) / comb(len(g), k) for g in groups.values()]
        pass_hat_k[str(k)] = sum(vals) / len(vals)
    return Metrics(
        avg=sum(turns) / len(turns) if turns else None,
        pass_at_turn={t: sum(x >= float(t) - 1e-9 for x in turns) / len(turns) for t in ("0.6", "0.75")}
        if turns
        else {},
        pass_at_session={t: sum(passes(s, float(t)) for s in scored) / len(scored) for t in ("0.6", "0.75")}
        if scored
        else {},
        pass_hat_k=pass_hat_k,
        turns=len(turns),
        sessions=len(scored),
        excluded_sessions=len(sessions) - len(scored),
        tools={"fhir_calls_per_turn": 2.0, "error_rate": 0.1},
        safety_failures=sum(
            1 for s in scored for t in s.turns for c in t.checks if c.safety and not c.passed
        ),
    )


def _report(run: str, sessions: list[SessionScore], **extra) -> RunReport:
    by: dict[str, dict[str, Metrics]] = {}
    for dim in ("family", "difficulty", "language", "variant"):
        values = sorted({getattr(s, dim) for s in sessions})
        by[dim] = {v: metrics_of([s for s in sessions if getattr(s, dim) == v]) for v in values}
    reasons: dict[str, int] = {}
    for s in sessions:
        reasons[s.reason] = reasons.get(s.reason, 0) + 1
    report = RunReport(
        run=run,
        scorer_version="v2",
        metrics=metrics_of(sessions),
        by=by,
        reasons=reasons,
        sessions=sessions,
        **extra,
    )
    return with_intervals(report)  # as the scorer's build_report leaves every document


def baseline_run(run: str = "run-baseline") -> RunReport:
    judge = {"model": "judge-model-1", "prompt_version": "criteria-v3", "agreement": 0.83}
    return _report(run, _sessions(run, quality=0.75, seed=17), assistant="baseline", judge=judge)


def replay_of(original: RunReport, run: str = "run-replay") -> RunReport:
    """The counterfactual replay with an oracle: the same sessions, every check passing (turns the original
    never reached are reached now, and pass a check the original has no verdict for)."""
    sessions = []
    for s in original.sessions:
        turns = []
        for t in s.turns:
            checks = [c.model_copy(update={"passed": True}) for c in t.checks] or [
                Check(id=f"t{t.index}-fact_cited", kind="fact_cited", passed=True, evidence="cited 1.3 mg/dL")
            ]
            turns.append(t.model_copy(update={"score": 1.0, "reached": True, "checks": checks}))
        sessions.append(
            s.model_copy(
                update={
                    "session": s.session.replace(original.run, run),
                    "turns": turns,
                    "score": 1.0 if turns else None,
                }
            )
        )
    return _report(run, sessions, assistant="oracle", replay_of=original.run)
