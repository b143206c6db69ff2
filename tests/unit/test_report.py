"""Verdict table and HTML report from ReFrame run reports."""

from __future__ import annotations

import json

import pytest

from hpcval.core.errors import HpcvalError
from hpcval.reporting.htmlreport import render_html, write_html
from hpcval.reporting.report import load_run_report, num, verdict_table


def run_report(tmp_path, testcases):
    data = {"session_info": {"hostname": "node1", "time_start": "2026-11-22T10:00:00",
                             "version": "4.10.4"},
            "runs": [{"testcases": testcases}]}
    path = tmp_path / "run-report-1.json"
    path.write_text(json.dumps(data))
    return path


def case(name, result, perf=None, **kw):
    return {"display_name": name, "unique_name": name.replace(" ", "_"), "system": "local",
            "partition": "default", "environ": "impi", "result": result,
            "perfvalues": perf or {}, "mpi_stack": "intel-mpi@2021.18", **kw}


def test_verdict_names_failing_variable_value_and_bound(tmp_path):
    path = run_report(tmp_path, [
        case("imb_pingpong_check %cache=warm", "fail", {
            "local:default:lat_0B": [1.78, 0.001, None, 0.0, "us", "fail"],
            "local:default:bw_4MiB": [10874.0, 200.0, 0.0, None, "MB/s", "pass"],
        }, fail_phase="performance", fail_reason="failed to meet reference"),
        case("imb_pingpong_check %cache=cold", "fail", fail_phase="sanity",
             fail_reason="IMB PingPong 1048576 B not measured: out-of-mem\nmore"),
        case("osu_bw_check", "skip"),
    ])
    report = load_run_report(path)
    text = verdict_table(report)
    lines = text.splitlines()
    assert lines[0] == "RESULT: FAIL  2 failed, 0 regressed, 0 unstable of 2 figures"
    assert "lat_0B = 1.78 us is outside <= 0.001 (reference 0.001)" in text
    assert "sanity: IMB PingPong 1048576 B not measured: out-of-mem" in text
    assert "Areas: mpi 3 cases, 2 figures (2 fail, 1 skipped)" in text
    # no history yet to measure a spread: a floor 54x below the value is loose
    assert "Loose contracts: 1 figure(s)" in text
    # a passing figure is not listed on the terminal; the HTML report has every figure
    assert "bw_4MiB" not in text
    assert text.rstrip().endswith("0 passed, 2 failed, 1 skipped: FAIL")
    html = render_html(report)
    assert "<b>bw_4MiB</b>" in html and ">10,900<" in html and ">&gt;= 200<" in html
    assert "class='banner FAIL'" in html and "out-of-mem" in html


def test_terminal_of_a_clean_run_is_a_few_lines(tmp_path):
    """A clean run of 40 figures: the verdict, the counts per area, the
    headline; no table."""
    perf = {f"local:default:bw_{k}": [1000.0 + k, 900.0, -0.5, None, "MB/s", "pass"]
            for k in range(20)}
    path = run_report(tmp_path, [case("imb_pingpong_check %cache=warm", "pass", perf),
                                 case("stream_check", "pass", perf)])
    text = verdict_table(load_run_report(path))
    assert text.splitlines() == [
        "RESULT: PASS  40 figures: 40 pass",
        "Areas: mpi 1 case, 20 figures; memory 1 case, 20 figures",
        "2 passed, 0 failed, 0 skipped: PASS"]


@pytest.mark.parametrize("value, text", [
    (18698.0, "18,700"), (0.1283, "0.128"), (0.13, "0.13"), (912.4, "912"), (12.04, "12"),
    (1234567.0, "1,230,000"), (-0.00001234, "-1.23e-05"), (0.0, "0"), (None, "-"),
    (float("inf"), "inf")])
def test_numbers_to_three_significant_digits(value, text):
    assert num(value) == text


def test_retried_case_counts_once_with_its_last_result(tmp_path):
    path = run_report(tmp_path, [])
    data = json.loads(path.read_text())
    data["runs"] = [{"testcases": [case("x_check", "fail")]},
                    {"testcases": [case("x_check", "pass")]}]
    path.write_text(json.dumps(data))
    report = load_run_report(path)
    assert [c.result for c in report.cases] == ["pass"] and not report.failures


def test_a_build_fixture_is_a_case_only_when_it_failed(tmp_path):
    build = "CfdioBuild ~local:default+impi"
    ok = load_run_report(run_report(tmp_path, [
        case(build, "pass", fixture=True), case("cfdio_triad_check", "pass")]))
    assert [c.display_name for c in ok.cases] == ["cfdio_triad_check"]
    broken = load_run_report(run_report(tmp_path, [
        case(build, "fail", fixture=True, fail_phase="compile_wait",
             fail_reason="build error: build job failed with exit code: 2"),
        case("cfdio_triad_check", "fail_deps", fail_phase=None, fail_reason=None,
             dependencies_actual=[["CfdioBuild_63aa0af6", "local:default", "impi"]])]))
    assert [c.display_name for c in broken.failures] == [build, "cfdio_triad_check"]
    text = verdict_table(broken)
    assert "compile_wait: build error" in text
    assert ("cfdio_triad_check (default+impi): not run: what it needs failed first "
            "(CfdioBuild_63aa0af6 (impi); see its log)") in text


@pytest.mark.parametrize("content, message", [
    (None, "run report not found"),
    ("{not json", "not a readable ReFrame run report"),
    ('{"runs": 1}', "not a ReFrame run report"),
])
def test_bad_run_reports(tmp_path, content, message):
    path = tmp_path / "r.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(HpcvalError, match=message) as err:
        load_run_report(path)
    assert str(path) in str(err.value)


def test_html_written_atomically(tmp_path):
    report = load_run_report(run_report(tmp_path, [case("x_check", "pass")]))
    out = write_html(report, tmp_path / "html" / "r.html")
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in out.parent.iterdir()] == ["r.html"]


def test_headline_counts_passed_failed_skipped_and_groups_skips(tmp_path):
    cases = [case(f"cfdio_read_check %readers={n}", "pass") for n in (1, 2)]
    cases += [case("osu_bw_check", "skip", fail_reason="osu_bw not found in PATH: install it"),
              case("osu_latency_check", "skip",
                   fail_reason="osu_latency not found in PATH: install it"),
              case("ior_check", "skip", fail_reason="ior not found in PATH: install it"),
              case("ior_check %api=MPIIO", "skip", fail_reason="ior not found in PATH: install it")]
    report = load_run_report(run_report(tmp_path, cases))
    assert report.headline() == "2 passed, 0 failed, 4 skipped: PASS"
    assert report.skip_reasons() == [("ior not found in PATH: install it", 2),
                                     ("osu_bw not found in PATH: install it", 1),
                                     ("osu_latency not found in PATH: install it", 1)]
    text = verdict_table(report)
    assert "Skipped:\n  2 x ior not found in PATH: install it\n" in text
    assert "Failures:" not in text  # a skip is not a failure
    html = render_html(report)
    assert "2 passed, 0 failed, 4 skipped: PASS" in html and "<h2>Skipped</h2>" in html


def test_cases_aborted_by_a_stop_are_not_run_neither_skipped_nor_a_pass(tmp_path):
    """A validation stopped by SIGTERM before any case ended: the count line and
    the areas line say "not run", never "skipped" or PASS."""
    cases = [case("imb_pingpong_check %cache=warm", "abort", filename="mpi/imb_pingpong.py"),
             case("imb_pingpong_check %cache=cold", "abort", filename="mpi/imb_pingpong.py")]
    report = load_run_report(run_report(tmp_path, cases))
    assert report.headline() == "0 passed, 0 failed, 2 not run, 0 skipped: INTERRUPTED"
    text = verdict_table(report)
    assert "Areas: mpi 2 cases, 0 figures (2 not run)\n" in text, text
    assert "skipped)" not in text


def test_reading_reports_imports_neither_reframe_nor_matplotlib(tmp_path):
    import subprocess
    import sys

    path = run_report(tmp_path, [case("x_check", "pass")])
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "hpcval-series.json").write_text(json.dumps({"s": {
        "x_label": "size", "x_unit": "B", "judged": {},
        "columns": {"bw": {"unit": "MB/s", "points": [[1, 2.0], [2, 3.0]]}}}}))
    data = json.loads(path.read_text())
    data["runs"][0]["testcases"][0]["outputdir"] = str(tmp_path / "out")
    path.write_text(json.dumps(data))
    code = ("import sys; "
            "from hpcval.reporting.report import load_run_report, verdict_table; "
            "from hpcval.reporting.htmlreport import render_html; "
            f"r = load_run_report({str(path)!r}); verdict_table(r); "
            "assert '<polyline' in render_html(r); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('reframe', 'matplotlib')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_history_plots_are_inline_svg_with_change_points_and_rejected_runs():
    """The report's history of a figure that moved: samples, run medians, a red
    line at each change point labelled with its change, a cross on each run left
    out of baselines; inline SVG (no matplotlib, milliseconds per figure)."""
    import random

    from hpcval.history.store import HistoryPoint
    from hpcval.reporting import trend

    rng = random.Random(3)
    points = []
    for i in range(24):
        level = 21.4 * (0.8 if i >= 16 else 1.0)
        samples = [level * rng.lognormvariate(0, 0.03) for _ in range(5)]
        points.append(HistoryPoint(f"r{i}", i, i != 23, "c@s:p", "bw_1MiB", "MB/s", "higher",
                                   sorted(samples)[2], samples, "pass"))
    (series,) = trend.build(points)
    assert [cp.index for cp in series.change_points] == [16]
    section = trend.plot(series)
    assert section.count("<svg") == 1 and "<img" not in section
    assert section.count("<circle") == 24 * 5 + 24  # samples and medians
    assert "stroke='#d62728' stroke-width='1.5'" in section  # the change point
    assert f">{100 * series.change_points[0].change:+.1f} %</text>" in section
    assert section.count("stroke='#d62728' stroke-width='2'") == 1  # the rejected run
