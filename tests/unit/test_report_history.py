"""The report of a run with its history, as a person reads it: the terminal
summary and the HTML page's first screen, areas, rows, sparklines and loose
contracts, on a stored and judged multi-run history (tests/history_maker.py)."""

from __future__ import annotations

import io
import re

import pytest
from history_maker import Change, make_history

from hpcval.reporting.htmlreport import render_html
from hpcval.reporting.report import RunHistory, figure_rows, load_run_report, verdict_table
from hpcval.run.runner import republish

BROKEN = [Change("stream_check", "triad", 0.7),
          Change("imb_pingpong_check", "lat_8B", 1.3),
          Change("ior_check", fail_phase="sanity", reason="sanity error: IOR wrote nothing")]


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    hist = make_history(tmp_path_factory.mktemp("broken"), runs=8, last=BROKEN)
    run_id = hist.run_ids[-1]
    report = load_run_report(hist.site.report_path(run_id))
    return hist, report, RunHistory.load(hist.site, run_id, report)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    hist = make_history(tmp_path_factory.mktemp("clean"), runs=8, seed=4)
    run_id = hist.run_ids[-1]
    report = load_run_report(hist.site.report_path(run_id))
    return hist, report, RunHistory.load(hist.site, run_id, report)


def test_terminal_opens_with_the_verdict_and_lists_failures_with_their_logs(broken):
    hist, report, history = broken
    lines = verdict_table(report, history).splitlines()
    assert lines[0] == (f"RESULT: FAIL  2 failed, 2 regressed, 0 unstable of 7 figures "
                        f"(run {hist.run_ids[-1]})")
    assert lines[1] == "Failures:"
    failed = [ln for ln in lines if ln.startswith("  ")]
    assert len(failed) == 2
    ior = next(ln for ln in failed if "ior_check" in ln)
    assert "sanity: sanity error: IOR wrote nothing" in ior
    triad = next(ln for ln in failed if "stream_check" in ln)
    assert re.search(r"triad = 31,\d00 MB/s is outside 42,800 \.\. 47,200 "
                     r"\(reference 45,000\)", triad), triad
    for line in failed:
        log = line.split("  log: ")[1]
        assert log.endswith("rfm_job.out") and open(log).read()
    areas = next(ln for ln in lines if ln.startswith("Areas: "))
    # areas with something wrong first, then in the order of the checks' folders
    assert [a.split()[0] for a in areas[7:].split("; ")] == ["mpi", "memory", "io", "apps",
                                                            "host"]
    assert "memory 1 case, 2 figures (1 fail)" in areas and "(1 regressed)" in areas


def test_terminal_of_a_clean_history_has_no_table(clean):
    hist, report, history = clean
    lines = verdict_table(report, history).splitlines()
    assert lines[0] == f"RESULT: PASS  9 figures: 9 pass (run {hist.run_ids[-1]})"
    assert lines[1].startswith("Areas: mpi 2 cases, 3 figures; memory")
    # PingPong's floors are 100x below its values: flagged, with the command that fixes
    # them; the 5 % bands of the others lie 2-4 run-to-run spreads from the values
    loose = {r.name for r in figure_rows(report, history) if r.loose()}
    assert loose == {"bw_1MiB", "lat_8B"}
    assert lines[2].startswith("Loose contracts: 2 figure(s)")
    assert "`hpcval references capture --from-history`" in lines[2]
    assert lines[3:] == ["7 passed, 0 failed, 0 skipped: PASS"]


def test_first_screen_holds_verdict_failures_changes_and_areas(broken):
    hist, report, history = broken
    page = render_html(report, history=history)
    order = [page.index(m) for m in ("class='banner FAIL'", "id='attention'", "id='changes'",
                                     "id='areas'", "id='area-mpi'")]
    assert order == sorted(order)
    attention = page[order[1]:order[2]]
    assert attention.count("<li>") == 3
    assert "REGRESSED</span> imb_pingpong_check %cache=warm (default+impi): lat_8B: " in attention
    assert re.search(r"lat_8B: 0\.1\d+ -&gt; 0\.1\d+ us, \+\d\d\.\d % \[\+\d", attention)
    assert attention.count("rfm_job.out'>log</a>") == 3
    changes = page[order[2]:order[3]]
    assert f"({history.previous_id})" in changes
    assert "ior_check %api=posix@demo:default+impi: pass -&gt; fail" in changes
    assert "lat_8B: pass -&gt; regressed" in changes


def test_one_section_per_area_failures_first_and_a_row_per_figure(broken):
    _, report, history = broken
    page = render_html(report, history=history)
    sections = re.findall(r"<h2 id='area-(\w+)'>", page)
    assert sections == ["mpi", "memory", "io", "apps", "host"]
    memory = page[page.index("id='area-memory'"):page.index("id='area-io'")]
    assert memory.index("<b>triad</b>") < memory.index("<b>copy</b>")
    io = page[page.index("id='area-io'"):page.index("id='area-apps'")]
    assert "failed before its figures: sanity: sanity error: IOR wrote nothing" in io
    rows = figure_rows(report, history)
    figures = [r for r in rows if r.perf is not None]
    assert page.count("<details class='fig'") == len(figures) == 7
    # every row: sparkline inline, full plot kept in a template until opened
    assert page.count("<svg class='spark'") == 7 and page.count("<template>") == 7
    mpi = page[page.index("id='area-mpi'"):page.index("id='area-memory'")]
    assert re.search(r"<b>bw_1MiB</b>.*?>MB/s<.*?>1\d,\d00<.*?>&gt;= 100<span class='loose'>"
                     r"cannot fail; tighten with <code>hpcval references capture "
                     r"--from-history</code>.*?>1\d,\d00 ± \d\.\d % \(5 runs\)<", mpi), mpi


def test_change_points_are_marked_in_sparklines(tmp_path):
    hist = make_history(tmp_path, runs=12, since=6, last=[Change("hpcg_check", "gflops", 0.8)])
    report = load_run_report(hist.site.report_path(hist.run_ids[-1]))
    history = RunHistory.load(hist.site, hist.run_ids[-1], report)
    (row,) = [r for r in figure_rows(report, history) if r.name == "gflops"]
    assert [cp.index for cp in row.series.change_points] == [6]
    page = render_html(report, history=history)
    apps = page[page.index("id='area-apps'"):]
    spark = re.search(r"<b>gflops</b>.*?(<svg class='spark'.*?</svg>)", apps).group(1)
    assert spark.count("stroke='#d62728'") == 1
    others = re.findall(r"<svg class='spark'.*?</svg>", page)
    assert sum("stroke='#d62728'" in s for s in others) == 1


def test_hpcval_report_renders_the_stored_run_with_its_history(broken):
    """What `hpcval report` and `hpcval validate` print and write (runner.publish)."""
    hist, _, _ = broken
    out = io.StringIO()
    report = republish(hist.site, hist.site.report_path(hist.run_ids[-1]), out)
    assert report.failures
    assert out.getvalue().startswith(f"RESULT: FAIL  2 failed, 2 regressed, 0 unstable of 7 "
                                     f"figures (run {hist.run_ids[-1]})")
    page = (hist.site.html_dir / "latest.html").read_text()
    assert "id='changes'" in page and page.count("<details class='fig'") == 7


def test_the_verdicts_new_keys_are_shown_and_their_absence_is_a_dash(tmp_path):
    """The keys the verdict dict gains (docs: the shape agreed with judging):
    family, spread, level_runs, ci_level, dispersion, sustained."""
    import json

    path = tmp_path / "run-report-x.json"
    perf = {"s:p:bw_1MiB": [14100.0, 18700.0, -0.5, None, "MB/s", "pass"],
            "s:p:bw_4MiB": [9000.0, 9000.0, -0.5, None, "MB/s", "pass"]}
    path.write_text(json.dumps({"session_info": {}, "runs": [{"testcases": [{
        "display_name": "imb_pingpong_check %cache=warm", "system": "s", "partition": "p",
        "environ": "impi", "result": "pass", "perfvalues": perf}]}]}))
    report = load_run_report(path)
    key = "imb_pingpong_check %cache=warm@s:p+impi"
    history = RunHistory("r1", verdicts={
        (key, "bw_1MiB"): ("unstable", {
            "better": "higher", "baseline_median": 18700.0, "current_median": 14100.0,
            "change": -0.246, "ci_low": -0.31, "ci_high": -0.175, "p_adjusted": 0.002,
            "family": "bandwidth", "spread": 0.066, "spread_runs": 12, "level_runs": 5,
            "dispersion": {"current": 0.2, "baseline": 0.05, "ratio": 4.0},
            "ci_level": 0.95, "sustained": {"index": 3, "change": -0.2, "p": 0.01,
                                            "runs_after": 4}}),
        (key, "bw_4MiB"): ("no-baseline", {"better": "higher"})})
    page = render_html(report, history=history)
    attention = page[page.index("id='attention'"):page.index("id='areas'")]
    assert ("bw_1MiB: 18,700 -&gt; 14,100 MB/s, -24.6 % [-31.0 .. -17.5] (95 %), "
            "spread within the run x4 the baseline&#x27;s, family bandwidth, p=0.002, "
            "sustained over the last 4 runs") in attention
    rows = re.findall(r"<details class='fig'.*?</summary>", page, re.S)
    bw1 = next(r for r in rows if "<b>bw_1MiB</b>" in r)
    assert "data-l='history'>18,700 ± 6.6 % (5 runs)<" in bw1
    bw4 = next(r for r in rows if "<b>bw_4MiB</b>" in r)
    assert "data-l='history'>-<" in bw4 and "data-l='change'>-<" in bw4
    assert verdict_table(report, history).splitlines()[0] == \
        "RESULT: FAIL  0 failed, 0 regressed, 1 unstable of 2 figures (run r1)"


def test_an_interrupted_run_says_so_first(broken):
    _, report, history = broken
    from dataclasses import replace

    stopped = replace(history, result="interrupted")
    line = verdict_table(report, stopped).splitlines()[0]
    assert line.startswith("RESULT: INTERRUPTED  2 failed, 2 regressed, 0 unstable of 7 "
                           "figures measured before it stopped (run ")
    assert "class='banner FAIL' id='verdict'>RESULT: INTERRUPTED" in render_html(
        report, history=stopped)
