"""The HTML report and the trend page as people see them, in a real headless
browser (Chromium): they fit a 1400-pixel window and a 390-pixel phone (series
with three columns, long names and failure reasons wrap instead of running
off the right edge), the first screen holds the run's verdict and its
failures, and a trend page of 500 figures x 60 runs stays light (full plots
are parsed only when a row is opened). The pages come from a stored, judged
multi-run history (tests/history_maker.py). Chromium's window is at least 500
px wide, so the phone is an iframe 390 px wide inside a probe page."""

from __future__ import annotations

import html as htmllib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from history_maker import Change, make_history, many_cases

from hpcval.history.store import Store
from hpcval.reporting import trend, trendpage
from hpcval.reporting.htmlreport import write_html
from hpcval.reporting.report import RunHistory, check_areas, load_run_report

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
WIDTH = 1400

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium (Debian: apt-get install "
                                                "chromium) to check the report's layout"),
]


def _report(tmp_path: Path) -> Path:
    cases = []
    for i, env in enumerate(("impi", "openmpi", "mpich")):
        out = tmp_path / f"out{i}"
        out.mkdir()
        sizes = [2**k for k in range(1, 23)]
        columns = {c: {"unit": u, "points": [[s, v * (1 + s / 1e5)] for s in sizes]}
                   for c, u, v in (("t_avg_usec", "us", 2.0), ("mbytes_per_sec", "MB/s", 900.0),
                                   ("msg_per_sec", "msg/s", 1e5))}
        (out / "hpcval-series.json").write_text(json.dumps({
            "Sendrecv (np=2, median of 5)": {"x_label": "message size", "x_unit": "B",
                                             "columns": columns,
                                             "judged": {"bw_1MiB": {"column": "mbytes_per_sec",
                                                                    "x": 1 << 20}}}}))
        cases.append({
            "display_name": f"imb_sendrecv_exchange_check %very_long_parameter_name={'x' * 60}",
            "unique_name": f"c{i}", "system": "local", "partition": "default", "environ": env,
            "result": "fail", "fail_phase": "sanity", "mpi_stack": "intel-mpi@2021.18",
            "fail_reason": "sanity error: /var/" + "very/deep/path/" * 30 + " not found",
            "outputdir": str(out),
            "perfvalues": {"local:default:bw_1MiB": [1500.0, 200.0, 0.0, None, "MB/s", "pass"]},
        })
    path = tmp_path / "run-report.json"
    path.write_text(json.dumps({"session_info": {"hostname": "node1", "cmdline": "x " * 300},
                                "runs": [{"testcases": cases}]}))
    return path


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", f"--window-size={WIDTH},1000", *args],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, HOME=os.environ.get("HOME", "/tmp")))


def _page_width(html: Path) -> int:
    """The page's full width (scrollWidth) in a 1400-pixel headless Chromium."""
    probe = html.with_name("probe.html")
    probe.write_text(html.read_text().replace(
        "</body>", "<script>document.title = 'scrollWidth=' + "
                   "document.documentElement.scrollWidth;</script></body>"))
    proc = _chromium("--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    found = re.search(r"<title>scrollWidth=(\d+)</title>", proc.stdout)
    assert found, proc.stderr[-2000:]
    return int(found.group(1))


def test_report_fits_a_1400_pixel_window(tmp_path: Path) -> None:
    html = write_html(load_run_report(_report(tmp_path)), tmp_path / "report.html")
    assert html.read_text().count("<svg") == 9  # 3 cases x 3 columns
    width = _page_width(html)
    assert width <= WIDTH, f"the page is {width} px wide"
    shot = tmp_path / "report.png"
    _chromium(f"--screenshot={shot}", html.as_uri())
    assert shot.is_file() and shot.stat().st_size > 0


#: Widths a person reads the pages at: a desktop window, a phone.
DESKTOP, PHONE = (1400, 900), (390, 844)

_PROBE = """<!DOCTYPE html><html><body style='margin:0'>
<iframe id='f' src='{src}' style='width:{w}px;height:{h}px;border:0'></iframe><pre id='out'></pre>
<script>var f=document.getElementById('f');f.onload=function(){{
var w=f.contentWindow,d=f.contentDocument,t=w.performance.now(),e=d.documentElement;
function bottom(sel){{var x=d.querySelector(sel);return x?x.getBoundingClientRect().bottom:null;}}
var wide=[];d.querySelectorAll('body *').forEach(function(x){{
if((x.getBoundingClientRect().right>e.clientWidth+1||x.scrollWidth>x.clientWidth+1&&
getComputedStyle(x).overflowX==='visible'&&x.clientWidth)&&wide.length<5)wide.push(x.tagName+
'.'+x.className);}});
document.getElementById('out').textContent=JSON.stringify({{inner:w.innerWidth,
scroll:e.scrollWidth,client:e.clientWidth,load_ms:t,verdict:bottom('#verdict'),
alarm:bottom('#attention li'),elements:d.getElementsByTagName('*').length,
svg:d.getElementsByTagName('svg').length,templates:d.getElementsByTagName('template').length,
wide:wide}});}};</script></body></html>"""


def _probe(page: Path, size: tuple[int, int], template: str = _PROBE) -> dict:
    """Open ``page`` in an iframe of ``size`` and measure it once it has loaded
    (``template``: the probe page; by default its scroll and client widths,
    where the verdict and the first alarm end, how many elements it has, how
    long it took to load)."""
    probe = page.with_name(f"probe-{size[0]}-{page.name}")
    probe.write_text(template.format(src=page.name, w=size[0], h=size[1]))
    proc = _chromium("--allow-file-access-from-files", "--dump-dom", probe.as_uri())
    found = re.search(r"<pre id=\"out\">(.*?)</pre>", proc.stdout, re.S)
    assert found and found.group(1), proc.stderr[-2000:]
    return json.loads(htmllib.unescape(found.group(1)))


@pytest.fixture(scope="module")
def history_pages(tmp_path_factory) -> dict[str, Path]:
    """The report of the last of 10 runs (a regression, a band failure, a case
    failed in its sanity stage, a step six runs back) and the trend page."""
    tmp = tmp_path_factory.mktemp("pages")
    hist = make_history(tmp, runs=10, since=6, last=[
        Change("hpcg_check", "gflops", 0.85), Change("stream_check", "triad", 0.7),
        Change("imb_pingpong_check", "lat_8B", 1.3),
        Change("ior_check", fail_phase="sanity",
               reason="sanity error: /scratch/" + "very/deep/path/" * 20 + "ior.dat missing")])
    run_id = hist.run_ids[-1]
    report = load_run_report(hist.site.report_path(run_id))
    page = write_html(report, tmp / "report.html", None,
                      RunHistory.load(hist.site, run_id, report))
    store = Store(hist.site.history_db)
    areas = check_areas(hist.site.root / "reframe-checks")
    (tmp / "trend.html").write_text(trendpage.dashboard(trend.build(store.history()), "demo",
                                                        store, areas))
    return {"report": page, "trend": tmp / "trend.html"}


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1400px", "390px"])
@pytest.mark.parametrize("name", ["report", "trend"])
def test_pages_fit_the_window(history_pages, name: str, size: tuple[int, int]) -> None:
    seen = _probe(history_pages[name], size)
    assert seen["inner"] == size[0]
    assert seen["scroll"] <= seen["client"], f"{name} overflows at {size[0]} px: {seen}"
    assert not seen["wide"], seen["wide"]
    assert seen["svg"] > 0


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1400px", "390px"])
def test_first_screen_holds_the_verdict_and_the_failures(history_pages,
                                                         size: tuple[int, int]) -> None:
    seen = _probe(history_pages["report"], size)
    assert seen["verdict"] is not None and seen["verdict"] <= size[1]
    assert seen["alarm"] is not None and seen["alarm"] <= size[1], seen


def test_500_figures_by_60_runs_trend_page(tmp_path) -> None:
    """The page a site sees after two months of nightly runs of 500 figures: it
    loads with one sparkline per figure and no full plot in the document until
    a row is opened. The load time is printed (the project's tests assert no
    timings; docs/scheduling.md gives the one measured)."""
    hist = make_history(tmp_path, runs=60, cases=many_cases(500), record_all_but=1, since=50,
                        last=[Change("stream_check", "bw_2B", 0.8)])
    store = Store(hist.site.history_db)
    series = trend.build(store.history())
    assert len(series) == 500 and {len(s.points) for s in series} == {60}
    page = tmp_path / "trend.html"
    page.write_text(trendpage.dashboard(series, "demo", store,
                                    check_areas(hist.site.root / "reframe-checks")))
    assert page.stat().st_size < 500 * 12_000  # a few kilobytes per figure, plot included
    seen = _probe(page, DESKTOP)
    assert seen["svg"] == 500 and seen["templates"] == 500  # sparklines; plots kept aside
    assert seen["elements"] < 500 * 30
    assert seen["scroll"] <= seen["client"]
    print(f"trend page of 500 figures x 60 runs ({page.stat().st_size >> 10} KiB): loaded "
          f"in {seen['load_ms']:.0f} ms at 1400 px")
