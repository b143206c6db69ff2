"""`hpcval trend`'s page: one dashboard over every figure of a site, from a
stored and judged multi-run history (tests/history_maker.py)."""

from __future__ import annotations

import re

import pytest
from history_maker import Case, Change, Fig, make_history, write_run

from hpcval.cli import main
from hpcval.history.store import Store
from hpcval.reporting import trend, trendpage
from hpcval.reporting.report import check_areas, load_run_report
from hpcval.run.verdicts import store_and_judge


@pytest.fixture(scope="module")
def stepped(tmp_path_factory):
    """10 runs; from the 7th, HPCG 15 % slower and OSU bandwidth 12 % faster;
    one more case measured in the last run only."""
    import numpy as np

    hist = make_history(tmp_path_factory.mktemp("trend"), runs=10, since=6,
                        last=[Change("hpcg_check", "gflops", 0.85),
                              Change("osu_bw_check", "bw_4MiB", 1.12)])
    once = [Case("stream_sized_check", {"size": "2GiB"},
                 [Fig("triad", "MB/s", "higher", 44000, 44000, -0.05, 0.05)])]
    run_id, path = write_run(hist.site, np.random.default_rng(9), once, start=1.8e9)
    store_and_judge(hist.site, run_id, load_run_report(path))
    store = Store(hist.site.history_db)
    series = trend.build(store.history())
    page = trendpage.dashboard(series, "demo", store,
                               check_areas(hist.site.root / "reframe-checks"))
    return hist, series, page


def _rows(page: str) -> list[str]:
    return re.findall(r"<details class='fig'.*?</details>", page, re.S)


def test_figures_that_moved_come_first_worst_first(stepped):
    _, series, page = stepped
    rows = _rows(page)
    assert len(rows) == 9  # every figure measured in more than one run
    names = [re.search(r"<b>(.*?)</b>", r).group(1) for r in rows]
    assert names[:2] == ["gflops", "bw_4MiB"]
    # 15 % below a 5 % band: failed, regressed against its history (both shown),
    # and the change point where it dropped
    assert "data-l='outcome'>FAIL + regressed<" in rows[0]
    assert re.search(r"-1\d\.\d % \[.*\] \(95 %\) at run 7", rows[0])
    # 12 % faster: above the band's upper bound, so failed too, after the worse one
    assert "data-l='outcome'>FAIL + improved<" in rows[1]
    assert re.search(r"\+1\d\.\d % \[.*\] \(95 %\) at run 7", rows[1])
    # the history band: the level since the latest change point, before the latest run
    assert re.search(r">\d+\.\d+ ± \d\.\d % \(3 runs\)<", rows[0]), rows[0]
    assert all(r.count("<svg class='spark'") == 1 and r.count("<template>") == 1
               for r in rows)


def test_single_run_figures_are_grouped_not_plotted(stepped):
    _, _, page = stepped
    single = page[page.index("id='single'"):]
    assert "Measured in one run only (1)" in single
    assert "stream_sized_check %size=2GiB@demo:default+impi" in single
    assert "<svg" not in single
    assert not any("stream_sized_check" in r for r in _rows(page))


def test_filters_sorting_and_no_external_assets(stepped):
    _, _, page = stepped
    areas = re.search(r"<select name='area'.*?</select>", page).group(0)
    assert re.findall(r"<option>(\w+)</option>", areas) == ["apps", "io", "memory", "mpi"]
    assert "<option>default+impi</option>" in page
    assert "<option>imb_pingpong_check</option>" in page
    assert page.count("onclick='hpcvalSort(this)'") == 3
    assert "function hpcvalFilter" in page and "function hpcvalSort" in page
    row = _rows(page)[0]
    assert "data-area='apps'" in row and "data-check='hpcg_check'" in row
    assert float(re.search(r"data-change='(-?[\d.]+)'", row).group(1)) < -0.1
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page)
    assert "<link" not in page


def test_loose_contract_flagged_on_the_dashboard(stepped):
    _, _, page = stepped
    pingpong = next(r for r in _rows(page) if "<b>bw_1MiB</b>" in r)
    assert "cannot fail; tighten with <code>hpcval references capture --from-history" \
        in pingpong
    triad = next(r for r in _rows(page) if "<b>triad</b>" in r)
    assert "cannot fail" not in triad


def test_hpcval_trend_writes_the_page_and_fails_on_a_worse_level(stepped, monkeypatch,
                                                                  tmp_path):
    hist, _, _ = stepped
    monkeypatch.setenv("HPCVAL_ROOT", str(hist.site.root))
    out = tmp_path / "t.html"
    assert main(["trend", "--site", "demo", "--html", str(out)]) == 1
    assert len(_rows(out.read_text())) == 9
    assert main(["trend", "--site", "demo", "--check", "osu_bw_check", "--html",
                 str(out)]) == 0
    assert len(_rows(out.read_text())) == 1
