"""The run-to-run spread test on runs that depend on each other
(``judging.changes.spread_growth`` with the runs' lag-1 correlation)."""

from __future__ import annotations

import numpy as np

from hpcval.history.judging.changes import spread_growth


def _borderline() -> tuple[list[float], list[float]]:
    """30 reference runs, then 12 whose newest 5 scatter about 2x: named as
    grown where runs are independent, at p just under 5 %."""
    rng = np.random.default_rng(23)
    ref = list(rng.normal(0, 0.05, 30))
    recent = ref[-7:] + list(rng.normal(0, 0.05, 7)) + [0.09, -0.08, 0.1, -0.09, 0.02]
    return recent, ref


def test_dependence_widens_the_spread_test():
    recent, ref = _borderline()
    alone = spread_growth(recent, ref, 0.05)
    assert alone is not None and alone["p"] < 0.05
    # AR(1) 0.8: the absolute deviations are correlated (about rho^2), the
    # test's t shrinks by sqrt((1 + 0.64) / (1 - 0.64)) and the growth is no
    # longer significant
    assert spread_growth(recent, ref, 0.05, rho=0.8) is None
    # rho 0 is the independent test
    assert spread_growth(recent, ref, 0.05, rho=0.0) == alone


def test_a_large_growth_is_named_under_dependence_too():
    rng = np.random.default_rng(12)
    ref = list(rng.normal(0, 0.05, 30))
    recent = ref[-7:] + [0.3 * (1 if i % 2 else -1) * (1 + 0.2 * rng.random())
                          for i in range(12)]
    found = spread_growth(recent, ref, 0.05, rho=0.8)
    assert found is not None and found["ratio"] > 3
