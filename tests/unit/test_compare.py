"""A/B comparison on two real lab runs: unshaped links vs the 1g fabric profile."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcval.core.errors import HpcvalError
from hpcval.history.compare import (
    compare_reports,
    comparison_html_section,
    comparison_text,
    parse_range,
    parse_size,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "compare"


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    """The recorded run reports, pointing at their series copied under tmp_path."""
    shutil.copytree(DATA, tmp_path / "data")
    out = []
    for label in ("unshaped", "1g"):
        path = tmp_path / "data" / f"lab-{label}-run-report.json"
        path.write_text(path.read_text().replace("@DATA@", str(tmp_path / "data")))
        out.append(path)
    return out[0], out[1]


def _stored_perf(path: Path) -> dict[str, dict[str, float]]:
    data = json.loads(path.read_text())
    return {tc["display_name"].split()[0]: {k.rsplit(":", 1)[1]: v[0]
                                            for k, v in tc["perfvalues"].items()}
            for run in data["runs"] for tc in run["testcases"]}


def _stored_series(label: str, check: str, series: str, column: str) -> dict[float, float]:
    data = json.loads((DATA / label / check / "hpcval-series.json").read_text())
    return {float(x): float(y) for x, y in data[series]["columns"][column]["points"]}


def test_sizes_and_ranges() -> None:
    assert parse_size("2KiB") == 2048
    assert parse_size("4MiB") == 4 << 20
    assert parse_size("4M") == 4 << 20
    assert parse_size("512") == 512
    assert parse_range("2KiB:4MiB") == (2048, 4 << 20)
    with pytest.raises(HpcvalError, match="not a message size"):
        parse_size("lots")
    with pytest.raises(HpcvalError, match="LOW:HIGH"):
        parse_range("2KiB")


def test_per_size_changes_are_the_stored_figures(runs: tuple[Path, Path]) -> None:
    a, b = runs
    comp = compare_reports(a, b, 2048, 4 << 20)
    by = {(s.case.split()[0], s.column): s for s in comp.series}
    pp = by[("imb_pingpong_internode_check", "bandwidth")]
    sa = _stored_series("unshaped", "imb_pingpong_internode_check", "PingPong", "bandwidth")
    sb = _stored_series("1g", "imb_pingpong_internode_check", "PingPong", "bandwidth")
    assert [p.x for p in pp.points] == sorted(sa)
    for p in pp.points:
        assert (p.a, p.b) == (sa[p.x], sb[p.x])
        if sa[p.x]:
            assert p.change_pct == pytest.approx((sb[p.x] - sa[p.x]) / sa[p.x] * 100)
    # the judged points agree with the perf values in the run reports
    perf_a, perf_b = _stored_perf(a), _stored_perf(b)
    points = {p.x: p for p in pp.points}
    assert points[4 << 20].a == perf_a["imb_pingpong_internode_check"]["bw_4MiB"]
    assert points[4 << 20].b == perf_b["imb_pingpong_internode_check"]["bw_4MiB"]
    # recorded: 941.59 MB/s unshaped, 118.34 MB/s at 1g
    assert (points[4 << 20].a, points[4 << 20].b) == (941.59, 118.34)
    assert points[4 << 20].change_pct == pytest.approx((118.34 - 941.59) / 941.59 * 100)
    # range mean: arithmetic mean of the 12 per-size changes from 2 KiB to 4 MiB
    want = [(sb[x] - sa[x]) / sa[x] * 100 for x in sa if 2048 <= x <= 4 << 20]
    assert len(want) == 12
    assert pp.mean_change(2048, 4 << 20) == pytest.approx(sum(want) / 12)
    assert pp.mean_change(2048, 4 << 20) == pytest.approx(-57.8, abs=0.05)

    uni = by[("imb_uniband_internode_check", "aggregate bandwidth")]
    ua = _stored_series("unshaped", "imb_uniband_internode_check", "Uniband",
                        "aggregate bandwidth")
    assert {p.x: p.a for p in uni.points} == ua


def test_text_names_range_mean_and_direction(runs: tuple[Path, Path]) -> None:
    comp = compare_reports(*runs, 2048, 4 << 20, check="imb_pingpong_internode_check")
    text = comparison_text(comp)
    assert "PingPong: bandwidth [MB/s]" in text
    assert "4 MiB" in text and "941.6" in text and "118.3" in text and "-87.4 %" in text
    assert "mean change over 2 KiB - 4 MiB (12 sizes): -57.8 % -> 57.8 % lower in B (worse)" \
        in text
    # latency: higher in B is worse
    assert "PingPong: one-way latency [us]" in text
    assert "higher in B (worse)" in text
    section = comparison_html_section(comp)
    assert section.count("<img src='data:image/png;base64,") == 2
    assert "-57.8 %" in section


def test_series_lost_falls_back_to_judged_figures(runs: tuple[Path, Path]) -> None:
    a, b = runs
    shutil.rmtree(a.parent / "unshaped")
    comp = compare_reports(a, b, check="imb_uniband_internode_check")
    cols = {s.column: s.points[0] for s in comp.series}
    assert set(cols) == {"bw_agg_64KiB", "bw_agg_256KiB", "bw_agg_512KiB"}
    perf_a, perf_b = _stored_perf(a), _stored_perf(b)
    assert cols["bw_agg_256KiB"].a == perf_a["imb_uniband_internode_check"]["bw_agg_256KiB"]
    assert cols["bw_agg_256KiB"].b == perf_b["imb_uniband_internode_check"]["bw_agg_256KiB"]


def test_no_common_case_is_an_error(runs: tuple[Path, Path]) -> None:
    with pytest.raises(HpcvalError, match="no test case in both runs matching 'nope'"):
        compare_reports(*runs, check="nope")


def test_command_prints_and_writes_html(runs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp.html"
    proc = subprocess.run(
        [sys.executable, "-m", "hpcval.cli", "compare", str(runs[0]), str(runs[1]),
         "--range", "1MiB:4MiB", "--check", "imb_pingpong", "--html", str(out)],
        capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "mean change over 1 MiB - 4 MiB (3 sizes)" in proc.stdout
    assert out.is_file() and "A/B comparison" in out.read_text()


@pytest.mark.parametrize(("column", "unit", "declared", "lower"), [
    ("output_share", "fraction", "lower", True),   # cfdio: share of the run spent writing
    ("cache_resident", "fraction", "lower", True),
    ("output_cost", "s", "lower", True),
    ("lat_8B", "us", "lower", True),
    ("stencil_fraction_of_triad", "fraction", "higher", False),
    ("write_bw", "MB/s", "higher", False),
    ("tuned_vs_default", "%", "lower", True),      # no name rule could know this one
    ("t_avg_usec", "usec", None, True),            # a series column no figure judges: its unit
])
def test_direction_as_declared_else_by_unit(tmp_path: Path, column: str, unit: str,
                                           declared: str | None, lower: bool) -> None:
    from hpcval.core.series import write_samples
    from hpcval.history.compare import _compare_case
    from hpcval.reporting.report import CaseResult, PerfValue

    if declared:  # what the base test stores with the samples of a declared figure
        write_samples(tmp_path, column, [1.0, 1.1, 0.9, 1.0, 1.0], unit, declared)
    case = CaseResult("c", "c", "s", "p", "e", "pass", None, None, "mpi",
                      [PerfValue(column, 1.0, None, None, None, unit, "pass")], str(tmp_path),
                      None, {})
    (s,) = _compare_case(case, case)
    assert s.lower_is_better is lower
