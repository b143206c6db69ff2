"""The sequential detector of sustained drops (Page's CUSUM on self-started
scores) on seeded series: run length between false flags and detection delay."""

from __future__ import annotations

import numpy as np

from hpcval.history.judging import cusum, cusum_run, cusum_scores
from hpcval.history.judging.changes import CUSUM_H


def first_alarm(values: np.ndarray, better: str = "higher") -> int | None:
    path = cusum(cusum_scores(values, better))
    return next((i for i, s in enumerate(path) if s > CUSUM_H), None)


def test_clean_runs_between_false_flags_are_at_least_100() -> None:
    rng = np.random.default_rng(1)
    series, runs = 60, 205
    alarms = [first_alarm(rng.normal(0, 0.07, runs)) for _ in range(series)]
    # average run length from censored first alarms: runs watched / alarms
    watched = sum((a if a is not None else runs - 5) for a in alarms)
    false = sum(a is not None for a in alarms)
    assert watched / max(false, 1) >= 100


def test_a_sustained_drop_of_1_4_sds_is_flagged_within_8_runs() -> None:
    rng = np.random.default_rng(2)
    hits = 0
    for _ in range(100):
        x = np.concatenate([rng.normal(0, 0.07, 15), rng.normal(np.log(0.9), 0.07, 8)])
        a = first_alarm(x)
        hits += a is not None and 10 <= a < 18  # scores start at run 5: run 15 is index 10
    assert hits >= 45


def test_a_sustained_drop_of_3_sds_is_flagged_within_3_runs() -> None:
    rng = np.random.default_rng(5)
    hits = 0
    for _ in range(100):
        x = np.concatenate([rng.normal(0, 0.07, 15), rng.normal(np.log(0.8), 0.07, 3)])
        a = first_alarm(x)
        hits += a is not None and 10 <= a < 13
    assert hits > 50  # measured 65 of 100 (h = 5)


def test_improvements_do_not_flag() -> None:
    rng = np.random.default_rng(3)
    up = np.concatenate([rng.normal(0, 0.05, 15), rng.normal(np.log(1.3), 0.05, 6)])
    assert first_alarm(up) is None


def test_a_family_moving_together_is_flagged_once() -> None:
    rng = np.random.default_rng(4)
    shared = np.concatenate([rng.normal(0, 0.07, 15), np.full(5, np.log(0.88))])
    figs = [(list(np.exp(shared + rng.normal(0, 0.01, shared.size))), "higher")
            for _ in range(3)]
    out = cusum_run({"bandwidth": figs, "latency": [(list(np.exp(rng.normal(0, 0.07, 20))),
                                                     "lower")]})
    assert list(out) == ["bandwidth"]
    score, runs = out["bandwidth"]
    assert score > CUSUM_H and 1 <= runs <= 6
