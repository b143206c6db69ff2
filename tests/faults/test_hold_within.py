"""A run as far from the level as accepted runs have been, through validate's
own path (``store_and_judge`` on a real results store): accepted, not held
(docs/judging.md, "Runs that depend on each other"); a run beyond every
accepted run is still held for a person."""

from __future__ import annotations

import numpy as np

from hpcval.history.store import Store

from .test_dependent_noise import _judge, _site


def _loaded_history(site) -> list[float]:
    """30 accepted runs of a bandwidth whose level a changing load moves by
    50 % (log sd) from run to run, 3 % within a run (the loaded lab's
    latencies move more); returns the run medians, lowest first."""
    rng = np.random.default_rng(11)
    lows = []
    for _ in range(30):
        x = 100 * np.exp(rng.normal(0, 0.5) + rng.normal(0, 0.03, 5))
        lows.append(float(np.median(x)))
        _judge(site, x)
    return sorted(lows)


def test_a_run_where_accepted_runs_have_been_is_accepted(tmp_path):
    """Before: HELD ("bw inconclusive where one run resolves only ..." or "bw
    moved ... (hold_factor 2)") although accepted runs had been as low: under a
    load that comes and goes, every run at its loaded level was held out of
    the baselines until a person decided."""
    site = _site(tmp_path)
    value = _loaded_history(site)[3]  # three accepted runs were lower
    noise = np.exp(np.random.default_rng(3).normal(0, 0.01, 5))
    run, outcome, detail = _judge(site, value * noise)
    assert outcome == "inconclusive", detail.get("note")
    assert run not in Store(site.history_db).holds()
    assert detail["within_accepted"]["low"] < value < detail["within_accepted"]["high"]


def test_a_run_beyond_every_accepted_run_is_still_held(tmp_path):
    """Lower than any accepted run: called or held, as before."""
    site = _site(tmp_path)
    low = _loaded_history(site)[0]
    noise = np.exp(np.random.default_rng(4).normal(0, 0.01, 5))
    run, outcome, detail = _judge(site, 0.8 * low * noise)
    assert "within_accepted" not in detail
    assert outcome == "regressed" or run in Store(site.history_db).holds()
