"""The clustered estimator's pieces: exact t quantiles, the interval at 0 % and 100 %, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from services.consumers.statistics.clustered import clustered, estimate, normal_quantile, t_quantile


@pytest.mark.parametrize(("df", "expected"), [(1, 12.7062), (2, 4.3027), (3, 3.1824), (10, 2.2281),
                                              (29, 2.0452), (100, 1.9840)])
def test_t_quantiles_are_the_tables(df, expected):
    assert t_quantile(df) == pytest.approx(expected, abs=1e-4)


def test_every_scenario_passing_gives_the_cautious_interval_not_a_point():
    """0.1 + 0.2 style rounding leaves ~1e-33 of variance; it must not read as certainty."""
    m = np.array([3.0] * 26)
    y = m - np.tile([8 * np.spacing(3.0), 0.0], 13)  # every turn 1.0 up to the last bits
    found = estimate(y, m)
    t2 = t_quantile(25) ** 2
    assert 0 < found.value < 1 and 0 < found.se < 1e-15  # the case: a rounding's worth of variance
    assert found.hi == pytest.approx(1.0)
    assert found.lo == pytest.approx(26 / (26 + t2), rel=1e-9)  # n_eff = the 26 scenarios
    none = estimate(np.zeros(26), m)
    assert none.lo == pytest.approx(0.0, abs=1e-12) and none.hi > 0.1


def test_clustered_sums_the_units_of_each_scenario():
    values, counts = np.array([1.0, 0.0, 1.0, 1.0]), np.ones(4)
    by_unit = clustered(values, counts, np.array([0, 0, 1, 1]))
    by_sum = estimate(np.array([1.0, 2.0]), np.array([2.0, 2.0]))
    assert (by_unit.lo, by_unit.hi, by_unit.n_clusters) == (by_sum.lo, by_sum.hi, 2)
    assert clustered(np.array([]), np.array([]), np.array([], dtype=np.int64)) is None


def test_a_probability_outside_0_1_is_an_error():
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        normal_quantile(1.0)
