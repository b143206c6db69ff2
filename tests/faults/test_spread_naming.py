"""A run beyond its threshold after runs that scatter both ways, through
validate's own path (``store_and_judge`` on a real results store): the alarm
is named as a grown run-to-run spread (`unstable`), not as a move of the
level; a level that moved one way, and one far run after clean ones, stay
`regressed` (docs/judging.md, "Runs that depend on each other")."""

from __future__ import annotations

import numpy as np

from .test_dependent_noise import _judge, _site


def _history(site, seed: int = 5) -> None:
    """30 accepted runs: 5 % between runs, 3 % within, 5 samples each."""
    rng = np.random.default_rng(seed)
    for _ in range(30):
        _judge(site, 100 * np.exp(rng.normal(0, 0.05) + rng.normal(0, 0.03, 5)))


def _at(rng: np.random.Generator, factor: float) -> np.ndarray:
    return 100 * factor * np.exp(rng.normal(0, 0.005, 5))


def test_a_far_run_after_runs_that_scatter_both_ways_is_unstable(tmp_path):
    """Before: `regressed` ("worse by 15.3 %, beyond the 5 % threshold"): the
    runs before it had scattered 7-9 % both ways, too few to name a grown
    spread at the spread test's own alpha, and a run beyond its threshold was
    then always a move of the level."""
    site = _site(tmp_path)
    _history(site)
    rng = np.random.default_rng(1)
    for f in (1.08, 0.93, 1.07, 0.92):
        _judge(site, _at(rng, f))
    _, outcome, detail = _judge(site, _at(rng, 0.86))
    assert outcome == "unstable", detail.get("note")
    assert detail["run_spread"]["ratio"] > 1.5
    assert "run-to-run spread" in detail["note"]


def test_a_level_that_moved_one_way_stays_regressed(tmp_path):
    """Before: from its 4th run on, a level 14-16 % down was `unstable`
    ("run-to-run spread x2.01 ... the level holds within it"): the newest 8 or
    12 runs mixed the old level and the new one, and their deviations from
    one median looked like a wider scatter. Runs beyond the level one way only
    are a move of it."""
    site = _site(tmp_path)
    _history(site)
    rng = np.random.default_rng(2)
    got = [_judge(site, _at(rng, f)) for f in (0.86, 0.84, 0.85, 0.86, 0.84, 0.85)]
    assert [o for _, o, _ in got] == ["regressed"] * 6, [d.get("note") for _, _, d in got]


def test_one_far_run_after_clean_runs_stays_regressed(tmp_path):
    """A single run 20 % down after clean runs is a move of the level: the run
    itself does not count towards the grown spread that would name it."""
    site = _site(tmp_path)
    _history(site)
    _, outcome, detail = _judge(site, _at(np.random.default_rng(3), 0.8))
    assert outcome == "regressed", detail.get("note")
    assert "run_spread" not in detail
