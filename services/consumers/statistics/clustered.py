"""The clustered ratio estimator every Rounds figure is: a sum of values over a sum of counts (turn scores
over turns, passing sessions over sessions, pass^k over tasks), with scenarios as the clusters.

Variance: the cluster-robust (sandwich) variance of a ratio with the small-sample factor C/(C−1) ("CR1");
interval: Wilson's score interval at the effective sample size θ(1−θ)/V with Student's t on C−1 degrees of
freedom, so it stays inside [0, 1], is asymmetric near 0 and 1, and widens when there are few scenarios.
docs/statistics.md gives the reasons and the simulated coverage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

METHOD = "cluster-robust (CR1) variance by scenario, Wilson interval at the effective n, t on C-1 df"
LEVEL = 0.95
TINY = 1e-12


@dataclass(frozen=True)
class Estimate:
    value: float
    lo: float
    hi: float
    se: float
    n_clusters: int
    n_units: float  # the summed counts (turns, sessions or tasks)


def t_two_sided(t: float, df: int) -> float:
    """P(|T| ≤ t) for Student's t on a whole number of degrees of freedom: the closed form of Abramowitz and
    Stegun 26.7.3–4 (a finite series in cos θ, θ = atan(t/√df)), exact without scipy."""
    theta = math.atan(t / math.sqrt(df))
    cos2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:  # odd
        term, series = math.cos(theta), 0.0
        if df > 1:
            series = term
            for j in range(3, df - 1, 2):
                term *= cos2 * (j - 1) / j
                series += term
        return 2 / math.pi * (theta + s * series)
    term, series = 1.0, 1.0
    for j in range(2, df - 1, 2):
        term *= cos2 * (j - 1) / j
        series += term
    return s * series


@lru_cache(maxsize=512)
def t_quantile(df: int, level: float = LEVEL) -> float:
    """The t quantile of a two-sided `level` interval on `df` degrees of freedom (bisection on the exact
    distribution; the normal quantile beyond 1,000 df, where they agree to 1e-3)."""
    if df <= 0:
        return math.inf
    if df > 1000:
        return normal_quantile((1 + level) / 2)
    lo, hi = 0.0, 1.0
    while t_two_sided(hi, df) < level:
        hi *= 2
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_two_sided(mid, df) < level else (lo, mid)
    return (lo + hi) / 2


def normal_quantile(p: float) -> float:
    """Φ⁻¹(p) by Acklam's rational approximation refined by one Newton step (error < 1e-12)."""
    if not 0 < p < 1:
        raise ValueError(f"a probability strictly between 0 and 1 is needed, not {p}")
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
         -3.066479806614716e01, 2.506628277459239e00)
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
         -1.328068155288572e01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549671010615606e00,
         4.374664141464968e00, 2.938163982698783e00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    if p < 0.02425 or p > 1 - 0.02425:
        q = math.sqrt(-2 * math.log(min(p, 1 - p)))
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
        x = x if p < 0.5 else -x
    else:
        q = p - 0.5
        r = q * q
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    e = 0.5 * math.erfc(-x / math.sqrt(2)) - p
    return x - e * math.sqrt(2 * math.pi) * math.exp(x * x / 2)


def cluster_sums(values: np.ndarray, counts: np.ndarray,
                 clusters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Σ values, Σ counts) per cluster id, clusters with no count dropped."""
    size = int(clusters.max()) + 1 if clusters.size else 0
    y = np.bincount(clusters, weights=values, minlength=size)
    m = np.bincount(clusters, weights=counts, minlength=size)
    keep = m > 0
    return y[keep], m[keep]


def ratio_variance(y: np.ndarray, m: np.ndarray) -> tuple[float, float]:
    """(θ = Σy/Σm, CR1 variance of θ) from per-cluster sums: the linearised residuals y_c − θ m_c."""
    total = float(m.sum())
    theta = float(y.sum()) / total
    c = len(y)
    if c < 2:
        return theta, math.nan
    residuals = y - theta * m
    return theta, c / (c - 1) * float(residuals @ residuals) / total**2


def wilson(theta: float, n_eff: float, t: float) -> tuple[float, float]:
    """Wilson's score interval for a share θ at sample size n_eff with quantile t."""
    t2 = t * t
    centre = (theta + t2 / (2 * n_eff)) / (1 + t2 / n_eff)
    half = t / (1 + t2 / n_eff) * math.sqrt(theta * (1 - theta) / n_eff + t2 / (4 * n_eff**2))
    return max(0.0, centre - half), min(1.0, centre + half)


def estimate(y: np.ndarray, m: np.ndarray, level: float = LEVEL) -> Estimate | None:
    """The clustered estimate and interval of Σy/Σm from per-cluster sums (values in [0, 1] per unit).

    The effective sample size is θ(1−θ)/V: what a sample of independent Bernoulli units with the same
    variance would be. When V is 0 (every scenario alike, e.g. all passed) the data cannot tell how correlated
    a scenario's units are, and the number of scenarios is used: the cautious reading that they are one unit.
    One scenario gives no interval at all (NaN bounds): its spread is unknown."""
    if len(m) == 0 or float(m.sum()) <= 0:
        return None
    theta, variance = ratio_variance(y, m)
    c, n = len(m), float(m.sum())
    if math.isnan(variance):
        return Estimate(theta, math.nan, math.nan, math.nan, c, n)
    spread = theta * (1 - theta)
    # float rounding leaves ~1e-33 of variance where every scenario is alike: that is none
    n_eff = spread / variance if variance > TINY and spread > TINY else float(c)
    n_eff = max(n_eff, 1e-9)  # may exceed the units: a turn score averages several checks
    lo, hi = wilson(min(max(theta, 0.0), 1.0), n_eff, t_quantile(c - 1, level))
    return Estimate(theta, lo, hi, math.sqrt(variance), c, n)


def clustered(values: np.ndarray, counts: np.ndarray, clusters: np.ndarray,
              level: float = LEVEL) -> Estimate | None:
    """`estimate` over units: each unit's value sum, its count and its cluster id (0..C−1)."""
    if values.size == 0:
        return None
    y, m = cluster_sums(values, counts, clusters)
    return estimate(y, m, level)


def naive(values: np.ndarray, counts: np.ndarray, level: float = LEVEL) -> Estimate | None:
    """The same estimate with every unit its own cluster: what an analysis ignoring the scenarios reports."""
    return clustered(values, counts, np.arange(values.size), level)
