"""Simulated runs with a known truth, for the statistics' tests: scenarios drawn from a population, each run
in `per_scenario` sessions (languages × variants × trials) that share the scenario's difficulty, each session
four turns of four checks. `rho`-like control: `scenario_sd` (how much scenarios differ, on the logit scale,
which is what makes a scenario's sessions correlated) and `session_sd` (how much its sessions differ).

Everything is numpy arrays over repetitions at once, so 1,000 seeded repetitions take well under a second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TURNS, CHECKS = 4, 4


@dataclass(frozen=True)
class Design:
    scenarios: int = 30
    per_scenario: int = 8  # e.g. 2 languages × 2 variants × 2 trials
    mean_logit: float = 0.8
    scenario_sd: float = 1.0
    session_sd: float = 0.5


def turn_scores(design: Design, reps: int, rng: np.random.Generator,
                scenario_effect: np.ndarray | None = None, shift: float = 0.0) -> np.ndarray:
    """Turn scores, shape (reps, scenarios, per_scenario, TURNS): each the share of CHECKS checks passed
    with the session's probability. `scenario_effect` (reps, scenarios) reuses scenarios (a paired run);
    `shift` moves the logit (a true difference)."""
    if scenario_effect is None:
        scenario_effect = rng.normal(0, design.scenario_sd, (reps, design.scenarios))
    session = rng.normal(0, design.session_sd, (reps, design.scenarios, design.per_scenario))
    logit = design.mean_logit + shift + scenario_effect[:, :, None] + session
    p = 1 / (1 + np.exp(-logit))
    return rng.binomial(CHECKS, np.repeat(p[..., None], TURNS, axis=-1)) / CHECKS


def truth(design: Design, shift: float = 0.0, draws: int = 400_000, seed: int = 0) -> dict[str, float]:
    """The population's Avg, Pass@Turn(0.75) and Pass@Session(0.75), by a large seeded draw."""
    rng = np.random.default_rng(seed)
    logit = (design.mean_logit + shift + rng.normal(0, design.scenario_sd, draws)
             + rng.normal(0, design.session_sd, draws))
    p = 1 / (1 + np.exp(-logit))
    # exact given p: E[score] = p; P(score ≥ .75) = P(Bin(4, p) ≥ 3); session passes when all 4 turns do
    turn_pass = 4 * p**3 * (1 - p) + p**4
    return {"avg": float(p.mean()), "pass_at_turn": float(turn_pass.mean()),
            "pass_at_session": float((turn_pass**TURNS).mean())}
