"""The trend page of a site (``var/<site>/html/trend.html``): every figure's
history (:mod:`hpcval.reporting.trend`) drawn with the report's pieces
(:mod:`hpcval.reporting.report`)."""

from __future__ import annotations

import html
import math
import statistics
from statistics import median
from typing import Any

from hpcval.reporting import htmlreport as hr
from hpcval.reporting import report as rp
from hpcval.reporting.trend import Series

#: The filters of the dashboard's figure list: (data attribute, label).
FILTERS = (("area", "area"), ("check", "check"), ("partition", "partition+environ"))

_FILTER_JS = """
function hpcvalFilter(){var f={},q=document.getElementById('q').value.toLowerCase(),n=0;
document.querySelectorAll('.filters select').forEach(function(s){f[s.name]=s.value;});
document.querySelectorAll('#figs-all>details').forEach(function(d){var ok=true;
for(var k in f){if(f[k]&&d.dataset[k]!==f[k])ok=false;}
if(q&&d.dataset.name.indexOf(q)<0)ok=false;d.hidden=!ok;if(ok)n++;});
document.getElementById('shown').textContent=n;}
"""


def _check_of(case_key: str) -> tuple[str, str]:
    """(check, ``partition+environ``) of a case key
    ``<check> [%p=v...]@<system>:<partition>+<environ>``."""
    name, _, where = case_key.rpartition("@")
    return name.split()[0] if name else case_key, where.partition(":")[2]


def _worse(change: float, better: str) -> float:
    """A change signed so that worse is negative (for sorting worst first)."""
    return change if better != "lower" else -change


def dashboard(series: list[Series], site: str, store: Any = None,
              areas: dict[str, str] | None = None) -> str:
    """One page over every figure of a site: a filterable, sortable list with
    a sparkline per figure, figures that moved (a change point in their
    history) first, and figures with a single run grouped at the end, not
    plotted. Full plots are drawn when a row is opened."""
    esc = html.escape
    areas = areas or {}
    last_runs = sorted({s.points[-1].run_id for s in series if s.points})
    verdicts: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    bands: dict[tuple[str, str], Any] = {}
    if store is not None:
        for run_id in last_runs:
            verdicts.update(store.verdicts(run_id))
            for row in store.run_figures(run_id):
                if row["variable"] is not None:
                    bands[(row["case_key"], row["variable"])] = rp.PerfValue(
                        row["variable"], row["value"], row["reference"], row["lower"],
                        row["upper"], row["unit"] or "", row["band_result"] or "")
    several = [s for s in series if len(s.points) > 1]
    single = [s for s in series if len(s.points) <= 1]
    def outcome_of(s: Series) -> tuple[str, dict[str, Any]]:
        key = (s.case_key, s.variable)
        outcome, detail = verdicts.get(key, ("-", {}))
        perf = bands.get(key)
        return ("FAIL" if perf is not None and perf.result == "fail" else outcome), detail

    def worse_change(s: Series) -> float:
        """The latest change point's change, else the latest verdict's, signed
        so that worse is negative."""
        if s.change_points:
            return _worse(s.change_points[-1].change, s.better)
        change = outcome_of(s)[1].get("change")
        return _worse(change, s.better) if isinstance(change, int | float) else 0.0

    def moved(s: Series) -> bool:
        return bool(s.change_points) or outcome_of(s)[0] in rp.ALARMS

    several.sort(key=lambda s: (not moved(s), rp.RANK.get(outcome_of(s)[0], 5),
                                worse_change(s), s.case_key, s.variable))
    views = []
    for s in several:
        key = (s.case_key, s.variable)
        check, where = _check_of(s.case_key)
        outcome, detail = outcome_of(s)
        perf = bands.get(key)
        cp = s.change_points[-1] if s.change_points else None
        medians = [m for m in s.medians if m == m]
        # the level and spread of the runs since the latest change point, before the latest
        since = [m for m in s.medians[cp.index if cp else 0:-1] if m == m] or medians
        logs = [math.log(m) for m in since if m > 0]
        spread = statistics.stdev(logs) if len(logs) >= 3 else None
        level = median(since) if since else None
        if cp:
            change = f"{cp.as_change().text()} at run {cp.index + 1}"
            if outcome_of(s)[0] in rp.ALARMS or verdicts.get(key, ("-",))[0] in rp.ALARMS:
                if isinstance(detail.get("change"), int | float):
                    # the latest run's verdict, with its interval, beside the step
                    change += f"; latest run {rp.change_text(detail)}"
        elif isinstance(detail.get("change"), int | float):
            change = f"{rp.change_text(detail)} (latest run)"
        else:
            change = "-"
        hband = (f"{rp.num(level)} ± {100 * spread:.1f} %" if spread else rp.num(level))
        hband += f" ({len(since)} run{'s' * (len(since) != 1)})"
        band_list: list[tuple[float | None, float | None, str, str]] = []
        band = "-"
        if perf is not None:
            band = rp.band_text(perf)
            lo, hi = perf.bounds()
            if lo is not None or hi is not None:
                band_list.append((lo, hi, "#2ca02c", "contract band"))
        area = rp.area_of(check, None, areas)
        views.append(hr.FigureView(
            s.variable, s.case_key, s.unit, rp.num(medians[-1] if medians else None), band,
            hband, change, hr.shown_outcome(outcome, verdicts.get(key, ("-", {}))[0]), s,
            band_list, perf is not None and outcome != "FAIL"
            and perf.result != "fail" and rp.loose_band(perf, s.better, spread),
            data={"name": f"{s.case_key} {s.variable}".lower(), "check": check, "area": area,
                  "partition": where, "rank": str(rp.RANK.get(outcome, 5)),
                  "change": f"{worse_change(s):.6f}"}))
    n_moved = sum(1 for s in several if moved(s))
    worse = sum(1 for s in several if s.worse_now or outcome_of(s)[0] in rp.ALARMS)
    runs = len({p.run_id for s in series for p in s.points})
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<title>hpcval trends {esc(site)}</title><style>{hr.PAGE_CSS}"
        ".filters{display:flex;flex-wrap:wrap;gap:.5em 1em;margin:.5em 0}"
        ".filters select,.filters input{max-width:100%;font:inherit}</style></head><body>",
        f"<h1>Trends of site {esc(site)}</h1>",
        f"<p class='banner {'FAIL' if worse else 'PASS'}' id='verdict'>{len(series)} figures over "
        f"{runs} runs: {n_moved} moved (a change point in their history, or failed, "
        f"regressed or unstable in the latest run), {worse} of them to worse; {len(single)} "
        "measured in one run only</p>",
        "<p class='facts'>Figures that moved come first, the most alarming and most worsened "
        "first. Each row: the latest run's value, the contract band of that run, the level "
        "of the run medians since the latest change point (before the latest run) ± their "
        "run-to-run spread, the latest change point (or the latest verdict's change), the "
        "latest outcome, and the run medians (red: change points). Open a row for its "
        "full plot (docs/judging.md).</p>",
        "<div class='filters'>",
    ]
    for attr, label in FILTERS:
        values = sorted({v.data[attr] for v in views})
        parts.append(f"<label>{label} <select name='{attr}' onchange='hpcvalFilter()'>"
                     "<option value=''>all</option>"
                     + "".join(f"<option>{esc(v)}</option>" for v in values)
                     + "</select></label>")
    parts.append("<label>name <input id='q' type='search' oninput='hpcvalFilter()'></label>"
                 f"<span><span id='shown'>{len(views)}</span> of {len(views)} shown</span>"
                 "</div>")
    parts.append(hr.figure_list_html(views, "figs-all", sortable=True))
    if single:
        parts.append(f"<h2 id='single'>Measured in one run only ({len(single)})</h2>"
                     "<table><tr><th>case</th><th>figure</th><th>value</th><th>run</th></tr>")
        for s in single:
            value = s.medians[0] if s.medians else None
            parts.append(f"<tr><td>{esc(s.case_key)}</td><td>{esc(s.variable)}</td>"
                         f"<td class='num'>{esc(rp.num(value))} {esc(s.unit)}</td>"
                         f"<td>{esc(s.points[0].run_id if s.points else '-')}</td></tr>")
        parts.append("</table>")
    parts.append(f"<script>{hr.PAGE_JS}{_FILTER_JS}</script></body></html>")
    return "".join(parts)
