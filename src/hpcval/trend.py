"""Every figure's history with its change points, as text and as HTML.

A series is one figure of one test case across the site's stored runs (the
run's median, and its samples). Change points are found on the run medians
by :func:`hpcval.judging.change_points` (e-divisive means, as MongoDB's and
Apache Otava's performance CI do), so a slow drift over many runs or a step
that one noisy run cannot show is still found.
"""

from __future__ import annotations

import html
import math
import statistics
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from hpcval.store import HistoryPoint


@dataclass
class Series:
    case_key: str
    variable: str
    unit: str
    better: str
    points: list[HistoryPoint] = field(default_factory=list)
    change_points: list[Any] = field(default_factory=list)

    @property
    def worse_now(self) -> bool:
        """The latest change point moved the figure in its worse direction."""
        if not self.change_points:
            return False
        change = self.change_points[-1].change
        return change < 0 if self.better == "higher" else change > 0

    @property
    def medians(self) -> list[float]:
        return [median(p.samples) if p.samples else float("nan") for p in self.points]


def build(points: list[HistoryPoint]) -> list[Series]:
    """Group stored figures into series and find their change points."""
    from hpcval import judging

    grouped: dict[tuple[str, str], Series] = {}
    for p in points:
        if not p.samples:
            continue
        s = grouped.setdefault((p.case_key, p.variable),
                               Series(p.case_key, p.variable, p.unit, p.better))
        s.points.append(p)
    for s in grouped.values():
        s.change_points = judging.change_points(s.medians)
    return [grouped[k] for k in sorted(grouped)]


def _pct(v: float | None) -> str:
    return f"{100 * v:+.1f} %" if v is not None else "-"


def text(series: list[Series]) -> str:
    lines = []
    for s in series:
        head = f"{s.case_key}  {s.variable} [{s.unit}]: {len(s.points)} run(s)"
        if not s.change_points:
            lines.append(f"{head}, no change point")
            continue
        lines.append(f"{head}, {len(s.change_points)} change point(s):")
        for cp in s.change_points:
            run = s.points[cp.index].run_id
            lines.append(f"  at run {run}: {cp.before:.4g} -> {cp.after:.4g} {s.unit} "
                         f"({_pct(cp.change)}, p = {cp.p_value:.2g})")
    return "\n".join(lines) + "\n"


def plot(s: Series, bands: list[tuple[float | None, float | None, str, str]] = (),
         compact: bool = False) -> str:
    """One figure as inline SVG: samples (grey dots), run medians (line),
    change points (red lines), runs left out of baselines (red crosses) and
    ``bands`` (the contract band, the history band: see
    :func:`hpcval.svgplot.history_panel`). Drawn by :mod:`hpcval.svgplot`:
    milliseconds per figure, nothing heavy imported, so a validation can
    afford it for every figure."""
    from hpcval import svgplot

    return svgplot.history_panel(
        s.case_key, f"{s.variable} [{s.unit}]", [list(p.samples) for p in s.points],
        s.medians, [(cp.index, _pct(cp.change)) for cp in s.change_points],
        [i for i, p in enumerate(s.points) if not p.accepted], bands, compact) or ""


def html_section(series: list[Series], title: str = "Trends") -> str:
    esc = html.escape
    parts = [f"<h2>{esc(title)}</h2><p>Each figure over the site's stored runs: grey dots are "
             "samples, the line joins run medians, red lines mark change points "
             "(docs/judging.md).</p><div class='plots'>"]
    for s in series:
        parts.append(f"<figure>{plot(s)}"
                     f"<figcaption>{esc(s.case_key)} {esc(s.variable)}</figcaption></figure>")
    parts.append("</div>")
    return "".join(parts)


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
    from hpcval import report as rp

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
            change = f"{_pct(cp.change)} at run {cp.index + 1}"
        elif isinstance(detail.get("change"), int | float):
            change = f"{_pct(detail['change'])} (latest run)"
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
        views.append(rp.FigureView(
            s.variable, s.case_key, s.unit, rp.num(medians[-1] if medians else None), band,
            hband, change, outcome, s, band_list, perf is not None and outcome != "FAIL"
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
        f"<title>hpcval trends {esc(site)}</title><style>{rp.PAGE_CSS}"
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
    parts.append(rp.figure_list_html(views, "figs-all", sortable=True))
    if single:
        parts.append(f"<h2 id='single'>Measured in one run only ({len(single)})</h2>"
                     "<table><tr><th>case</th><th>figure</th><th>value</th><th>run</th></tr>")
        for s in single:
            value = s.medians[0] if s.medians else None
            parts.append(f"<tr><td>{esc(s.case_key)}</td><td>{esc(s.variable)}</td>"
                         f"<td class='num'>{esc(rp.num(value))} {esc(s.unit)}</td>"
                         f"<td>{esc(s.points[0].run_id if s.points else '-')}</td></tr>")
        parts.append("</table>")
    parts.append(f"<script>{rp.PAGE_JS}{_FILTER_JS}</script></body></html>")
    return "".join(parts)
