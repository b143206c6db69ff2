"""The HTML report fits a 1400-pixel-wide window, checked in a real headless
browser (Chromium): series with three columns and long failure reasons wrap
instead of running off the right edge."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hpcval.report import load_run_report, write_html

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
                          capture_output=True, text=True, timeout=120,
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


def test_history_of_moved_figures_fits_a_1400_pixel_window(tmp_path: Path) -> None:
    """The report's section on figures that moved (one history plot each, as a
    validation writes it) stays inside the window, however many figures moved."""
    import random

    from hpcval import trend
    from hpcval.store import HistoryPoint

    rng = random.Random(5)
    points = [HistoryPoint(f"r{i}", i, True, f"imb_check %p={'y' * 80}@local:default+impi",
                           f"bw_{k}MiB", "MB/s", "higher", 1.0,
                           [900.0 * (0.8 if i > 12 else 1) * rng.lognormvariate(0, 0.05)
                            for _ in range(5)], "pass")
              for k in range(1, 7) for i in range(20)]
    section = trend.html_section(trend.build(points), "History of the figures that moved")
    html = write_html(load_run_report(_report(tmp_path)), tmp_path / "report.html", [section])
    assert html.read_text().count("<svg") == 9 + 6
    width = _page_width(html)
    assert width <= WIDTH, f"the page is {width} px wide"
