"""The paired comparison of two runs of the same scenarios: is B better than A, at 95 %?

Sessions are matched on (scenario, trial, language, variant), turns on their index. The difference of Avg is
the mean of B − A over the matched turns, clustered by scenario (a scenario's turns share it in both runs);
its p-value is a sign-flip permutation test on whole scenarios (under "no difference" A and B are
exchangeable within a scenario, so each scenario's summed difference is as likely negative as positive): exact
over all 2^C flips up to 16 scenarios, 20,000 seeded flips up to 400, and beyond that the normal
limit of the flips' distribution (variance Σ y_c²), which 400 scenarios already reach. Pass@Session(0.75)
gets the same paired difference and McNemar's exact test on the discordant sessions. Sessions in one run
only, or excluded in either, are listed, never dropped in silence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from contracts.end_reasons import NOT_ASSISTANT_FAULT
from contracts.score import RunReport, SessionScore
from services.consumers.statistics.clustered import LEVEL, cluster_sums, ratio_variance, t_quantile
from services.consumers.statistics.intervals import SUCCESS, passes

EXACT_UP_TO = 16  # scenarios: 2^16 = 65,536 sign patterns, all of them
FLIPS = 20_000
CHUNK = 500  # flips drawn at once
DRAWN_UP_TO = 400  # scenarios; beyond, the flips' distribution is its normal limit (exact to ~1e-3 there)
SEED = 39
Key = tuple[str, int, str, str]


@dataclass(frozen=True)
class Difference:
    """B − A with its clustered interval and the permutation p-value."""

    value: float
    lo: float
    hi: float
    p_value: float
    n_clusters: int
    n_units: int


@dataclass(frozen=True)
class McNemar:
    a_only: int  # sessions that pass in A and fail in B
    b_only: int  # fail in A, pass in B
    p_value: float


@dataclass(frozen=True)
class Paired:
    before_run: str
    after_run: str
    matched: int
    avg: Difference | None
    pass_at_session: Difference | None
    mcnemar: McNemar
    unmatched: list[tuple[str, str]] = field(default_factory=list)  # (session label, why)

    def verdict(self) -> str:
        """In words, on the Avg difference at 95 %."""
        d = self.avg
        if d is None:
            return f"no matched turns between {self.before_run} and {self.after_run}: nothing to compare"
        if d.n_clusters <= EXACT_UP_TO and 2 / 2**d.n_clusters > 1 - LEVEL:
            return (f"too few scenarios ({d.n_clusters}) to test at 95 %: flipping whole scenarios "
                    "cannot give "
                    f"p below {2 / 2**d.n_clusters:.3g}; Avg Δ {d.value:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}]")
        if d.p_value < 1 - LEVEL:
            better, worse = (self.after_run, self.before_run) if d.value > 0 else (self.before_run,
                                                                                   self.after_run)
            return (f"{better} beats {worse} at 95 %: Avg Δ {d.value:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}], "
                    f"p = {d.p_value:.3g} ({d.n_clusters} scenarios)")
        return (f"no significant difference at 95 % between {self.after_run} and {self.before_run}: "
                f"Avg Δ {d.value:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}], p = {d.p_value:.3g} "
                f"({d.n_clusters} scenarios)")


def key(session: SessionScore) -> Key:
    return (session.scenario, session.trial, session.language or "", session.variant or "")


def label(k: Key) -> str:
    scenario, trial, language, variant = k
    extra = " ".join(x for x in (language, variant) if x)
    return f"{scenario} #{trial}" + (f" ({extra})" if extra else "")


def _scored(session: SessionScore) -> bool:
    return session.score is not None and session.reason not in NOT_ASSISTANT_FAULT


def sign_flip_p(y: np.ndarray, seed: int = SEED, flips: int = FLIPS) -> float:
    """Two-sided p of Σ y under random signs per cluster (exact when there are few clusters)."""
    c = len(y)
    if c == 0:
        return 1.0
    observed = abs(float(y.sum())) - 1e-12 * max(1.0, float(np.abs(y).sum()))
    if c <= EXACT_UP_TO:
        patterns = ((np.arange(2**c)[:, None] >> np.arange(c)) & 1) * 2 - 1
        return float(np.mean(np.abs(patterns @ y) >= observed))
    if c > DRAWN_UP_TO:  # Σ s_c y_c over random signs: mean 0, variance Σ y_c², normal by Lindeberg's CLT
        spread = float(np.sqrt(y @ y))
        return 1.0 if spread == 0 else math.erfc(abs(float(y.sum())) / spread / math.sqrt(2))
    rng = np.random.default_rng(seed)
    total, at_least = float(y.sum()), 0
    for start in range(0, flips, CHUNK):  # bounded memory for thousands of scenarios
        bits = rng.integers(0, 2, size=(min(CHUNK, flips - start), c), dtype=np.uint8)
        flipped = 2 * (bits.astype(float) @ y) - total  # Σ s_c y_c with s = 2·bit − 1 (a BLAS product)
        at_least += int(np.sum(np.abs(flipped) >= observed))
    return (1 + at_least) / (flips + 1)


def difference(diffs: np.ndarray, counts: np.ndarray, clusters: np.ndarray,
               flips: int = FLIPS) -> Difference | None:
    """Mean paired difference Σd/Σm with a CR1 clustered t interval on C−1 df and the sign-flip p-value."""
    if diffs.size == 0 or counts.sum() <= 0:
        return None
    y, m = cluster_sums(diffs, counts, clusters)
    value, variance = ratio_variance(y, m)
    c = len(y)
    half = t_quantile(c - 1) * math.sqrt(variance) if c > 1 else math.nan
    return Difference(value, max(-1.0, value - half), min(1.0, value + half), sign_flip_p(y, flips=flips), c,
                      int(m.sum()))


def mcnemar(a_only: int, b_only: int) -> McNemar:
    """McNemar's exact test: under no difference each discordant session is A's or B's with probability ½."""
    n = a_only + b_only
    if n == 0:
        return McNemar(a_only, b_only, 1.0)
    low = min(a_only, b_only)
    if n <= 1000:
        tail = sum(math.comb(n, i) for i in range(low + 1)) / 2**n
    else:  # the normal approximation with continuity correction: exact sums of 2^n grow slow
        tail = 0.5 * math.erfc((abs(a_only - b_only) - 1) / math.sqrt(n) / math.sqrt(2))
    return McNemar(a_only, b_only, min(1.0, 2 * tail))


def compare_paired(before: RunReport, after: RunReport) -> Paired:
    """B (`after`) − A (`before`) on their matched, scored sessions."""
    def index(report: RunReport) -> dict[Key, SessionScore]:
        found: dict[Key, SessionScore] = {}
        for s in report.sessions:
            if s.superseded_by is None:
                found.setdefault(key(s), s)
        return found

    a, b = index(before), index(after)
    unmatched: list[tuple[str, str]] = []
    matched: list[tuple[SessionScore, SessionScore]] = []
    for k in list(a) + [k for k in b if k not in a]:
        sa, sb = a.get(k), b.get(k)
        if sa is None or sb is None:
            unmatched.append((label(k), f"only in {before.run if sb is None else after.run}"))
        elif not (_scored(sa) and _scored(sb)):
            why = "; ".join(f"{r.run}: {s.excluded or s.reason}" for r, s in ((before, sa), (after, sb))
                            if not _scored(s))
            unmatched.append((label(k), f"not scored ({why})"))
        else:
            matched.append((sa, sb))
    return Paired(before.run, after.run, len(matched), *_differences(matched), unmatched=unmatched)


def _differences(matched: Sequence[tuple[SessionScore, SessionScore]]
                 ) -> tuple[Difference | None, Difference | None, McNemar]:
    scenarios: dict[str, int] = {}
    clusters = np.array([scenarios.setdefault(sa.scenario, len(scenarios)) for sa, _ in matched],
                        dtype=np.int64)
    turn_diff, turn_count, pass_a, pass_b = [], [], [], []
    for sa, sb in matched:
        tb = {t.index: t.score for t in sb.turns}
        both = [(t.score, tb[t.index]) for t in sa.turns if t.index in tb]
        turn_diff.append(math.fsum(y - x for x, y in both))
        turn_count.append(len(both))
        pass_a.append(passes(sa, SUCCESS))
        pass_b.append(passes(sb, SUCCESS))
    pa, pb = np.array(pass_a, dtype=float), np.array(pass_b, dtype=float)
    avg = difference(np.array(turn_diff, dtype=float), np.array(turn_count, dtype=float), clusters)
    session = difference(pb - pa, np.ones(len(matched)), clusters)
    test = mcnemar(int(np.sum((pa == 1) & (pb == 0))), int(np.sum((pa == 0) & (pb == 1))))
    return avg, session, test
