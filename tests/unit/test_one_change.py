"""One number everywhere (docs/judging.md, "One change, one text"): for the same
figure of the same stored runs, ``validate`` (its verdict lines), ``report``
(terminal and HTML), ``history``, ``trend`` and ``export`` print the same change
with the same interval: the stored verdict's, as
:meth:`hpcval.history.judging.change.Change.text` writes it."""

from __future__ import annotations

import html
import re

import pytest
from history_maker import Change as Step
from history_maker import make_history
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from hpcval.cli import main
from hpcval.history.judging.change import Change
from hpcval.history.store import Store
from hpcval.reporting.report import load_run_report
from hpcval.run.verdicts import stored

CHECK, FIGURE = "stream_check", "triad"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """7 runs; in the last, STREAM triad 40 % lower: outside its band and
    regressed, the row that hid its history verdict behind FAIL."""
    hist = make_history(tmp_path_factory.mktemp("one"), runs=7,
                        last=[Step(CHECK, FIGURE, 0.6)])
    store = Store(hist.site.history_db)
    run_id = hist.run_ids[-1]
    (key, outcome, detail), = [(k, o, d) for (k, v), (o, d) in store.verdicts(run_id).items()
                               if v == FIGURE and k.startswith(CHECK)]
    change = Change.from_detail(detail)
    assert outcome == "regressed" and change is not None and change.has_interval
    return hist, run_id, key, change


def _validate(hist, run_id, key, capsys) -> str:
    report = load_run_report(hist.site.report_path(run_id))
    return stored(hist.site, run_id, report).text


def _report(hist, run_id, key, capsys) -> str:
    main(["report", "--site", "demo", str(hist.site.report_path(run_id))])
    return capsys.readouterr().out


def _report_html(hist, run_id, key, capsys) -> str:
    main(["report", "--site", "demo", str(hist.site.report_path(run_id))])
    capsys.readouterr()
    page = (hist.site.html_dir / "latest.html").read_text()
    row = next(r for r in re.findall(r"<details class='fig'.*?</summary>", page, re.S)
               if f"<b>{FIGURE}</b>" in r and CHECK in r)
    # the band result and the history outcome, both
    assert "data-l='outcome'>FAIL + regressed<" in row
    return html.unescape(row)


def _history(hist, run_id, key, capsys) -> str:
    main(["history", "--site", "demo", "--check", CHECK, "--figure", FIGURE])
    out = capsys.readouterr().out
    return next(line for line in out.splitlines() if run_id in line)


def _trend(hist, run_id, key, capsys) -> str:
    main(["trend", "--site", "demo", "--check", CHECK, "--figure", FIGURE])
    return capsys.readouterr().out


def _trend_html(hist, run_id, key, capsys, tmp_path_factory=None) -> str:
    out = hist.site.root / "trend-one-change.html"
    main(["trend", "--site", "demo", "--html", str(out)])
    capsys.readouterr()
    page = out.read_text()
    row = next(r for r in re.findall(r"<details class='fig'.*?</summary>", page, re.S)
               if f"<b>{FIGURE}</b>" in r and CHECK in r)
    # the band result and the history outcome, both, as the report's row
    assert "data-l='outcome'>FAIL + regressed<" in row
    return html.unescape(row)


def _export(hist, run_id, key, capsys) -> str:
    main(["export", "--site", "demo", "--run", run_id])
    text = capsys.readouterr().out
    got: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.labels.get("figure") == FIGURE and s.labels.get("check") == CHECK:
                got[s.name] = s.value
    # the gauges carry the numbers; their text is the one Change writes
    return Change(got["hpcval_figure_change_ratio"], got["hpcval_figure_change_low"],
                  got["hpcval_figure_change_high"], got["hpcval_figure_change_level"]).text()


#: Every surface that prints a stored verdict's change. ``hpcval compare`` is not
#: one of them: it prints the change between two run sets with a two-sample
#: Welch interval of its own (docs/compare.md), printed by the same
#: :meth:`Change.text` (hpcval.reporting.comparepage), not the history
#: verdict of one run.
SURFACES = {"validate": _validate, "report": _report, "report-html": _report_html,
            "history": _history, "trend": _trend, "trend-html": _trend_html,
            "export": _export}


@pytest.mark.parametrize("surface", list(SURFACES))
def test_every_surface_prints_the_stored_change_and_interval(runs, surface, capsys,
                                                              monkeypatch):
    hist, run_id, key, change = runs
    read = SURFACES[surface]
    monkeypatch.setenv("HPCVAL_ROOT", str(hist.site.root))
    text = read(hist, run_id, key, capsys)
    assert change.text() in text, f"{surface} printed:\n{text}"
