"""The paired comparison of two runs: its false-positive rate at no true difference, its interval's coverage
of a known difference, McNemar's test, and the comparison of two real documents (matching, unpaired
sessions, the verdict in words)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from contracts.score import RunReport
from services.consumers.statistics import paired
from services.consumers.statistics.clustered import estimate
from services.consumers.statistics.paired import compare_paired, difference, mcnemar, sign_flip_p
from tests.consumers.report.sample import baseline_run, replay_of
from tests.consumers.statistics.simulate import TURNS, Design, truth, turn_scores

REPS = 1000


def paired_runs(design: Design, shift: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two runs of the same scenarios (shared scenario effects), B's logit moved by `shift`: each a (reps,
    scenarios, sessions, TURNS) array of turn scores."""
    rng = np.random.default_rng(seed)
    effect = rng.normal(0, design.scenario_sd, (REPS, design.scenarios))
    return turn_scores(design, REPS, rng, effect), turn_scores(design, REPS, rng, effect, shift)


def rejections_and_coverage(design: Design, shift: float, seed: int, flips: int) -> tuple[float, float]:
    a, b = paired_runs(design, shift, seed)
    true = truth(design, shift)["avg"] - truth(design)["avg"]
    clusters = np.repeat(np.arange(design.scenarios), design.per_scenario)
    diffs = (b - a).sum(-1)  # per session: Σ over its turns of B − A
    counts = np.full(len(clusters), float(TURNS))
    rejected = covered = 0
    for r in range(REPS):
        d = difference(diffs[r].ravel(), counts, clusters, flips=flips)
        rejected += d.p_value < 0.05
        covered += d.lo <= true <= d.hi
    return rejected / REPS, covered / REPS


@pytest.mark.parametrize(("design", "flips"), [(Design(scenarios=12), 0), (Design(scenarios=30), 2000)],
                         ids=["12 scenarios, every sign pattern", "30 scenarios, 2,000 random flips"])
def test_no_true_difference_is_called_significant_at_most_5_percent_of_the_time(design, flips):
    false_positive, covered = rejections_and_coverage(design, 0.0, seed=5, flips=flips)
    assert false_positive <= 0.05, false_positive
    assert 0.93 <= covered <= 0.97, covered


def test_a_real_difference_is_found_and_its_interval_covers_it():
    found, covered = rejections_and_coverage(Design(), 0.3, seed=6, flips=2000)  # Avg +0.05
    assert found > 0.9, found
    assert 0.93 <= covered <= 0.97, covered


def test_sign_flip_is_exact_for_few_scenarios_and_seeded_for_many():
    y = np.array([1.0, 2.0, 3.0])  # every pattern with |Σ| ≥ 6: all + and all −
    assert sign_flip_p(y) == pytest.approx(2 / 8)
    many = np.linspace(0.1, 1.0, 40)
    assert sign_flip_p(many) == sign_flip_p(many)  # the fixed seed
    assert sign_flip_p(many) < 1e-3 and sign_flip_p(np.array([])) == 1.0


def test_beyond_400_scenarios_the_flips_normal_limit_agrees_with_drawing_them(monkeypatch):
    rng = np.random.default_rng(2)
    samples = [rng.normal(shift, 1, 400) for shift in (0.0, 0.08, 0.15)]
    drawn = [sign_flip_p(y) for y in samples]
    monkeypatch.setattr(paired, "DRAWN_UP_TO", 0)
    for y, p in zip(samples, drawn, strict=True):
        assert sign_flip_p(y) == pytest.approx(p, abs=0.01)
    assert sign_flip_p(np.zeros(500)) == 1.0


def test_mcnemar_exact():
    assert mcnemar(0, 0).p_value == 1.0
    assert mcnemar(3, 3).p_value == 1.0
    assert mcnemar(0, 17).p_value == pytest.approx(2 / 2**17)
    assert mcnemar(2, 10).p_value == pytest.approx(2 * sum(math.comb(12, i) for i in range(3)) / 2**12)
    big = mcnemar(500, 620)  # normal approximation with continuity correction beyond 1,000
    assert big.p_value == pytest.approx(math.erfc((120 - 1) / math.sqrt(1120) / math.sqrt(2)), rel=1e-9)


def test_two_documents_are_paired_and_the_unpaired_listed():
    base = baseline_run()
    replay = replay_of(base)
    dropped = replay.model_copy(update={"sessions": replay.sessions[1:]})  # one session only in A
    paired = compare_paired(base, dropped)
    reasons = dict(paired.unmatched)
    first = base.sessions[0]
    label = f"{first.scenario} #{first.trial} ({first.language} {first.variant})"
    assert reasons[label] == "only in run-baseline"
    assert any(why.startswith("not scored (run-baseline: infrastructure_error") for why in reasons.values())
    assert paired.matched == len(base.sessions) - len(paired.unmatched)
    turns = [(t.score, 1.0) for s in base.sessions[1:] if s.score is not None for t in s.turns]
    assert paired.avg.value == pytest.approx(sum(b - a for a, b in turns) / len(turns))
    assert paired.mcnemar.a_only == 0 and paired.mcnemar.b_only > 0
    # 5 scenarios: flipping whole scenarios cannot reach p < 0.05, and the verdict says so
    assert paired.verdict().startswith("too few scenarios (5) to test at 95 %")


def _run(name: str, scores: np.ndarray) -> RunReport:
    """A document from turn scores (scenarios, sessions, TURNS): each scenario's sessions as trials."""
    base = baseline_run()
    template = next(s for s in base.sessions if s.score is not None and len(s.turns) >= 1)
    sessions = []
    for c, per in enumerate(scores):
        for i, turns in enumerate(per):
            ts = [template.turns[0].model_copy(update={"index": j, "score": float(v)})
                  for j, v in enumerate(turns)]
            sessions.append(template.model_copy(update={
                "session": f"{name}-{c}-{i}", "scenario": f"sc-{c}", "trial": i, "turns": ts,
                "score": float(np.mean(turns)), "reason": "completed"}))
    return base.model_copy(update={"run": name, "sessions": sessions})


def test_the_verdict_in_words():
    design = Design(scenarios=20, per_scenario=2)
    a, b = paired_runs(design, 1.0, seed=9)
    better = compare_paired(_run("A", a[0]), _run("B", b[0]))
    assert better.verdict().startswith("B beats A at 95 %") and better.avg.lo > 0
    worse = compare_paired(_run("B", b[0]), _run("A", a[0]))
    assert worse.verdict().startswith("B beats A at 95 %") and worse.avg.hi < 0
    same = compare_paired(_run("A", a[0]), _run("A2", a[0]))
    assert same.verdict().startswith("no significant difference at 95 %") and same.avg.p_value == 1.0


def test_an_interval_needs_two_scenarios():
    assert math.isnan(estimate(np.array([3.0]), np.array([4.0])).lo)
