"""Two-moded figures (hpcval.history.judging.modes): the fast mode and the
slow-mode share, on the two-moded latencies recorded on a loaded machine
(tests/data/judging/local-modes.json) and on seeded two-moded samples."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hpcval.core.errors import InputError
from hpcval.history.judging import JudgingSettings, judge_figure, modes

DATA = Path(__file__).resolve().parent.parent / "data" / "judging" / "local-modes.json"


@pytest.fixture(scope="module")
def recorded() -> dict:
    data = json.loads(DATA.read_text())
    runs = sorted(data["runs"], key=lambda r: r["started"])
    return {"figures": data["figures"],
            "clean": [r for r in runs if r["condition"] == "clean"],
            "fault": [r for r in runs if r["condition"] != "clean"]}


def _verdicts(recorded: dict, name: str, statistic: str) -> list:
    settings = JudgingSettings(statistic=statistic)
    base = [r["figures"][name] for r in recorded["clean"]]
    return [judge_figure(base, r["figures"][name], "lower", settings, name=f"rec/{name}")
            for r in recorded["fault"]]


@pytest.mark.parametrize("name", ["lat_0B", "lat_8B"])
def test_the_recorded_latencies_are_two_moded(recorded, name):
    cut = modes.split([np.log(r["figures"][name]) for r in recorded["clean"]])
    assert cut is not None and 20 < np.exp(cut) < 500  # fast ~1-5 us, slow 100s of us


@pytest.mark.parametrize("name", ["lat_0B", "lat_8B"])
def test_a_vanished_fast_mode_is_regressed_where_the_median_misses_it(recorded, name):
    """Ranks that yield the core at every poll: no sample at the few-us fast mode.
    The median calls none of the 6 runs (inconclusive, or even 'better': the slow
    mode of clean runs is slower than the yield's wake-up); the fast mode calls
    every one, with its interval."""
    assert not any(v.outcome == "regressed" for v in _verdicts(recorded, name, "median"))
    auto = _verdicts(recorded, name, "auto")
    assert all(v.outcome == "regressed" and v.statistic == "fast" for v in auto)
    assert all(v.ci_low is not None and v.ci_low > 0.05 for v in auto)  # beyond the threshold


def test_clean_recorded_runs_are_rarely_called(recorded):
    """Each clean run from the 6th against the clean runs before it: at most one
    alarm per figure in 11 (the clean runs of a machine at load 11-14)."""
    for name in recorded["figures"]:
        settings = JudgingSettings()
        clean = recorded["clean"]
        alarms = sum(judge_figure([r["figures"][name] for r in clean[:i]],
                                  clean[i]["figures"][name], "lower", settings,
                                  name=f"rec/{name}").outcome in ("regressed", "unstable")
                     for i in range(5, len(clean)))
        assert alarms <= 1, name


def _two_moded(rng: np.random.Generator, share: float, n: int = 8) -> list[float]:
    slow = rng.random(n) < share
    return list(np.where(slow, 80 * np.exp(rng.normal(0, 0.4, n)),
                         4 * np.exp(rng.normal(0, 0.05, n))))


def test_a_jumped_slow_mode_share_is_unstable_with_its_interval():
    rng = np.random.default_rng(3)
    base = [_two_moded(rng, 0.15) for _ in range(20)]
    v = judge_figure(base, _two_moded(np.random.default_rng(4), 0.85, n=20), "lower")
    assert v.outcome == "unstable" and v.note.startswith("slow-mode share")
    assert v.slow_share is not None and v.slow_share["low"] > 0.2


def test_every_sample_slow_is_regressed_as_a_gone_fast_mode():
    rng = np.random.default_rng(5)
    base = [_two_moded(rng, 0.2) for _ in range(20)]
    v = judge_figure(base, [80.0 * x for x in np.exp(rng.normal(0, 0.3, 8))], "lower")
    assert v.outcome == "regressed" and v.note.startswith("fast mode gone")


def test_one_moded_figures_keep_the_median():
    rng = np.random.default_rng(6)
    base = [list(100 * np.exp(rng.normal(0, 0.03, 8))) for _ in range(20)]
    assert modes.split([np.log(b) for b in base]) is None
    assert judge_figure(base, base[-1], "higher").statistic == "median"


def test_the_statistic_setting_is_checked():
    assert JudgingSettings.from_mapping({"statistic": "fast"}).for_figure("a/b").statistic == \
        "fast"
    with pytest.raises(InputError, match="statistic: 'mean' is not known; use median, fast, auto"):
        JudgingSettings.from_mapping({"statistic": "mean"}, "judging.yaml")
    with pytest.raises(InputError, match="hold_factor: '1' must be a factor above 1"):
        JudgingSettings.from_mapping({"hold_factor": 1}, "judging.yaml")


def _level_runs(rng: np.random.Generator, levels: list[float]) -> list[list[float]]:
    """Runs of a bandwidth at these levels (3 % between runs, 3 % within)."""
    return [list(100 * lv * np.exp(rng.normal(0, 0.03) + rng.normal(0, 0.03, 8)))
            for lv in levels]


def test_a_run_in_the_slow_mode_between_runs_is_not_called_when_others_were_as_slow():
    """Whole runs two-moded (9 of 30 at 0.75): the t reference reads the
    mixture as normal and calls a run in the slow mode against a level of fast
    runs; ranked among the accepted runs it is not beyond them."""
    rng = np.random.default_rng(7)
    levels = [0.75 if i % 3 == 0 and i < 27 else 1.0 for i in range(30)]
    base = _level_runs(rng, levels)
    med = [float(np.log(np.median(r))) for r in base]
    assert modes.between_runs(med)
    slow = _level_runs(rng, [0.75])[0]
    v = judge_figure(base, slow, "higher")
    assert v.outcome == "inconclusive" and "two-moded between runs" in v.note
    # the same run judged by the t reference alone (statistic of the old rule:
    # p below alpha) is what the rank keeps from being called
    assert v.p_value is not None and v.p_value < 0.05
    # beyond every accepted run (rank p 1/31 <= 0.05): regressed
    v = judge_figure(base, [x * 0.8 for x in slow], "higher")
    assert v.outcome == "regressed"


def test_runs_around_one_level_are_not_two_moded_between_runs():
    rng = np.random.default_rng(8)
    for _ in range(20):
        base = _level_runs(rng, [float(np.exp(rng.normal(0, 0.05))) for _ in range(30)])
        assert not modes.between_runs([float(np.log(np.median(r))) for r in base])


def test_rank_p_is_the_share_of_runs_at_least_as_bad():
    assert modes.rank_p([1.0, 2.0, 3.0, 4.0], 0.5, "higher") == 1 / 5
    assert modes.rank_p([1.0, 2.0, 3.0, 4.0], 2.0, "higher") == 3 / 5
    assert modes.rank_p([1.0, 2.0, 3.0, 4.0], 3.5, "lower") == 2 / 5


def test_run_values_leave_out_a_lone_run_that_missed_the_fast_mode():
    """The sustained rule's values of a two-moded figure: a lone run without a
    fast mode whose share test says nothing is unknown (None); a stretch of
    such runs whose combined share tests say the mode is gone reads its fast
    end."""
    rng = np.random.default_rng(9)
    base = [_two_moded(rng, 0.5) for _ in range(20)]
    cut = modes.split([np.log(b) for b in base])
    assert cut is not None
    split_at = float(np.exp(cut))
    lone = [_two_moded(rng, 0.5) for _ in range(3)] + [[80.0, 90.0, 70.0, 4.0, 85.0, 95.0,
                                                         75.0, 88.0]]
    values = modes.run_values(lone, "lower", "fast", split_at, base)
    assert values[-1] is None and all(v is not None and v < 6 for v in values[:3])
    gone = [list(80 * np.exp(rng.normal(0, 0.3, 8))) for _ in range(4)]
    values = modes.run_values(base[-3:] + gone, "lower", "fast", split_at, base)
    assert all(v is not None and v > 20 for v in values[-4:])
