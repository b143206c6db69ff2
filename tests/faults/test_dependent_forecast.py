"""Runs that depend on each other, through validate's own path
(``store_and_judge`` on a real results store): a run right behind the level's
runs is judged against the AR(1) forecast from the newest of them, and the
single-run verdicts spend their share of one false-alarm budget with the
spread test and the sustained rule (docs/judging.md, "Runs that depend on
each other", "One false-alarm budget for every rule")."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .test_dependent_noise import _judge, _site
from .test_dependent_wander import _ar_runs


def test_a_step_under_wandering_noise_is_called_on_its_first_run(tmp_path: Path):
    """AR(1) 0.5 (the bench's ``ar0.5``), 30 runs, then a run 10 % lower.
    Before: `inconclusive` (p 0.18 against the mean of the last five runs with
    a variance never below the independent runs'), held. After: judged
    against the forecast ``mu + rho (y_prev - mu)`` it is `regressed`."""
    site = _site(tmp_path)
    runs = _ar_runs(28, 0.5)
    history = [next(runs) for _ in range(30)]
    for x in history:
        _judge(site, x)
    _, outcome, detail = _judge(site, next(runs) * 0.9)
    assert outcome == "regressed", detail["note"]
    assert detail["p_value"] < 0.035  # the single-run level: 0.7 alpha
    # the level it was judged against is the forecast, between the window's
    # mean and the newest run (rho in 0 .. 0.9)
    logs = [math.log(float(np.median(x))) for x in history]
    level = math.log(detail["baseline_median"])
    assert min(logs[-1], np.mean(logs)) - 0.02 <= level <= max(logs[-1], np.mean(logs)) + 0.02
    assert abs(level - float(np.mean(logs[-5:]))) > 1e-6  # not the last five runs' mean


def test_a_run_at_p_0_037_is_not_called_on_its_own(tmp_path: Path):
    """Independent runs (between 5 %, within 3 %), 30 runs, then one 8.2 %
    below the level at p = 0.037. Before: `regressed` (the single-run test
    spent the whole 5 %, and the spread test and the sustained rule came on
    top of it). After: the single-run test has 0.7 of the budget (3.5 %): the
    run is `inconclusive` with what would resolve it."""
    site = _site(tmp_path)
    rng = np.random.default_rng(7)
    for _ in range(30):
        _judge(site, 100 * np.exp(rng.normal(0, 0.05) + rng.normal(0, 0.03, 5)))
    _, outcome, detail = _judge(site, 90 * np.exp(rng.normal(0, 0.03, 5)))
    assert 0.035 < detail["p_value"] < 0.05
    assert outcome == "inconclusive", detail["note"]
    assert detail["note"].startswith("worse by 8.2% but within the noise (p=0.037)")
