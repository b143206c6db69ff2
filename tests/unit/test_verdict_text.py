"""What a person reads after a run (docs/judging.md, "What a person reads"):
a clean run ends with one line of counts; each regressed, unstable or improved
figure gets one line; inconclusive figures one line per check."""

from __future__ import annotations

from typing import Any

from hpcval.run.verdicts import verdict_text

CASE = "imb_pingpong_check %cache=warm@local:default+impi"


def _detail(**kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"unit": "MB/s", "better": "higher", "baseline_median": 18_700.0,
                         "current_median": 14_100.0, "change": -0.246, "ci_low": -0.310,
                         "ci_high": -0.175, "ci_level": 0.95, "family": "bandwidth",
                         "p_value": 0.0004, "p_adjusted": 0.002}
    d.update(kw)
    return d


def test_a_clean_run_prints_one_line_of_counts() -> None:
    verdicts = [(CASE, v, "pass", _detail()) for v in ("bw_1MiB", "bw_4MiB", "lat_8B")]
    verdicts.append((CASE, "lat_0B", "no-baseline", {}))
    assert verdict_text(verdicts) == "History verdicts: 3 pass, 1 no-baseline (docs/judging.md)\n"


def test_a_regressed_figure_is_one_line_in_the_agreed_shape() -> None:
    text = verdict_text([(CASE, "bw_1MiB", "regressed", _detail()),
                         (CASE, "bw_4MiB", "pass", _detail())])
    assert text.splitlines() == [
        f"REGRESSED {CASE} bw_1MiB: 18,700 -> 14,100 MB/s, -24.6 % [-31.0 .. -17.5] (95 %), "
        "family bandwidth, p=0.002",
        "History verdicts: 1 regressed, 1 pass (docs/judging.md)",
    ]


def test_an_unstable_figure_shows_its_scatter_and_the_stability_tests_p() -> None:
    d = _detail(outcome="unstable", change=0.02, ci_low=-0.3, ci_high=0.4, ci_level=0.999,
                p_adjusted=1.0, dispersion={"current": 0.389, "baseline": 0.05,
                                            "ratio": 7.78, "p": 0.0031})
    line = verdict_text([(CASE, "bw_1MiB", "unstable", d)]).splitlines()[0]
    assert line.startswith(f"UNSTABLE {CASE} bw_1MiB: 18,700 -> 14,100 MB/s, within-run "
                           "spread 5.00 -> 38.9 % (7.78x), +2.00 % [-30.0 .. +40.0] (99.9 %)")
    assert line.endswith(", family bandwidth, p=0.0031")


def test_inconclusive_figures_are_one_line_per_check_with_one_action() -> None:
    d = _detail(change=-0.12, needed={"runs": 3, "baseline_runs": 12, "samples": None,
                                      "threshold": 0.21})
    d2 = _detail(change=-0.08, needed={"runs": 4, "baseline_runs": 20, "samples": None,
                                       "threshold": 0.19})
    lines = verdict_text([(CASE, "bw_1MiB", "inconclusive", d),
                          (CASE, "bw_4MiB", "inconclusive", d2),
                          (CASE, "lat_8B", "pass", _detail())],
                         inconclusive_lines=True).splitlines()
    assert lines == [
        f"INCONCLUSIVE {CASE}: 2 figures (bw_1MiB, bw_4MiB) worse by 8.00-12.0 % within the "
        "noise; 4 more runs at this level resolve it (the sustained rule judges them together)",
        "History verdicts: 2 inconclusive, 1 pass (docs/judging.md)",
    ]
    # more than 5 runs: the threshold one run resolves instead
    far = _detail(change=-0.3, needed={"runs": 37, "threshold": 0.334})
    line = verdict_text([(CASE, "bw_1MiB", "inconclusive", far)],
                        inconclusive_lines=True).splitlines()[0]
    assert line.endswith("raise the threshold to 33.4 % in judging.yaml (what one run "
                         "resolves at this noise)")


def test_a_validation_counts_inconclusive_figures_in_its_one_line() -> None:
    """A clean run of a noisy figure is often worse by the threshold within the
    noise: validate prints the counts line only, and says where the detail is."""
    d = _detail(change=-0.12, needed={"runs": 3, "baseline_runs": 12, "samples": None,
                                      "threshold": 0.21})
    text = verdict_text([(CASE, "bw_1MiB", "inconclusive", d), (CASE, "lat_8B", "pass",
                                                                _detail())])
    assert text == ("History verdicts: 1 inconclusive, 1 pass (docs/judging.md; `hpcval "
                    "report` says what would resolve the inconclusive)\n")
    clean = verdict_text([(CASE, "lat_8B", "pass", _detail())])
    assert clean == "History verdicts: 1 pass (docs/judging.md)\n"


def test_inconclusive_never_advises_a_threshold_beyond_50_per_cent() -> None:
    """A two-moded latency (run medians a factor ~11 apart) needs 14,800 % to be
    resolved by one run: the line names what a person can do instead."""
    wide = _detail(change=2.16, spread=2.4, needed={"runs": 40, "samples": None,
                                                    "threshold": 148.0})
    line = verdict_text([(CASE, "lat_0B", "inconclusive", wide)],
                        inconclusive_lines=True).splitlines()[0]
    assert "threshold to" not in line and "14,800" not in line
    assert "statistic: fast" in line and "families:" in line and "240 % run to run" in line
    # more samples per run, where the run-to-run spread leaves room for them
    more = _detail(change=-0.3, needed={"runs": 37, "samples": 40, "threshold": 0.9})
    line = verdict_text([(CASE, "bw_1MiB", "inconclusive", more)],
                        inconclusive_lines=True).splitlines()[0]
    assert line.endswith("40 samples per run resolve it (the check's sample count; "
                         "the run-to-run spread allows it)")


def test_a_two_moded_figure_says_fast_mode_after_the_usual_line() -> None:
    """The fast mode and the slow-mode share come after p: the line keeps the
    shape before -> now unit, change [interval] (level), family, p."""
    d = _detail(unit="us", better="lower", baseline_median=2.1, current_median=36.0,
                change=16.1, ci_low=9.0, ci_high=25.0, family="latency", statistic="fast",
                slow_share={"before": 0.2, "now": 0.25, "low": -0.2, "high": 0.3, "p": 0.4})
    line = verdict_text([(CASE, "lat_8B", "regressed", d)]).splitlines()[0]
    assert line == (f"REGRESSED {CASE} lat_8B: 2.10 -> 36.0 us, +1,610 % [+900 .. +2,500] "
                    "(95 %), family latency, p=0.002, fast mode, slow-mode share 20.0 -> "
                    "25.0 % [-20 .. +30 points]")
