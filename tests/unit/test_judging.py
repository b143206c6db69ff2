"""hpcval.history.judging on seeded synthetic samples: decisions at known effect sizes and
noise levels, the correction across figures, settings files."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats

from hpcval.core.errors import InputError
from hpcval.history.judging import (
    FigureData,
    FigureSettings,
    JudgingSettings,
    adjust,
    holm,
    judge_figure,
    judge_run,
    summarize,
)


def make_run(rng: np.random.Generator, level: float, between: float, within: float,
             n: int = 5) -> list[float]:
    """Samples of one run: a run-level shift (between-run noise, log sd) shared by
    all samples, plus independent within-run noise (log sd)."""
    shift = rng.normal(0.0, between)
    return list(level * np.exp(shift + rng.normal(0.0, within, n)))


def make_baseline(rng: np.random.Generator, k: int = 5, level: float = 100.0,
                  between: float = 0.03, within: float = 0.01) -> list[list[float]]:
    return [make_run(rng, level, between, within) for _ in range(k)]


# --------------------------------------------------------------------------- outcomes
def test_no_baseline_below_k_runs_and_never_pass() -> None:
    rng = np.random.default_rng(1)
    base = make_baseline(rng, k=4)
    v = judge_figure(base, make_run(rng, 100, 0.03, 0.01), "higher")
    assert v.outcome == "no-baseline"
    assert v.baseline_runs == 4 and v.p_value is None and v.change is None
    assert "5 needed" in v.note
    # empty runs do not count as baseline runs
    v = judge_figure([*base, []], make_run(rng, 100, 0.03, 0.01), "higher")
    assert v.outcome == "no-baseline"


def test_large_drop_is_regressed_with_interval_and_p() -> None:
    rng = np.random.default_rng(2)
    base = make_baseline(rng, between=0.02)
    v = judge_figure(base, make_run(rng, 70, 0.0, 0.01), "higher")
    assert v.outcome == "regressed"
    assert v.ci_low < v.change < v.ci_high < 0
    assert v.change == pytest.approx(-0.30, abs=0.05)
    assert v.p_value < 0.01 and v.p_adjusted == v.p_value
    assert v.baseline_median == pytest.approx(100, rel=0.05)
    assert v.current_median == pytest.approx(70, rel=0.03)


def test_lower_is_better_figures() -> None:
    rng = np.random.default_rng(3)
    base = make_baseline(rng, level=10.0, between=0.02)
    assert judge_figure(base, make_run(rng, 14, 0, 0.01), "lower").outcome == "regressed"
    assert judge_figure(base, make_run(rng, 7, 0, 0.01), "lower").outcome == "improved"
    assert judge_figure(base, make_run(rng, 14, 0, 0.01), "higher").outcome == "improved"


def test_warn_when_significant_but_within_threshold() -> None:
    rng = np.random.default_rng(4)
    base = make_baseline(rng, between=0.002, within=0.002)
    v = judge_figure(base, make_run(rng, 97, 0, 0.002), "higher")
    assert v.outcome == "warn"
    assert -0.05 < v.change < -0.02


def test_inconclusive_when_noise_hides_a_change_beyond_threshold() -> None:
    rng = np.random.default_rng(5)
    base = [[100.0 * f] * 5 for f in (0.84, 0.95, 1.0, 1.06, 1.15)]
    v = judge_figure(base, [88.0, 87.5, 88.2, 88.1, 87.9], "higher")
    assert v.outcome == "inconclusive"
    assert v.change < -0.05
    assert v.p_value > 0.05
    # at ~11 % run-to-run spread a single run cannot resolve 5 %, more runs can
    assert v.needed is not None and v.needed.runs is not None and v.needed.runs > 1
    assert v.needed.samples is None  # the spread is between runs: samples do not help
    assert "consecutive runs" in v.note
    del rng


def test_more_samples_help_when_the_noise_is_within_runs() -> None:
    rng = np.random.default_rng(6)
    base = make_baseline(rng, between=0.0, within=0.06)
    v = judge_figure(base, make_run(rng, 93, 0.0, 0.06), "higher")
    assert v.needed is not None and v.needed.samples is not None
    assert v.needed.samples > 5


@pytest.mark.parametrize("drop,between,min_rate", [
    (0.20, 0.03, 0.95),   # 20 % drop, 3 % run-to-run spread: nearly always
    (0.10, 0.02, 0.80),   # 10 % drop, 2 % spread
])
def test_power_at_known_effect_sizes(drop: float, between: float, min_rate: float) -> None:
    rng = np.random.default_rng(7)
    hits = 0
    trials = 300
    for _ in range(trials):
        base = make_baseline(rng, between=between, within=0.01)
        cur = make_run(rng, 100 * (1 - drop), between, 0.01)
        hits += judge_figure(base, cur, "higher").outcome == "regressed"
    assert hits / trials >= min_rate


def test_false_regressed_rate_under_no_change_is_at_most_alpha() -> None:
    rng = np.random.default_rng(8)
    trials = 1000
    settings = FigureSettings(threshold=0.0)  # the test alone, no practical threshold
    false = sum(
        judge_figure(make_baseline(rng, between=0.076), make_run(rng, 100, 0.076, 0.01),
                     "higher", settings).outcome == "regressed"
        for _ in range(trials))
    # one-sided test at 5 %: binomial upper bound for 1000 trials
    assert false / trials <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials)


def test_between_run_shifts_fool_a_pooled_sample_test_but_not_the_verdict() -> None:
    """Samples within a run are correlated: pooling them calls a between-run shift
    significant. The verdict judges against the spread of the run medians."""
    rng = np.random.default_rng(9)
    naive = ours = 0
    trials = 200
    for _ in range(trials):
        base = make_baseline(rng, between=0.076, within=0.01)
        cur = make_run(rng, 100, 0.076, 0.01)  # no change: a new run of the same machine
        pooled = [x for r in base for x in r]
        p = stats.mannwhitneyu(cur, pooled, alternative="less").pvalue
        naive += p < 0.05
        ours += judge_figure(base, cur, "higher", FigureSettings(threshold=0.0)).outcome \
            == "regressed"
    assert naive / trials > 0.25  # the pooled test cries wolf on a quarter or more
    assert ours / trials <= 0.09


def test_only_the_last_k_runs_are_the_baseline() -> None:
    old = [[50.0, 51, 49, 50, 50]] * 5  # a slower past, superseded
    recent = [[100.0, 101, 99, 100, 100.5], [98.0, 99, 98, 97, 98.5], [101.0, 102, 100, 101, 101],
              [99.5, 100, 99, 99, 100], [100.0, 100.5, 99.5, 101, 100]]
    v = judge_figure(old + recent, [100.0, 99, 101, 100, 100], "higher")
    assert v.baseline_median == pytest.approx(99.7, rel=0.01)
    assert v.outcome == "pass"


def test_figures_with_zero_values_are_judged_on_a_linear_scale() -> None:
    base = [[0.0, 1.0, 0.5, 0.2, 0.1], [0.3, 0.2, 0.0, 0.4, 0.1], [0.2, 0.1, 0.3, 0.0, 0.2],
            [0.1, 0.2, 0.2, 0.3, 0.0], [0.2, 0.3, 0.1, 0.2, 0.0]]
    v = judge_figure(base, [5.0, 5.2, 4.9, 5.1, 5.0], "lower")
    assert v.outcome == "regressed"


@pytest.mark.parametrize("current,better,message", [
    ([], "higher", "no samples"),
    ([1.0, float("nan")], "higher", "finite"),
    ([1.0, 2.0], "up", "'higher' or 'lower'"),
])
def test_bad_input_names_the_figure(current: list[float], better: str, message: str) -> None:
    base = [[1.0, 1.1]] * 5
    with pytest.raises(InputError, match=message) as err:
        judge_figure(base, current, better, name="imb_check/bw_1MiB")
    assert "imb_check/bw_1MiB" in str(err.value)


# --------------------------------------------------------------------------- one run
def null_run(rng: np.random.Generator, figures: int) -> dict[str, FigureData]:
    return {f"check/fig{i}": FigureData(make_baseline(rng, between=0.05),
                                        make_run(rng, 100, 0.05, 0.01), "higher")
            for i in range(figures)}


@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_false_alarms_across_50_null_figures_are_controlled(correction: str) -> None:
    rng = np.random.default_rng(10)
    corrected = JudgingSettings(threshold=0.0, correction=correction)
    runs = 150
    any_false = any_false_uncorrected = 0
    for _ in range(runs):
        figures = null_run(rng, 50)
        verdicts = judge_run(figures, corrected)
        any_false += any(v.outcome == "regressed" for v in verdicts.values())
        raw = [v.p_value for v in verdicts.values() if v.worse_by and v.worse_by > 0]
        any_false_uncorrected += any(p < 0.05 for p in raw)
    # family-wise: at most alpha of the runs have any false alarm (binomial margin)
    assert any_false / runs <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)
    # without the correction nearly every run of 50 figures has one
    assert any_false_uncorrected / runs > 0.8


def test_judge_run_finds_the_real_regressions_among_many_figures() -> None:
    rng = np.random.default_rng(11)
    figures = null_run(rng, 30)
    for i in range(3):
        figures[f"check/slow{i}"] = FigureData(make_baseline(rng, between=0.01),
                                               make_run(rng, 60, 0.0, 0.01), "higher")
    verdicts = judge_run(figures, JudgingSettings())
    assert [k for k, v in verdicts.items() if v.outcome == "regressed"] == [
        "check/slow0", "check/slow1", "check/slow2"]
    assert all(v.p_adjusted >= v.p_value for v in verdicts.values())
    assert summarize(verdicts)["regressed"] == 3


def test_no_baseline_figures_take_no_part_in_the_correction() -> None:
    rng = np.random.default_rng(12)
    figures = {
        "c/new": FigureData(make_baseline(rng, k=2), make_run(rng, 100, 0, 0.01), "higher"),
        "c/slow": FigureData(make_baseline(rng, between=0.01), make_run(rng, 70, 0, 0.01),
                             "higher"),
    }
    verdicts = judge_run(figures)
    assert verdicts["c/new"].outcome == "no-baseline"
    assert verdicts["c/slow"].p_adjusted == pytest.approx(verdicts["c/slow"].p_value)
    assert list(verdicts) == ["c/new", "c/slow"]


def test_holm_and_bh_adjustments() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjust(p, "bh") == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjust([], "holm") == []
    with pytest.raises(InputError, match="holm or bh"):
        adjust(p, "bonferroni")


def test_per_figure_settings_apply_in_a_run() -> None:
    rng = np.random.default_rng(13)
    base = make_baseline(rng, between=0.005, within=0.005)
    cur = make_run(rng, 90, 0.0, 0.005)
    settings = JudgingSettings(overrides=(("c/lat_*", {"threshold": 0.2}),))
    verdicts = judge_run({"c/lat_8B": FigureData(base, cur, "higher"),
                          "c/bw_1MiB": FigureData(base, cur, "higher")}, settings)
    assert verdicts["c/lat_8B"].outcome == "warn"
    assert verdicts["c/lat_8B"].threshold == 0.2
    assert verdicts["c/bw_1MiB"].outcome == "regressed"


# --------------------------------------------------------------------------- settings
def test_settings_defaults_and_missing_file(tmp_path) -> None:
    s = JudgingSettings.load(tmp_path / "judging.yaml")
    assert (s.k, s.threshold, s.alpha, s.correction) == (5, 0.05, 0.05, "holm")


def test_settings_file_with_overrides(tmp_path) -> None:
    path = tmp_path / "judging.yaml"
    path.write_text("k: 8\nthreshold: 7%\ncorrection: bh\nfigures:\n"
                    "  'imb_*/lat_*': {threshold: 25%, k: 10}\n"
                    "  '*/bw_4MiB': {alpha: 0.01}\n")
    s = JudgingSettings.load(path)
    assert s.correction == "bh"
    assert s.for_figure("imb_pingpong_check/lat_8B") == FigureSettings(10, 0.25, 0.05, 0.005)
    assert s.for_figure("omb/bw_4MiB") == FigureSettings(8, 0.07, 0.01, 0.005)
    assert s.for_figure("omb/bw_1MiB") == FigureSettings(8, 0.07, 0.05, 0.005)


@pytest.mark.parametrize("text,message", [
    ("k: 1\n", "k: '1' must be a whole number of runs"),
    ("k: '5'\n", "k: '5' must be a whole number of runs written without quotes"),
    ("k: null\n", "k: 'null' must be a whole number"),
    ("alpha: true\n", "alpha: 'true' must be a fraction in (0, 0.5)"),
    ("k: 5\nk: 6\n", "line 2: 'k' given twice (lines 1 and 2): keep one"),
    ("treshold: 5%\n", "treshold: unknown setting"),
    ("threshold: lots\n", "threshold: 'lots' must be a fraction"),
    ("alpha: 0\n", "alpha: '0' must be a fraction"),
    ("correction: bonferroni\n", "correction: 'bonferroni' is not known; use holm or bh"),
    ("figures:\n  bw_1MiB: {threshold: 5%}\n", "figures: bw_1MiB: a figure is named"),
    ("figures:\n  'a/b': {tolerance: 5%}\n", "figures: a/b: tolerance: unknown figure setting"),
    ("- k\n", "expected a mapping"),
    ("k: [1\n", "not valid YAML"),
])
def test_settings_errors_name_file_and_key(tmp_path, text: str, message: str) -> None:
    path = tmp_path / "judging.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=re.escape(message)) as err:
        JudgingSettings.load(path)
    assert str(path) in str(err.value)
    assert err.value.exit_code == 2
