"""End to end on the embedded default: scripted sessions in the log, real sandbox writes, `score_run`."""

from __future__ import annotations

from services.consumers.scoring.api import score_run
from services.consumers.scoring.metrics import build_report
from services.consumers.scoring.scorer import SCORER_VERSION
from tests.consumers.scoring import world
from tests.consumers.scoring.conftest import World
from tests.wiring import root_on


def _play(w: World, run: str, style: str, language: str = "en", trial: int = 0,
          reason: str = "completed") -> str:
    session = w.session().start(w.scenario, run, trial=trial, language=language)
    if reason in ("completed",):
        world.play(session, w.scenario, style, language)
    session.end(reason, run=run)
    return session.id


def _score(w: World, run: str, **kw):
    return score_run(root_on(w.settings), run, bus=w.bus, topics=(w.sessions,), scores_topic=w.scores,
                     client=w.client,
                     timeout_s=120, **kw)


def _by_session(report) -> dict:
    return {s.session: s for s in report.sessions}


def test_oracle_nothing_wrong_dose_and_exclusions(scoring_world: World) -> None:
    w = scoring_world
    run = "run-a"
    oracle_en, oracle_zh = _play(w, run, "oracle"), _play(w, run, "oracle", "zh", trial=1)
    nothing, wrong = _play(w, run, "nothing", trial=2), _play(w, run, "wrong_dose", trial=3)
    leaky = _play(w, run, "leaky", trial=4)
    broken = _play(w, run, "oracle", trial=5, reason="infrastructure_error")
    _play(w, "other-run", "oracle")  # another run's session is not part of this report
    report = _score(w, run, scorer_version="2")  # version 2's rules (v3/test_v3.py: version 3)
    sessions = _by_session(report)
    assert set(sessions) == {oracle_en, oracle_zh, nothing, wrong, leaky, broken}
    for oracle in (oracle_en, oracle_zh):
        failed = [c.id for t in sessions[oracle].turns for c in t.checks if not c.passed]
        assert sessions[oracle].score >= 0.99, failed
    assert sessions[nothing].score == 0.0
    wrong_failed = {c.id for t in sessions[wrong].turns for c in t.checks if not c.passed}
    assert wrong_failed == {"t3-write"}  # exactly the write check
    assert "doseQuantity" in next(c.evidence for c in sessions[wrong].turns[3].checks if c.id == "t3-write")
    leaky_failed = {c.id for t in sessions[leaky].turns for c in t.checks if not c.passed}
    assert leaky_failed == {"t0-future"}
    assert sessions[broken].score is None and sessions[broken].turns == []
    m = report.metrics
    assert m.sessions == 5 and m.excluded_sessions == 1 and report.reasons == {"completed": 5,
                                                                             "infrastructure_error": 1}
    assert m.turns == 20
    # tasks are (scenario, language, variant). en: 4 trials, oracle and leaky (turn 0 at 0.8) succeed at 0.75;
    # zh: 1 trial, succeeds. pass^1 = mean(2/4, 1/1); pass^2 = C(2,2)/C(4,2) (only en has 2 trials)
    assert m.pass_hat_k == {"1": 0.75, "2": round(1 / 6, 6), "3": 0.0, "4": 0.0}
    assert m.tools["fhir_calls_per_turn"] > 0 and m.tools["error_rate"] == 0.0
    # the oracle-like session reads turn 0's types, turn 1's (what its trend rests on), writes turn 3's
    assert report.by["language"]["zh"].tools["types_needed_queried"] == 1.0
    assert m.tools["turn_latency_p50_ms"] >= 0
    assert m.tools["patient_questions_per_turn"] == 0.25 * 4 / 5  # oracle-like sessions ask on turn 2
    assert set(report.by["language"]) == {"en", "zh"} and report.by["language"]["zh"].avg >= 0.99
    assert set(report.by["task_type"]) == {"lookup", "reasoning", "gathering", "write"}


def test_rescoring_the_same_version_is_identical_and_versions_sit_side_by_side(scoring_world: World) -> None:
    w = scoring_world
    for trial, style in enumerate(["oracle", "wrong_dose", "nothing"]):
        _play(w, "run-b", style, trial=trial)
    first = _score(w, "run-b")
    again = _score(w, "run-b")
    assert first.model_dump() == again.model_dump()
    other = _score(w, "run-b", scorer_version="4-test")
    assert other.scorer_version == "4-test" and other.metrics.avg == first.metrics.avg
    from foundation.db import make_engine
    from services.consumers.scoring.api import load_report, versions

    engine = make_engine(w.settings.database_url)
    assert versions(engine, "run-b") == [SCORER_VERSION, "4-test"]
    stored = load_report(engine, "run-b", SCORER_VERSION)  # every document validated from the table
    assert stored.model_dump() == first.model_dump()  # score_run's: the scores it holds, by their documents
    assert stored.model_dump_json() == first.model_dump_json()
    engine.dispose()


def test_pass_hat_k_is_tau2_formula() -> None:
    from contracts.score import SessionScore, TurnScore

    def s(trial: int, score: float) -> SessionScore:
        return SessionScore(session=f"s{trial}", scenario="x", reason="completed", trial=trial, score=score,
                            language="en", variant="explicit", turns=[TurnScore(index=0, score=score)])

    report = build_report("r", "1", [s(0, 1.0), s(1, 1.0), s(2, 0.0), s(3, 0.5)])
    assert report.metrics.pass_hat_k == {"1": 0.5, "2": round(1 / 6, 6), "3": 0.0, "4": 0.0}
    assert report.metrics.pass_at_session == {"0.6": 0.5, "0.75": 0.5}
