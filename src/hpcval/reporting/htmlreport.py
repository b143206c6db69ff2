"""The HTML report: one self-contained page per run, with the figure list,
the history bands and the series a check recorded with
:meth:`hpcval.rfm.HpcvalTest.record_series` (for example the whole IMB table)
plotted with the judged reference band. Plots are inline SVG
(:mod:`hpcval.reporting.svgplot`); the rows are :mod:`hpcval.reporting.report`'s.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval.core.fileio import atomic_write
from hpcval.history.runreport import CaseResult, RunReport
from hpcval.reporting import sizereport, svgplot
from hpcval.reporting.report import (
    ALARMS,
    LOOSE_FACTOR,
    LOOSE_SPREADS,
    RANK,
    Row,
    RunHistory,
    area_counts,
    band_text,
    change_text,
    changes_since_previous,
    evidence,
    figure_rows,
    num,
    run_verdict,
)


def _plot_case(case: CaseResult, name: str, spec: dict[str, Any]) -> list[str]:
    """One log-log SVG panel per column of a recorded series, with each judged
    point and its reference band."""
    perf = {p.variable: p for p in case.perf}
    panels = []
    for label, col in spec.get("columns", {}).items():
        judged = []
        for var, where in spec.get("judged", {}).items():
            p = perf.get(var)
            if p is None or where.get("column") != label:
                continue
            lo, hi = p.bounds()
            judged.append(svgplot.Judged(float(where.get("x", 0)), p.value, lo, hi,
                                         p.result != "fail"))
        svg = svgplot.panel(f"{name}: {label}",
                            f"{spec.get('x_label', 'x')} [{spec.get('x_unit', '')}]",
                            f"{label} [{col.get('unit', '')}]",
                            [(float(x), y) for x, y in col.get("points", [])], judged)
        if svg:
            panels.append(svg)
    return panels


PAGE_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:1.2em auto;padding:0 1em;color:#222;max-width:1360px}
h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.15em;margin:1.2em 0 .4em}
p,li,h2,h3{overflow-wrap:anywhere}#areas td{overflow-wrap:normal}#areas{overflow-x:auto}
@media(max-width:480px){td,th{padding:.2em .35em}}
table{border-collapse:collapse;font-size:.9em;max-width:100%}
td,th{border:1px solid #ccc;padding:.25em .6em;overflow-wrap:anywhere;text-align:left}
th{background:#f0f0f0;white-space:nowrap;overflow-wrap:normal}td.num{text-align:right}
.num{font-variant-numeric:tabular-nums}
.PASS,.pass{color:#176a1d}.FAIL,.ERROR,.regressed,.unstable{color:#b00020;font-weight:bold}
.warn,.inconclusive,.interrupted{color:#8a5a00}.improved{color:#0b5394}
.no-baseline,.SKIP{color:#666}
.banner{font-size:1.15em;padding:.5em .8em;border-radius:4px;font-weight:bold;margin:.4em 0;
overflow-wrap:anywhere}
.banner.PASS{background:#e3f4e4}.banner.FAIL{background:#fbe3e6;color:#7a0015}
ul.attn{padding-left:1.2em;margin:.3em 0}ul.attn li{margin:.2em 0;overflow-wrap:anywhere}
.facts{font-size:.85em;color:#555;overflow-wrap:anywhere}
pre{background:#f7f7f7;padding:.5em;white-space:pre-wrap;overflow-wrap:anywhere}
.plots{display:flex;flex-wrap:wrap;gap:1em}
figure{margin:0 0 1.5em 0;max-width:100%}svg{max-width:100%;height:auto}
figcaption{font-size:.85em;max-width:640px;overflow-wrap:anywhere}
.figs{border-top:1px solid #ccc;font-size:.9em}
.fig{border-bottom:1px solid #e4e4e4}
.fig>summary,.fighead{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,.6fr)
minmax(0,.8fr) minmax(0,1.2fr) minmax(0,1.3fr) minmax(0,1.2fr) minmax(0,.9fr) 124px;
gap:.2em .6em;align-items:center;padding:.25em .3em;list-style:none;cursor:pointer}
.fig>summary::-webkit-details-marker{display:none}
.fig>summary:hover{background:#f6f8fb}.fig[open]>summary{background:#eef3fa}
.fighead{font-weight:bold;background:#f0f0f0;cursor:default}
.fig>summary>span{overflow-wrap:anywhere;min-width:0}
.fig .sub{display:block;color:#666;font-size:.85em}
.loose{display:block;color:#8a5a00;font-size:.8em}
.fig>.plot{padding:.4em 0 .8em}
.spark{display:block}
.fighead button{font:inherit;border:0;background:none;padding:0;cursor:pointer;text-align:left}
@media (max-width:760px){
 body{padding:0 .5em;margin:.5em auto}
 .fighead{display:none}
 .fig>summary{grid-template-columns:minmax(0,1fr) minmax(0,1fr)}
 .fig>summary>span:first-child{grid-column:1/3}
 .fig>summary>span[data-l]::before{content:attr(data-l) ": ";color:#777}
 table{font-size:.8em}
}
"""

#: Full plots are kept in ``<template>`` elements and drawn only when their
#: row is opened; the figures' list is sorted by a header's button.
PAGE_JS = """
document.addEventListener('toggle',function(e){var d=e.target;if(!d.open)return;
var t=d.querySelector(':scope>template');if(t){d.appendChild(t.content.cloneNode(true));
t.remove();}},true);
function hpcvalSort(b){var list=document.getElementById(b.dataset.list),k=b.dataset.key,
dir=b.dataset.dir==='1'?-1:1;b.dataset.dir=dir===1?'1':'0';
var rows=Array.prototype.slice.call(list.querySelectorAll(':scope>details'));
rows.sort(function(x,y){var a=x.dataset[k],c=y.dataset[k],p=parseFloat(a),q=parseFloat(c);
if(!isNaN(p)&&!isNaN(q))return dir*(p-q);return dir*a.localeCompare(c);});
rows.forEach(function(r){list.appendChild(r);});}
"""

_COLOURS = {"FAIL": "#d62728", "regressed": "#d62728", "unstable": "#d62728",
            "warn": "#b07800", "inconclusive": "#b07800", "improved": "#1f77b4"}


@dataclass
class FigureView:
    """One figure as a row of the report's and the trend page's figure lists."""

    name: str
    sub: str
    unit: str
    value: str
    band: str
    history_band: str
    change: str
    outcome: str
    series: Any = None
    bands: list[tuple[float | None, float | None, str, str]] = field(default_factory=list)
    loose: bool = False
    data: dict[str, str] = field(default_factory=dict)


HEADINGS = ("figure", "unit", "value", "contract band", "history band", "change", "outcome",
            "runs")


def figure_list_html(views: list[FigureView], list_id: str, sortable: bool = False) -> str:
    """Figures as rows (``<details>``: the row opens to the full plot)."""
    esc = html.escape
    head = []
    for h in HEADINGS:
        key = {"change": "change", "outcome": "rank", "figure": "name"}.get(h)
        if sortable and key:
            head.append(f"<span><button type='button' data-list='{list_id}' data-key='{key}' "
                        f"onclick='hpcvalSort(this)'>{h} &#8645;</button></span>")
        else:
            head.append(f"<span>{h}</span>")
    parts = [f"<div class='figs' id='{esc(list_id)}'><div class='fighead'>{''.join(head)}</div>"]
    for v in views:
        from hpcval.reporting import trend

        spark, plot = "", ""
        if v.series is not None and v.series.points:
            colour = _COLOURS.get(v.outcome.split()[0], "#1f77b4")
            spark = svgplot.sparkline(v.series.medians,
                                      [cp.index for cp in v.series.change_points], colour)
            plot = trend.plot(v.series, v.bands, compact=True)
        data = "".join(f" data-{k}='{esc(str(val))}'" for k, val in v.data.items())
        loose = ("<span class='loose'>cannot fail; tighten with <code>hpcval references "
                 "capture --from-history</code></span>" if v.loose else "")
        cells = [
            f"<span><b>{esc(v.name)}</b><span class='sub'>{esc(v.sub)}</span></span>",
            f"<span data-l='unit'>{esc(v.unit)}</span>",
            f"<span class='num' data-l='value'>{esc(v.value)}</span>",
            f"<span class='num' data-l='contract'>{esc(v.band)}{loose}</span>",
            f"<span class='num' data-l='history'>{esc(v.history_band)}</span>",
            f"<span class='num' data-l='change'>{esc(v.change)}</span>",
            f"<span class='{esc(v.outcome)}' data-l='outcome'>{esc(v.outcome)}</span>",
            f"<span>{spark}</span>",
        ]
        body = (f"<template><div class='plot'>{plot}</div></template>" if plot
                else "<div class='plot'>no history to plot</div>")
        parts.append(f"<details class='fig'{data}><summary>{''.join(cells)}</summary>"
                     f"{body}</details>")
    parts.append("</div>")
    return "".join(parts)


def history_band(detail: dict[str, Any], spread: float | None) -> str:
    """Baseline level and run-to-run spread: ``18,700 ± 1.5 % (5 runs)``."""
    level = detail.get("baseline_median")
    if not isinstance(level, int | float):
        return "-"
    runs = detail.get("level_runs", detail.get("baseline_runs"))
    text = f"{num(level)} ± {100 * spread:.1f} %" if spread else num(level)
    return text + (f" ({runs} run{'s' * (runs != 1)})" if isinstance(runs, int) else "")


def shown_outcome(outcome: str, verdict: str | None) -> str:
    """The outcome cell: where the band failed and the history moved too, both
    (``FAIL + regressed``), so the history verdict (and its change, in the row's
    change cell) is not hidden exactly where it matters."""
    if outcome == "FAIL" and verdict and verdict not in ("pass", "no-baseline", "-"):
        return f"FAIL + {verdict}"
    return outcome


def _view(r: Row) -> FigureView:
    p, d = r.perf, r.detail
    assert p is not None
    spread = r.spread()
    change = change_text(d)
    outcome = shown_outcome(r.outcome, r.verdict)
    bands: list[tuple[float | None, float | None, str, str]] = []
    lo, hi = p.bounds()
    if lo is not None or hi is not None:
        bands.append((lo, hi, "#2ca02c", "contract band"))
    level = d.get("baseline_median")
    if isinstance(level, int | float) and spread:
        bands.append((level * math.exp(-2 * spread), level * math.exp(2 * spread), "#1f77b4",
                      "history band (±2 spreads)"))
    return FigureView(p.variable, f"{r.case.display_name} · {r.where}", p.unit, num(p.value),
                      band_text(p), history_band(d, spread), change, outcome, r.series,
                      bands, r.outcome != "FAIL" and r.loose())


def render_html(report: RunReport, extra_sections: list[str] | None = None,
                history: RunHistory | None = None) -> str:
    """A self-contained HTML page. Its first screen: the run's verdict, what
    failed, regressed or became unstable (with evidence and its log), what
    changed since the previous run, the counts per area. Then one section per
    area, failures first, a row per figure."""
    s = report.session
    esc = html.escape
    rows = figure_rows(report, history)
    verdict, line = run_verdict(report, rows, history.run_id if history else "",
                                history.result if history else None)
    facts = [
        ("host", s.get("hostname")), ("started", s.get("time_start")),
        ("elapsed", f"{s.get('time_elapsed', 0):.1f} s" if s.get("time_elapsed") else None),
        ("ReFrame", s.get("version")), ("command", s.get("cmdline")),
        ("run report", str(report.path)),
    ]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<title>hpcval {esc(verdict)} {esc(str(s.get('time_start', '')))}</title>",
        f"<style>{PAGE_CSS}</style></head><body>",
        "<h1>hpcval validation report</h1>",
        f"<p class='banner {verdict}' id='verdict'>{esc(line)}</p>",
        f"<p class='facts'>{esc(report.headline())} · "
        + " · ".join(f"{esc(k)}: {esc(str(v))}" for k, v in facts if v) + "</p>",
    ]
    alarms = [r for r in rows if r.outcome in ALARMS]
    parts.append("<section id='attention'><h2>Needs attention</h2>")
    if alarms:
        parts.append("<ul class='attn'>")
        for r in alarms:
            log = r.log()
            link = (f" <a href='{esc(Path(log).as_uri())}'>log</a>"
                    if log and Path(log).is_absolute() else "")
            parts.append(f"<li><span class='{esc(r.outcome)}'>{esc(r.outcome.upper())}</span> "
                         f"{esc(r.case.display_name)} ({esc(r.where)}): {esc(evidence(r))}"
                         f"{link}</li>")
        parts.append("</ul>")
    else:
        parts.append("<p>Nothing failed, regressed or became unstable.</p>")
    parts.append("</section>")
    if history is not None and history.previous_id is not None:
        changed = changes_since_previous(report, history, rows)
        parts.append(f"<section id='changes'><h2>Since the previous run "
                     f"({esc(history.previous_id)})</h2>")
        if changed:
            parts.append("<ul class='attn'>" + "".join(f"<li>{esc(c)}</li>"
                                                       for c in changed[:30]) + "</ul>")
            if len(changed) > 30:
                parts.append(f"<p>and {len(changed) - 30} more.</p>")
        else:
            parts.append("<p>No case changed its result, no figure its outcome.</p>")
        parts.append("</section>")
    counts = area_counts(rows)
    shown = [o for o in sorted({o for _, c, _, _ in counts for o in c},
                               key=lambda o: RANK.get(o, 5))]
    parts.append("<section id='areas'><h2>Areas</h2><table><tr><th>area</th><th>cases</th>"
                 "<th>figures</th>" + "".join(f"<th>{esc(o)}</th>" for o in shown) + "</tr>")
    for area, c, n_cases, n_figs in counts:
        parts.append(f"<tr><td><a href='#area-{esc(area)}'>{esc(area)}</a></td>"
                     f"<td class='num'>{n_cases}</td><td class='num'>{n_figs}</td>"
                     + "".join(f"<td class='num {esc(o) if c[o] else ''}'>{c[o]}</td>"
                               for o in shown) + "</tr>")
    parts.append("</table></section>")
    loose = sum(1 for r in rows if r.perf is not None and r.outcome != "FAIL" and r.loose())
    if loose:
        parts.append(f"<p class='warn'>{loose} contract band(s) lie more than "
                     f"{LOOSE_SPREADS:g} run-to-run spreads (or {LOOSE_FACTOR:g}x, before a "
                     "spread is measured) from the values: they cannot fail; tighten with "
                     "<code>hpcval references capture --from-history</code> "
                     "(docs/references.md).</p>")
    for area, _, _, _ in counts:
        area_rows = [r for r in rows if r.area == area]
        parts.append(f"<section><h2 id='area-{esc(area)}'>{esc(area)}</h2>")
        failed_cases = [r for r in area_rows if r.perf is None and r.outcome == "FAIL"]
        for r in failed_cases:
            parts.append(f"<p class='FAIL'>{esc(r.case.display_name)} ({esc(r.where)}) failed "
                         f"before its figures: {esc(evidence(r))}</p>")
        views = [_view(r) for r in area_rows if r.perf is not None]
        if views:
            parts.append(figure_list_html(views, f"figs-{area}"))
        parts.append("</section>")
    plots = []
    for case in sorted(report.cases, key=lambda c: (c.display_name, c.environ)):
        for name, spec in case.series().items():
            panels = _plot_case(case, name, spec)
            if panels:
                plots.append(f"<figure><div class='plots'>{''.join(panels)}</div><figcaption>"
                             f"{esc(case.display_name)} on {esc(case.partition)}+"
                             f"{esc(case.environ)} ({esc(case.mpi_stack)}). Diamonds: judged "
                             "figures (red: failed); shaded: reference band; sizes of 0 B are "
                             "judged but not drawn on the log axis.</figcaption></figure>")
    if plots:
        parts.append("<h2>Measured series</h2>" + "".join(plots))
    parts.extend(sizereport.sizes_html(report.cases))
    skips = report.skip_reasons()
    if skips:
        parts.append("<h2>Skipped</h2><table><tr><th>cases</th><th>reason</th></tr>"
                     + "".join(f"<tr><td class='num'>{n}</td><td>{esc(reason)}</td></tr>"
                               for reason, n in skips) + "</table>")
    fails = [c for c in report.failures if c.fail_reason]
    if fails:
        parts.append("<h2>Failures</h2>")
        for c in fails:
            parts.append(f"<h3>{esc(c.display_name)} ({esc(c.environ)}), phase "
                         f"{esc(str(c.fail_phase))}</h3><pre>{esc(c.fail_reason or '')}</pre>")
    parts.extend(extra_sections or [])
    parts.append(f"<script>{PAGE_JS}</script></body></html>")
    return "\n".join(parts)


def write_html(report: RunReport, out: str | Path,
               extra_sections: list[str] | None = None,
               history: RunHistory | None = None) -> Path:
    """Write the HTML report atomically (never a half-written file; a full
    disk or a read-only directory is an environment fault, exit 3)."""
    return atomic_write(out, render_html(report, extra_sections, history),
                        "writing the HTML report")
